// The workers of an embedded rank 0 (the C library in a host process such as Python): the run's
// shared-memory segment, created by rank 0 and laid out as nanovllm-launch's, and ranks
// 1..tp-1 as nanovllm-worker processes started with posix_spawn (a host interpreter must never
// be forked: its threads and CUDA context would not survive). A thread watches them: when one
// ends before the group is stopped, `on_death` runs (rank 0 aborts its waits on the segment,
// so its current step throws instead of hanging) and dead_worker() names it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ipc/shm_segment.h"
#include "launcher/run_segment.h"
#include "launcher/run_settings.h"

namespace nanovllm {

class WorkerGroup {
 public:
  // Creates and lays out the segment for `s` (one group of s.tp_size ranks; its name starts
  // with NANOVLLM_SHM_PREFIX or "nanovllm-py") and spawns the workers with
  // `worker --segment NAME --rank R --parent PID --options OPTIONS_JSON`, in their own process
  // group (a terminal's Ctrl-C reaches the host only). Throws naming what failed; nothing is
  // left behind then.
  WorkerGroup(const RunSettings& s, const std::filesystem::path& worker,
              const std::string& options_json);
  // Stops the group: the workers get `grace` to exit (after rank 0 sent EXIT), then SIGKILL;
  // every one is reaped and the segment removed.
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  const RunSegmentLayout& layout() const { return layout_; }
  const ReplicaRegion& region() const { return segment_map_.replicas[0]; }
  const std::string& segment_name() const { return segment_.name(); }
  std::vector<pid_t> pids() const { return pids_; }

  // Called (once, from the watcher thread) when a worker ends before the group is stopped.
  void on_death(std::function<void()> abort_waits);
  // "rank 1 (pid 4242) was killed by signal 9 (SIGKILL)" once one died; nullopt before.
  std::optional<std::string> dead_worker() const;
  bool any_dead() const { return dead_.load(); }

 private:
  void watch();

  RunSegmentLayout layout_;
  ShmSegment segment_;
  RunSegment segment_map_;
  std::vector<pid_t> pids_;  // by rank - 1
  std::vector<bool> reaped_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> dead_{false};
  mutable std::mutex mutex_;  // guards death_ and abort_waits_
  std::optional<std::string> death_;
  std::function<void()> abort_waits_;
  std::thread watcher_;
};

}  // namespace nanovllm
