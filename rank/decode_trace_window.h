// The window of decode graph replays a kernel timeline covers (kernels/kernel_trace.h): off
// unless NANOVLLM_KERNEL_TRACE_DIR is set in a build with the stamps; then replays FIRST..LAST of
// NANOVLLM_KERNEL_TRACE_STEPS (counted from 0 per runner, among the replays of
// NANOVLLM_KERNEL_TRACE_BATCH rows where that is set) are stamped and dumped, once, to
// DIR/trace_rank<R>_pid<P>_<N>.bin (N counts this process's dumps: a benchmark makes several
// runners one after the other).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/kernel_trace.h"

namespace nanovllm {

class DecodeTraceWindow {
 public:
  // Allocates the stamps' buffers where tracing is on; call before graph capture.
  explicit DecodeTraceWindow(int rank);
  void before_replay(cudaStream_t stream, int64_t batch);
  // `batch`: the replayed graph's rows (in the dump's log line).
  void after_replay(cudaStream_t stream, int64_t batch);

 private:
  bool on_ = false;
  int rank_ = 0;
  kernels::KernelTraceWindow window_;
  int replays_ = 0;  // decode graph replays (of window_.batch rows) so far
};

}  // namespace nanovllm
