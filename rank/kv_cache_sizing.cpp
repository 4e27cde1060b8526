#include "rank/kv_cache_sizing.h"

#include <cuda_runtime.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/check.h"
#include "rank/model_runner.h"

namespace nanovllm {

namespace {
// Activations, workspaces and the CUDA context: kept free next to weights and cache.
constexpr uint64_t kCudaReserveBytes = 1ull << 30;
}  // namespace

int cpu_kv_cache_blocks(double space_gib, size_t block_bytes) {
  CHECK_GT(block_bytes, 0u);
  const double blocks = std::floor(space_gib * 1073741824.0 / static_cast<double>(block_bytes));
  return blocks <= 0 ? 0 : static_cast<int>(std::min(blocks, 2147483647.0));
}

int cuda_kv_cache_blocks(uint64_t gpu_total_bytes, double utilization, uint64_t weight_bytes,
                         uint64_t reserve_bytes, size_t block_bytes) {
  CHECK_GT(block_bytes, 0u);
  const double room = static_cast<double>(gpu_total_bytes) * utilization -
                      static_cast<double>(weight_bytes) - static_cast<double>(reserve_bytes);
  if (room <= 0) return 0;
  return static_cast<int>(std::min(std::floor(room / static_cast<double>(block_bytes)), 2147483647.0));
}

uint64_t checkpoint_bytes(const std::filesystem::path& model_dir) {
  uint64_t total = 0;
  for (const auto& entry : std::filesystem::directory_iterator(model_dir))
    if (entry.is_regular_file() && entry.path().extension() == ".safetensors")
      total += entry.file_size();
  return total;
}

int plan_kv_cache_blocks(const KvCacheSizing& sizing, const ModelConfig& config,
                         const std::filesystem::path& model_dir, Device device) {
  const size_t block_bytes = ModelRunner::kv_block_bytes(config, sizing.tp_size, sizing.block_size);
  if (sizing.num_blocks_override) return *sizing.num_blocks_override;
  int blocks = 0;
  std::string basis;
  if (device == Device::CPU) {
    blocks = cpu_kv_cache_blocks(sizing.cpu_kv_cache_space_gib, block_bytes);
    basis = "--cpu-kv-cache-space " + std::to_string(sizing.cpu_kv_cache_space_gib) + " GiB";
  } else {
    size_t free_bytes = 0, total_bytes = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const uint64_t weights = checkpoint_bytes(model_dir) / static_cast<uint64_t>(sizing.tp_size);
    blocks = cuda_kv_cache_blocks(total_bytes, sizing.gpu_memory_utilization, weights,
                                  kCudaReserveBytes, block_bytes);
    spdlog::warn("KV cache sized by a heuristic (GPU total x {} - weights - 1 GiB reserve); "
                 "sizing from measured peak memory after a warm-up is a later issue; "
                 "--num-gpu-blocks-override sets it exactly", sizing.gpu_memory_utilization);
    basis = "--gpu-memory-utilization " + std::to_string(sizing.gpu_memory_utilization);
  }
  if (blocks <= 0)
    throw std::runtime_error("the KV cache cannot hold one block of " +
                             std::to_string(block_bytes) + " bytes with " + basis +
                             "; raise it or set --num-gpu-blocks-override");
  return blocks;
}

}  // namespace nanovllm
