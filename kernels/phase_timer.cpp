#include "kernels/phase_timer.h"

#include <utility>

#include "kernels/check.h"

namespace nanovllm {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::kAttention:
      return "attention";
    case Phase::kGemm:
      return "gemm";
    case Phase::kElementwise:
      return "elementwise";
    case Phase::kAllReduce:
      return "all_reduce";
    case Phase::kSampling:
      return "sampling";
    case Phase::kLogitsGather:
      return "logits_gather";
  }
  return "?";
}

PhaseTimer::~PhaseTimer() {
  for (Interval& i : intervals_) {
    // Destructors do not throw: a failure here only leaks two events.
    if (i.start) cudaEventDestroy(i.start);
    if (i.stop) cudaEventDestroy(i.stop);
  }
}

PhaseTimer::Interval& PhaseTimer::next_interval(Phase phase) {
  if (pending_ == intervals_.size()) {
    Interval fresh{phase};
    if (device_ == Device::kCuda) {
      CUDA_CHECK(cudaEventCreate(&fresh.start));
      CUDA_CHECK(cudaEventCreate(&fresh.stop));
    }
    intervals_.push_back(fresh);
  }
  Interval& i = intervals_[pending_++];
  i.phase = phase;
  return i;
}

bool PhaseTimer::begin(Phase phase, cudaStream_t stream) {
  if (open_) return false;
  open_ = true;
  Interval& i = next_interval(phase);
  if (device_ == Device::kCuda)
    CUDA_CHECK(cudaEventRecord(i.start, stream));
  else
    i.host_start = Clock::now();
  return true;
}

void PhaseTimer::end(cudaStream_t stream) noexcept {
  CHECK(open_ && pending_ > 0);  // our bug, not a runtime failure: terminates (noexcept)
  open_ = false;
  Interval& i = intervals_[pending_ - 1];
  if (device_ == Device::kCuda) {
    const cudaError_t e = cudaEventRecord(i.stop, stream);
    if (e != cudaSuccess && end_error_ == cudaSuccess) end_error_ = e;
  } else {
    i.host_stop = Clock::now();
  }
}

PhaseTimes PhaseTimer::collect() {
  CHECK_MSG(!open_, "collect() inside an open phase");
  if (end_error_ != cudaSuccess) {
    const cudaError_t e = std::exchange(end_error_, cudaSuccess);
    pending_ = 0;  // a stop event went unrecorded: this step's intervals are dropped
    CHECK_MSG(false, "a phase's closing cudaEventRecord failed: " << cudaGetErrorString(e));
  }
  PhaseTimes totals{};
  for (size_t k = 0; k < pending_; ++k) {
    const Interval& i = intervals_[k];
    double ms = 0;
    if (device_ == Device::kCuda) {
      CUDA_CHECK(cudaEventSynchronize(i.stop));
      float elapsed = 0;
      CUDA_CHECK(cudaEventElapsedTime(&elapsed, i.start, i.stop));
      ms = elapsed;
    } else {
      ms = std::chrono::duration<double, std::milli>(i.host_stop - i.host_start).count();
    }
    totals[static_cast<size_t>(i.phase)] += ms;
  }
  pending_ = 0;
  return totals;
}

}  // namespace nanovllm
