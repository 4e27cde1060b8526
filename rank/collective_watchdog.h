// Waits for work that involves collectives without ever blocking the host for good. A rank
// whose peer died would sit in cudaStreamSynchronize forever (NCCL's kernels spin on the GPU
// waiting for data that never comes), so instead the watchdog polls: a completion query
// (cudaStreamQuery, or "the nonblocking communicator left ncclInProgress"), the
// communicator's asynchronous error, and a stop predicate (is rank 0 / the launcher alive?).
// When the communicator reports an error, the predicate fires or the wait runs past its limit,
// it aborts the communicator (ncclCommAbort makes NCCL's kernels return) and throws
// CollectiveError naming the rank, the collective and the reason. Everything it calls is a
// std::function, so the tests drive it with fakes on the CPU.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>

namespace nanovllm {

// An environment failure (a peer or the launcher is gone, the network failed), not a bug: the
// rank prints it and exits non-zero, like IpcError.
struct CollectiveError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct WatchdogPolicy {
  // Pure polling first (a decode step's collectives finish within it, so the wait adds no
  // sleep latency), then sleeps that double from 10 us up to max_sleep.
  std::chrono::microseconds spin{2000};
  std::chrono::microseconds max_sleep{1000};
  // How often the stop predicate runs (it may read /proc); it also runs once when a wait
  // gives up spinning.
  std::chrono::milliseconds stop_interval{50};
  std::chrono::milliseconds timeout{0};  // overall limit of one wait; 0 = none
};

// The communicator as the watchdog sees it: NcclCommunicator's, or fakes in the tests.
struct CollectiveProbe {
  std::function<std::string()> async_error;  // "" while healthy, else what went wrong
  std::function<void()> abort;               // ends the communicator's work for good
};

// true: stop waiting (a peer or the launcher is gone). It may also throw; its message then
// becomes the reason.
using StopPredicate = std::function<bool()>;

class CollectiveWatchdog {
 public:
  CollectiveWatchdog(int rank, CollectiveProbe probe, StopPredicate stop,
                     WatchdogPolicy policy = {});

  // Returns once done() is true. Checks the probe's async error before every done() (so an
  // error that also ends the work is still reported). Throws CollectiveError, after calling
  // the probe's abort once, on an async error, a fired stop predicate or the timeout; also at
  // once when an earlier wait aborted. `what` names the collective in the message.
  void wait_until(const std::function<bool()>& done, const std::string& what);
  // wait_until(cudaStreamQuery(stream) == cudaSuccess). Another CUDA error aborts the
  // communicator and is a CheckError naming the CUDA error. Not while the stream is being
  // captured into a CUDA graph (a query would invalidate the capture).
  void wait_stream(cudaStream_t stream, const std::string& what);

  // Aborts the communicator (once; later calls do nothing) without throwing.
  void abort() noexcept;
  bool aborted() const { return aborted_; }
  int rank() const { return rank_; }

 private:
  [[noreturn]] void fail(const std::string& what, const std::string& reason);
  // The stop predicate's verdict as a reason; "" to go on.
  std::string stop_reason() const;

  int rank_;
  CollectiveProbe probe_;
  StopPredicate stop_;
  WatchdogPolicy policy_;
  bool aborted_ = false;
};

}  // namespace nanovllm
