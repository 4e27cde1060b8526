// How many KV-cache blocks fit on this GPU (nano-vllm's allocate_kv_cache arithmetic), as a
// pure function of numbers the model runner measures after its warm-up, so it can be tested
// without a GPU. Every term is this process's own except `other`, which is what the device
// shows as used beyond what we hold (other processes and our CUDA context).
#pragma once

#include <cstdint>
#include <string>

namespace nanovllm {

struct GpuMemoryMeasurements {
  uint64_t total_bytes = 0;                 // the device's memory (cudaMemGetInfo total)
  uint64_t free_bytes = 0;                  // free after the warm-up, the held terms still held
  uint64_t weights_bytes = 0;               // held: this rank's weights
  uint64_t activation_held_bytes = 0;       // held: workspace, logits, step inputs after warm-up
  uint64_t activation_transient_bytes = 0;  // freed again: the warm-up's stream-ordered peak
  uint64_t cublas_workspace_bytes = 0;      // held
  uint64_t cuda_graph_bytes = 0;            // not yet allocated: estimate for the decode graphs
  uint64_t kv_block_bytes = 0;              // one block, K and V, every layer
  double gpu_memory_utilization = 0.9;      // fraction of total this process may fill
};

struct GpuMemoryBudget {
  uint64_t budget_bytes = 0;    // total * utilization
  uint64_t other_bytes = 0;     // total - free - what we hold (never below 0)
  uint64_t own_peak_bytes = 0;  // weights + activations (held + transient) + cuBLAS + graphs
  int64_t kv_cache_bytes = 0;   // budget - other - own_peak (negative: does not fit)
  int64_t num_blocks = 0;       // floor(kv_cache_bytes / kv_block_bytes); 0 on error
  std::string error;            // non-empty when not one block fits or an input is invalid

  bool ok() const { return error.empty(); }
};

// The KV cache gets what the utilization leaves after everything else at its peak. A
// non-positive block count is returned as an error naming every term (GiB, 2 decimals).
GpuMemoryBudget plan_gpu_memory(const GpuMemoryMeasurements& m);

// One line per term, for the start-up log.
std::string describe_gpu_memory(const GpuMemoryMeasurements& m, const GpuMemoryBudget& b);

// Bytes as GiB with 2 decimals ("1.50 GiB"); negative values keep their sign.
std::string format_gib(double bytes);

}  // namespace nanovllm
