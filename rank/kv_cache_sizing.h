// How many KV-cache blocks a rank allocates. Every rank must allocate the same count (rank 0's
// block manager hands out block ids that index every rank's cache). On the CPU backend the
// count is a pure function of the flags and the model, computed before fork; on CUDA it is
// measured by each rank's ModelRunner after loading weights and a warm-up (the ranks agree on
// the smallest), so the plan here is 0 = "size from memory" unless overridden.
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/tensor.h"
#include "layers/model_config.h"

namespace nanovllm {

struct KvCacheSizing {
  std::optional<int> num_blocks_override;  // --num-gpu-blocks-override (any device)
  double cpu_kv_cache_space_gib = 4.0;     // --cpu-kv-cache-space (CPU backend)
  int block_size = 256;
  int tp_size = 1;
};

// CPU: floor(space / kv_block_bytes). Returns 0 when not even one block fits.
int cpu_kv_cache_blocks(double space_gib, size_t block_bytes);

// The count for this run: the override, else on the CPU floor(space / block bytes), else on
// CUDA 0 ("size from memory": rank/gpu_memory_budget.h after the warm-up). Touches no CUDA, so
// the launcher calls it before fork. Throws std::runtime_error when the CPU cache cannot hold
// a single block.
int plan_kv_cache_blocks(const KvCacheSizing& sizing, const ModelConfig& config, Device device);

}  // namespace nanovllm
