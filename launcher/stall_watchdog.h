// The stall watchdog's logic, apart from processes and clocks: from each rank's count of
// executed steps, looked at again and again, tell when a rank has stopped making progress
// (a SIGSTOP, a GPU hang, a deadlock), which ranks are behind, when to log it and when to give
// up. The drivers (launcher/stall_monitor.h) feed it and act on its reports.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace nanovllm {

struct StallPolicy {
  // A rank that completes no step for this long ends the run (--stall-timeout); 0: off.
  std::chrono::milliseconds timeout{300'000};
  // While a stall lasts, who is behind is logged this often (as vLLM logs a full broadcast
  // ring): the user sees a stall long before the timeout.
  std::chrono::milliseconds log_interval{60'000};
  bool enabled() const { return timeout.count() > 0; }
};
// From the flags' seconds, rounded up to whole milliseconds (a tiny timeout is not "off").
StallPolicy stall_policy(double timeout_s, double log_interval_s);

// One rank at one look.
struct RankSteps {
  int rank = -1;
  pid_t pid = 0;
  uint64_t steps = 0;    // steps it completed so far
  bool running = true;   // false once it exited: it is never behind
  bool stopped = false;  // the kernel shows it stopped (SIGSTOP, a debugger); for the texts
};

struct StallReport {
  enum class Kind {
    kNone,       // nothing to say
    kBehind,     // a stall lasts another log interval: log who is behind
    kRecovered,  // every rank completes steps again after a stall was logged
    kTimedOut,   // a rank completed no step for the timeout: end the run
  };
  Kind kind = Kind::kNone;
  std::chrono::milliseconds quiet{0};  // how long the stalest running rank completed no step
  std::vector<RankSteps> behind;       // kBehind, kTimedOut: the running ranks below the
                                       // highest count, or all of them when none is below
};

class StallWatchdog {
 public:
  using Clock = std::chrono::steady_clock;

  explicit StallWatchdog(StallPolicy policy) : policy_(policy) {}

  // One look at every rank (same ranks, same order each time). Disarmed until some rank has
  // completed a step, so that loading and warm-up, however long, never trip it.
  StallReport observe(Clock::time_point now, const std::vector<RankSteps>& ranks);
  bool armed() const { return armed_; }

 private:
  StallPolicy policy_;
  bool armed_ = false;
  std::vector<uint64_t> last_steps_;
  std::vector<Clock::time_point> last_progress_;  // when each rank's count last moved
  int logs_ = 0;  // log intervals of the stall under way already reported
};

// The ranks to name as stalled: the behind ones the kernel shows stopped, else all behind.
std::vector<RankSteps> blamed_ranks(const std::vector<RankSteps>& behind);

// "rank 1 (pid 12, 57 steps done, process stopped), rank 0 (pid 11, 57 steps done)"
std::string describe_ranks(const std::vector<RankSteps>& ranks);

// The log line of a kBehind or kRecovered report.
std::string stall_log_line(const StallReport& report, const StallPolicy& policy);
// The message that ends the run at kTimedOut: names the blamed ranks.
std::string stall_message(const StallReport& report, const StallPolicy& policy);

}  // namespace nanovllm
