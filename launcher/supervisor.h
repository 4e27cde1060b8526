// The launcher's process supervision: one uniquely named shared-memory segment for the run,
// one forked child per rank, signals forwarded, and when a child dies abnormally the rest are
// stopped, the segment removed and the failing rank named. Protocol: ipc/README.md.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ipc/shm_segment.h"

namespace nanovllm {

struct SupervisorOptions {
  std::string segment_prefix = "nanovllm";  // segment "<prefix>-<launcher pid>-<random hex>"
  size_t segment_bytes = 4096;              // the ring + communicator regions the caller lays out
  // After a rank failed: SIGTERM to the rest, SIGKILL to those still running after this.
  std::chrono::milliseconds kill_grace{2000};
  // After SIGINT/SIGTERM was forwarded: how long the ranks may take to finish (rank 0 writes
  // out what is done) before SIGKILL. A second signal kills at once.
  std::chrono::milliseconds interrupt_grace{8000};
};

// How one rank ended.
struct RankExit {
  int rank = -1;
  pid_t pid = 0;
  bool signaled = false;  // true: killed by `signal`; false: exited with `exit_code`
  int exit_code = 0;
  int signal = 0;
  bool ok() const { return !signaled && exit_code == 0; }
  std::string describe() const;  // "rank 1 (pid 123) was killed by signal 9 (Killed)"
};

struct SupervisorResult {
  int exit_code = 0;          // for the launcher's main: 0, 1 (a rank failed), 128 + signal
  std::string message;        // empty on success; else names the rank and its signal/code
  std::optional<int> failed_rank;  // the first rank that died abnormally
  int interrupted_by = 0;     // SIGINT/SIGTERM the launcher received (0: none)
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
  // to their defaults, then entry(rank); its return value is the exit code and an exception
  // is printed with the rank and becomes exit code 1. Call once, from the main thread, before
  // any other thread exists (fork) and before any CUDA call.
  SupervisorResult run(const std::vector<std::function<int(int rank)>>& ranks);

 private:
  void remove_segment();  // once: by run() when the last rank is reaped, else the destructor

  SupervisorOptions options_;
  ShmSegment segment_;
  bool removed_ = false;
};

}  // namespace nanovllm
