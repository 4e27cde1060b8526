#include "rank/collective_watchdog.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <thread>
#include <utility>

#include "kernels/check.h"

namespace nanovllm {

CollectiveWatchdog::CollectiveWatchdog(int rank, CollectiveProbe probe, StopPredicate stop,
                                       WatchdogPolicy policy)
    : rank_(rank), probe_(std::move(probe)), stop_(std::move(stop)), policy_(policy) {
  CHECK(probe_.async_error && probe_.abort);
}

void CollectiveWatchdog::abort() noexcept {
  if (aborted_) return;
  aborted_ = true;
  try {
    probe_.abort();
  } catch (const std::exception& e) {  // the rank is failing already: report, do not mask
    spdlog::error("rank {}: aborting the communicator failed too: {}", rank_, e.what());
  }
}

void CollectiveWatchdog::fail(const std::string& what, const std::string& reason) {
  abort();
  throw CollectiveError("rank " + std::to_string(rank_) + ": " + what + " aborted: " + reason);
}

std::string CollectiveWatchdog::stop_reason() const {
  if (!stop_) return "";
  try {
    return stop_() ? "the stop predicate fired (a peer rank or the launcher is gone)" : "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

void CollectiveWatchdog::wait_until(const std::function<bool()>& done, const std::string& what) {
  if (aborted_) fail(what, "the communicator was aborted earlier");
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_stop_check = start + policy_.spin;
  std::chrono::microseconds sleep{0};
  for (;;) {
    if (const std::string error = probe_.async_error(); !error.empty()) fail(what, error);
    if (done()) return;
    const auto now = Clock::now();
    if (now >= next_stop_check) {
      if (const std::string reason = stop_reason(); !reason.empty()) fail(what, reason);
      next_stop_check = now + policy_.stop_interval;
    }
    if (policy_.timeout.count() > 0 && now - start >= policy_.timeout)
      fail(what, "timed out after " + std::to_string(policy_.timeout.count()) + " ms");
    if (now - start < policy_.spin) {
      std::this_thread::yield();
    } else {
      sleep = std::clamp(sleep * 2, std::chrono::microseconds(10), policy_.max_sleep);
      std::this_thread::sleep_for(sleep);
    }
  }
}

void CollectiveWatchdog::wait_stream(cudaStream_t stream, const std::string& what) {
  wait_until(
      [&] {
        const cudaError_t e = cudaStreamQuery(stream);
        if (e == cudaErrorNotReady) return false;
        if (e != cudaSuccess) {
          abort();  // the context is broken: peers must not wait on this rank's collectives
          check_fail(__FILE__, __LINE__,
                     "cudaStreamQuery during " + what + " failed: " + cudaGetErrorString(e));
        }
        return true;
      },
      what);
}

}  // namespace nanovllm
