// Time per phase of a forward pass (attention, GEMMs, element-wise, all-reduce, sampling),
// for the benchmark's eager profiling runs. The layers open a PhaseScope around each group
// of kernel launches; it does nothing unless the ExecContext carries a PhaseTimer, which only
// a profiling run sets (never during CUDA-graph capture: an event record would be captured).
// On CUDA each scope records a pair of CUDA events on the context's stream, so the phases
// are GPU times; the CPU kernels are synchronous, so there the host clock is the phase time.
// Nested scopes count once, in the outermost phase (a scope inside a timed one is a no-op).
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/exec_context.h"
#include "kernels/tensor.h"

namespace nanovllm {

// kLogitsGather: the vocabulary-parallel LM head's gather of every rank's logits to rank 0
// (tensor parallelism), apart from the all-reduces because it grows with the vocabulary and
// the batch, not with the hidden size.
enum class Phase : uint8_t {
  kAttention,
  kGemm,
  kElementwise,
  kAllReduce,
  kSampling,
  kLogitsGather
};
inline constexpr size_t kNumPhases = 6;
// "attention", "gemm", "elementwise", "all_reduce", "sampling", "logits_gather" (the benchmark
// JSON's keys).
const char* phase_name(Phase phase);

// Milliseconds per phase, indexed by Phase.
using PhaseTimes = std::array<double, kNumPhases>;

class PhaseTimer {
 public:
  explicit PhaseTimer(Device device) : device_(device) {}
  ~PhaseTimer();
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

  // Start / end of a phase on `stream` (CUDA) or now (CPU). begin returns false, and the
  // matching end must then be skipped, when another phase is open (nesting). end never throws:
  // PhaseScope calls it from its destructor, where a throw would end the process
  // (std::terminate) before the rank could report anything. A failed event record (the
  // context broke, e.g. a kernel trapped) is kept and thrown by collect(); until then the next
  // checked CUDA call reports it.
  bool begin(Phase phase, cudaStream_t stream);
  void end(cudaStream_t stream) noexcept;

  // Waits for the recorded work, returns each phase's total since the last collect() and
  // starts over (the events are reused).
  PhaseTimes collect();
  // Scopes recorded since the last collect() (tests: zero when nothing was timed).
  size_t num_pending() const { return pending_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Interval {
    Phase phase;
    cudaEvent_t start = nullptr, stop = nullptr;  // CUDA
    Clock::time_point host_start, host_stop;      // CPU
  };
  Interval& next_interval(Phase phase);

  Device device_;
  std::vector<Interval> intervals_;  // the first pending_ are this step's; events kept
  size_t pending_ = 0;
  bool open_ = false;
  cudaError_t end_error_ = cudaSuccess;  // the first failed record of an end()
};

// RAII: times its lifetime as `phase` when ctx carries a timer; otherwise a null check.
class PhaseScope {
 public:
  PhaseScope(const ExecContext& ctx, Phase phase) : timer_(ctx.phase_timer), stream_(ctx.stream) {
    if (timer_ && !timer_->begin(phase, stream_)) timer_ = nullptr;
  }
  ~PhaseScope() {
    if (timer_) timer_->end(stream_);
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  PhaseTimer* timer_;
  cudaStream_t stream_;
};

}  // namespace nanovllm
