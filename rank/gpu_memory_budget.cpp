#include "rank/gpu_memory_budget.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace nanovllm {

std::string format_gib(double bytes) {
  return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024.0 * 1024.0));
}

namespace {
// Every term of the budget, in the order it is computed (start-up log and error alike).
std::string budget_terms(const GpuMemoryMeasurements& m, const GpuMemoryBudget& b) {
  const auto gib = [](auto bytes) { return format_gib(static_cast<double>(bytes)); };
  return fmt::format(
      "total {} x utilization {:.2f} = {} budget; other processes + CUDA context {}; weights {}; "
      "warm-up activations {} held + {} transient; cuBLAS workspace {}; CUDA graphs {} "
      "(estimate); left for the KV cache {}",
      gib(m.total_bytes), m.gpu_memory_utilization, gib(b.budget_bytes), gib(b.other_bytes),
      gib(m.weights_bytes), gib(m.activation_held_bytes), gib(m.activation_transient_bytes),
      gib(m.cublas_workspace_bytes), gib(m.cuda_graph_bytes), gib(b.kv_cache_bytes));
}

double mib(uint64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}
}  // namespace

std::string describe_gpu_memory(const GpuMemoryMeasurements& m, const GpuMemoryBudget& b) {
  return fmt::format("GPU memory: {} = {} blocks of {:.2f} MiB", budget_terms(m, b), b.num_blocks,
                     mib(m.kv_block_bytes));
}

GpuMemoryBudget plan_gpu_memory(const GpuMemoryMeasurements& m) {
  GpuMemoryBudget b;
  if (!(m.gpu_memory_utilization > 0.0 && m.gpu_memory_utilization <= 1.0)) {
    b.error =
        fmt::format("gpu_memory_utilization must be in (0, 1], got {}", m.gpu_memory_utilization);
    return b;
  }
  if (m.total_bytes == 0 || m.free_bytes > m.total_bytes || m.kv_block_bytes == 0) {
    b.error = fmt::format("implausible GPU memory figures: total {} B, free {} B, KV block {} B",
                          m.total_bytes, m.free_bytes, m.kv_block_bytes);
    return b;
  }
  b.budget_bytes = static_cast<uint64_t>(
      std::floor(static_cast<double>(m.total_bytes) * m.gpu_memory_utilization));
  // What the device shows as used, minus what we know we hold, is someone else's (or the CUDA
  // context's). Measurement skew (allocation granularity) must not make it negative.
  const uint64_t used = m.total_bytes - m.free_bytes;
  const uint64_t held = m.weights_bytes + m.activation_held_bytes + m.cublas_workspace_bytes;
  b.other_bytes = used > held ? used - held : 0;
  b.own_peak_bytes = m.weights_bytes + m.activation_held_bytes + m.activation_transient_bytes +
                     m.cublas_workspace_bytes + m.cuda_graph_bytes;
  // Signed: every term is far below 2^63.
  b.kv_cache_bytes = static_cast<int64_t>(b.budget_bytes) - static_cast<int64_t>(b.other_bytes) -
                     static_cast<int64_t>(b.own_peak_bytes);
  const int64_t blocks =
      b.kv_cache_bytes > 0 ? b.kv_cache_bytes / static_cast<int64_t>(m.kv_block_bytes) : 0;
  if (blocks <= 0) {
    b.error = fmt::format(
        "no room for the KV cache: {}, less than one KV block ({:.2f} MiB); raise "
        "gpu_memory_utilization or lower max_num_batched_tokens / max_num_seqs",
        budget_terms(m, b), mib(m.kv_block_bytes));
    return b;
  }
  b.num_blocks = blocks;
  return b;
}

}  // namespace nanovllm
