// How nanovllm-bench's parent asks a benchmark process (one tp size, bench/nanovllm_bench_worker.h)
// to stop: a socket pair, one end each. The parent writes one byte, the stop signal it received;
// closing its end (the parent died) reads as end-of-file. The benchmark process looks between
// engine steps without consuming the byte (MSG_PEEK), so rank 0 under tensor parallelism and
// the process that launched it read the same request. The benchmark then ends its current step,
// dismisses the workers, says so in one line naming nanovllm-bench and exits 128 + signal.
#pragma once

#include <stdexcept>
#include <string>

namespace nanovllm::bench {

// The two ends: parent_fd stays in the parent (close-on-exec), worker_fd is inherited by the
// benchmark process (--child-stop-fd). Throws std::runtime_error when socketpair fails.
struct StopChannel {
  int parent_fd = -1;
  int worker_fd = -1;
};
StopChannel make_stop_channel();
// The parent: ask the benchmark process to stop because of `sig`.
void send_stop(int parent_fd, int sig);

// The benchmark process: the end to watch (-1: none, the stop never comes).
void set_stop_fd(int worker_fd);
// stop_signal() once the parent is gone (it can have been no stop signal: those are caught).
inline constexpr int kParentGone = 9;  // SIGKILL
// The stop the parent asked for: its signal; kParentGone; 0: go on.
int stop_signal();
// "SIGTERM (Terminated) from nanovllm-bench", or "its parent nanovllm-bench is gone".
std::string describe_stop(int sig);

// Thrown between steps once stop_signal() is set; caught by the benchmark's rank-0 body.
struct BenchStopped : std::runtime_error {
  explicit BenchStopped(int sig);
  int signal;
};
// Throws BenchStopped when the parent asked to stop.
void throw_if_stopped();

}  // namespace nanovllm::bench
