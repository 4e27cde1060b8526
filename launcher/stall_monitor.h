// The stall watchdog's two drivers (logic: launcher/stall_watchdog.h). Under tensor
// parallelism the supervision loop of the launcher, which a stopped or hung rank cannot block,
// looks at the step counters in the run's segment on every tick. With --tp 1, rank 0 runs in
// the launcher's own process, so a thread of that process watches rank 0's counter.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "launcher/stall_watchdog.h"
#include "launcher/supervisor.h"

namespace nanovllm {

// True when the kernel shows `pid` stopped (SIGSTOP, SIGTSTP, a debugger): it makes no
// progress by itself, so it is the one to blame.
bool process_stopped(pid_t pid);

// The supervisor's tick hook (Supervisor::run's on_tick): logs who is behind while a stall
// lasts and fails the run at the timeout. `steps`: one counter per rank, by rank, living as
// long as the run (the segment). Empty when the policy is off.
TickHook make_stall_tick_hook(const StallPolicy& policy, const std::atomic<uint64_t>* steps);

// --tp 1: watches one counter from a thread of this process; logs who is behind while a stall
// lasts and calls `on_stall` with the message at the timeout (once; the launcher's prints the
// line and ends the process: finished results are already written, line by line).
class InProcessStallMonitor {
 public:
  using OnStall = std::function<void(const std::string& message)>;

  // Starts nothing when the policy is off. `steps` outlives this object.
  InProcessStallMonitor(const StallPolicy& policy, const std::atomic<uint64_t>& steps,
                        OnStall on_stall,
                        std::chrono::milliseconds tick = std::chrono::milliseconds(100));
  ~InProcessStallMonitor();  // stops and joins the thread
  InProcessStallMonitor(const InProcessStallMonitor&) = delete;
  InProcessStallMonitor& operator=(const InProcessStallMonitor&) = delete;

 private:
  void watch();

  StallPolicy policy_;
  const std::atomic<uint64_t>& steps_;
  OnStall on_stall_;
  std::chrono::milliseconds tick_;
  pid_t pid_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace nanovllm
