#include "rank/kv_cache_sizing.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/check.h"
#include "rank/model_runner.h"

namespace nanovllm {

int cpu_kv_cache_blocks(double space_gib, size_t block_bytes) {
  CHECK_GT(block_bytes, 0u);
  const double blocks = std::floor(space_gib * 1073741824.0 / static_cast<double>(block_bytes));
  return blocks <= 0 ? 0 : static_cast<int>(std::min(blocks, 2147483647.0));
}

int plan_kv_cache_blocks(const KvCacheSizing& sizing, const ModelConfig& config, Device device) {
  if (sizing.num_blocks_override) return *sizing.num_blocks_override;
  if (device == Device::kCuda) return 0;  // measured by the ModelRunner after its warm-up
  const size_t block_bytes = ModelRunner::kv_block_bytes(config, sizing.tp_size, sizing.block_size);
  const int blocks = cpu_kv_cache_blocks(sizing.cpu_kv_cache_space_gib, block_bytes);
  if (blocks <= 0)
    throw std::runtime_error("the KV cache cannot hold one block of " +
                             std::to_string(block_bytes) + " bytes with --cpu-kv-cache-space " +
                             std::to_string(sizing.cpu_kv_cache_space_gib) +
                             " GiB; raise it or set --num-gpu-blocks-override");
  return blocks;
}

}  // namespace nanovllm
