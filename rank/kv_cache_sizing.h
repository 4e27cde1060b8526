// How many KV-cache blocks a rank allocates. Every rank must allocate the same count (rank 0's
// block manager hands out block ids that index every rank's cache), so the count is a pure
// function of the flags, the model and the device, computed identically everywhere.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "kernels/tensor.h"
#include "layers/model_config.h"

namespace nanovllm {

struct KvCacheSizing {
  std::optional<int> num_blocks_override;  // --num-gpu-blocks-override (any device)
  double cpu_kv_cache_space_gib = 4.0;     // --cpu-kv-cache-space (CPU backend)
  double gpu_memory_utilization = 0.9;     // --gpu-memory-utilization (CUDA)
  int block_size = 256;
  int tp_size = 1;
};

// CPU: floor(space / kv_block_bytes). Returns 0 when not even one block fits.
int cpu_kv_cache_blocks(double space_gib, size_t block_bytes);

// CUDA stop-gap (measured sizing after a warm-up is a later issue):
// floor((total * utilization - weight_bytes - reserve_bytes) / block_bytes), 0 when negative.
int cuda_kv_cache_blocks(uint64_t gpu_total_bytes, double utilization, uint64_t weight_bytes,
                         uint64_t reserve_bytes, size_t block_bytes);

// Bytes of the checkpoint's *.safetensors files (the weights' size, every rank together).
uint64_t checkpoint_bytes(const std::filesystem::path& model_dir);

// The count for this run. CPU needs nothing but the flags; CUDA reads the device's total
// memory (creates a CUDA context: call it in a rank, never in the launcher before fork).
// Throws std::runtime_error when the cache cannot hold a single block.
int plan_kv_cache_blocks(const KvCacheSizing& sizing, const ModelConfig& config,
                         const std::filesystem::path& model_dir, Device device);

}  // namespace nanovllm
