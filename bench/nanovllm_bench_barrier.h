// Where the replicas of a data-parallel benchmark (--dp N) meet so that they run each timed
// repetition together: the aggregate throughput of a run is the replicas' tokens over the
// earliest start to the latest end, which only measures N engines side by side when they start
// at the same moment. Each replica's rank 0 is its own process (launcher/rank_processes.h's
// run_replica_groups forks them), so the barrier lives in shared memory: one anonymous
// MAP_SHARED mapping made by the benchmark process before it forks the ranks, which they
// inherit.
//
// The mapping, one 64-byte slot per replica (its own cache line: a replica writes only its
// own slot, every replica reads all of them):
//   slot[d].arrived  int64  the last barrier replica d reached (0: none yet; 1, 2, ...)
//   slot[d].left     int32  1 once replica d's body ended (returned or threw)
// Replica d passes barrier k when every slot has arrived >= k. A replica that waits gives up
// with an exception naming itself and those it waits for: after `timeout`, when one of them
// left without reaching k (it failed or stopped), when the benchmark process that forked it is
// gone, and (BenchStopped) when nanovllm-bench asks it to stop. A replica that died outright
// takes the others along: the launcher's supervisor ends every rank when one fails.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace nanovllm::bench {

class ReplicaBarrier {
 public:
  // Long enough for the slowest replica's model load (a replica waits at the first barrier
  // for the others to load) and for one run's skew between replicas.
  static constexpr std::chrono::seconds kDefaultTimeout{600};

  // Maps the slots, all zero. Throws std::runtime_error when mmap fails.
  explicit ReplicaBarrier(int replicas, std::chrono::milliseconds timeout = kDefaultTimeout);
  ~ReplicaBarrier();
  ReplicaBarrier(const ReplicaBarrier&) = delete;
  ReplicaBarrier& operator=(const ReplicaBarrier&) = delete;

  int replicas() const { return replicas_; }

  // Replica `replica` arrives at its next barrier (every replica passes them in the same
  // order; `what` names this one in errors, e.g. "nanovllm run 2/3") and waits for the
  // others. Returns the seconds it waited. Throws std::runtime_error as above.
  double arrive_and_wait(int replica, const std::string& what);
  // Replica `replica`'s body ended: a replica waiting for it gives up at once.
  void leave(int replica);

 private:
  struct alignas(64) Slot {
    std::atomic<int64_t> arrived;
    std::atomic<int32_t> left;
  };
  Slot* slots_ = nullptr;  // [replicas_], shared by every forked rank
  int replicas_ = 0;
  std::chrono::milliseconds timeout_;
  pid_t owner_ = 0;   // the process that mapped it (the ranks' launcher)
  int64_t next_ = 1;  // this process's next barrier: each replica counts its own
};

}  // namespace nanovllm::bench
