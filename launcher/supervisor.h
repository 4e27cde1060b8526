// The launcher's process supervision: one uniquely named shared-memory segment for the run,
// one forked child per rank, stop signals forwarded, and when a child dies abnormally (or a
// tick hook, e.g. the stall watchdog, finds the run broken) the rest are stopped, the segment
// removed and the failing rank named. Protocol: ipc/README.md.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ipc/shm_segment.h"

namespace nanovllm {

// A rank as the tick hook sees it.
struct RankState {
  int rank = -1;
  pid_t pid = 0;
  bool running = false;  // false once it exited (and was reaped)
};

// What a tick hook found: the run is torn down as after a rank failure (exit code 1).
struct TickFailure {
  int rank = -1;        // the rank to blame (SupervisorResult::failed_rank)
  std::string message;  // SupervisorResult::message
};

// Asked by the supervision loop on every tick (20 ms) while no stop is under way, with every
// rank by index. It runs in the launcher, which a stopped or hung rank cannot block.
using TickHook = std::function<std::optional<TickFailure>(const std::vector<RankState>& ranks)>;

struct SupervisorOptions {
  std::string segment_prefix = "nanovllm";  // segment "<prefix>-<launcher pid>-<random hex>"
  size_t segment_bytes = 4096;              // the ring + communicator regions the caller lays out
  // After a rank failed: SIGTERM to the rest, SIGKILL to those still running after this.
  std::chrono::milliseconds kill_grace{2000};
  // After a stop signal (engine/job/interrupt.h: kStopSignals) was forwarded: how long the
  // ranks may take to finish (rank 0 writes out what is done) before SIGKILL. A second signal
  // kills at once.
  std::chrono::milliseconds interrupt_grace{8000};
  // How messages name process i ("rank 1", "replica 2 rank 0"); empty: "rank <i>".
  std::function<std::string(int index)> rank_name;
};

// How one rank ended.
struct RankExit {
  int rank = -1;
  std::string name;  // SupervisorOptions::rank_name's
  pid_t pid = 0;
  bool signaled = false;  // true: killed by `signal`; false: exited with `exit_code`
  int exit_code = 0;
  int signal = 0;
  bool ok() const { return !signaled && exit_code == 0; }
  std::string describe() const;  // "rank 1 (pid 123) was killed by signal 9 (Killed)"
};

struct SupervisorResult {
  int exit_code = 0;               // for the launcher's main: 0, 1 (a rank failed), 128 + signal
  std::string message;             // empty on success; else names the rank and its signal/code
  std::optional<int> failed_rank;  // the first rank that died abnormally (or the hook blamed)
  int interrupted_by = 0;          // the stop signal the launcher received (0: none)
  std::vector<RankExit> ranks;     // by rank
  std::chrono::milliseconds teardown{0};  // first failure seen -> all children reaped
};

class Supervisor {
 public:
  // Sweeps stale segments of dead launchers (same prefix), then creates this run's segment
  // (create_only, mode 0600) and maps it, so that forked ranks inherit the mapping.
  explicit Supervisor(SupervisorOptions options = {});
  ~Supervisor();  // removes the segment if run() did not already
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  ShmSegment& segment() { return segment_; }

  // Forks one child per entry (rank = index) and supervises them until all have exited;
  // removes the segment before returning. In a child: PR_SET_PDEATHSIG(SIGKILL), signals back
  // to their defaults (stop signals, SIGCHLD, SIGPIPE), then entry(rank); its return value is
  // the exit code and an exception is printed with the rank and becomes exit code 1. Call
  // once, from the main thread, before any other thread exists (fork) and before any CUDA
  // call. `on_tick` (optional) is asked on every tick while no stop is under way; a failure it
  // returns tears the run down.
  SupervisorResult run(const std::vector<std::function<int(int rank)>>& ranks,
                       const TickHook& on_tick = {});

 private:
  void remove_segment();  // once: by run() when the last rank is reaped, else the destructor

  // While the segment exists, a closed stderr (`2>&1 | head`) must not kill the launcher with
  // SIGPIPE on its next log line: nobody would remove the segment. The write fails with EPIPE
  // instead and the line is lost. The ranks get SIGPIPE's default back.
  class SigpipeIgnored {
   public:
    SigpipeIgnored();
    ~SigpipeIgnored();
    SigpipeIgnored(const SigpipeIgnored&) = delete;
    SigpipeIgnored& operator=(const SigpipeIgnored&) = delete;

   private:
    struct sigaction old_ {};
  };

  SupervisorOptions options_;
  SigpipeIgnored sigpipe_ignored_;  // before segment_: from before it exists to after it is gone
  ShmSegment segment_;
  bool removed_ = false;
};

}  // namespace nanovllm
