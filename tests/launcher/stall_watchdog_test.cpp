// The stall watchdog apart from processes: when a rank counts as stalled and which ranks are
// behind, given step counts and times; arming after the first step; the texts; the --tp 1
// in-process monitor on a counter that stops, moves or never starts; the step-counting
// executor and the supervisor's tick hook.
#include "launcher/stall_watchdog.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "launcher/counting_step_executor.h"
#include "launcher/stall_monitor.h"

namespace nanovllm {
namespace {

using namespace std::chrono_literals;
using Clock = StallWatchdog::Clock;
using Kind = StallReport::Kind;

StallPolicy policy(std::chrono::milliseconds timeout, std::chrono::milliseconds log_interval) {
  return StallPolicy{timeout, log_interval};
}

std::vector<RankSteps> ranks(std::vector<uint64_t> steps) {
  std::vector<RankSteps> r;
  for (size_t i = 0; i < steps.size(); ++i)
    r.push_back(RankSteps{static_cast<int>(i), static_cast<pid_t>(100 + i), steps[i], true});
  return r;
}

std::vector<int> rank_ids(const std::vector<RankSteps>& rs) {
  std::vector<int> ids;
  for (const RankSteps& r : rs) ids.push_back(r.rank);
  return ids;
}

const Clock::time_point t0 = Clock::time_point() + 1000s;

TEST(StallWatchdog, NotArmedBeforeTheFirstStepHoweverLongLoadingTakes) {
  StallWatchdog w(policy(2s, 1s));
  for (int s = 0; s <= 600; s += 10)
    EXPECT_EQ(w.observe(t0 + std::chrono::seconds(s), ranks({0, 0})).kind, Kind::kNone);
  EXPECT_FALSE(w.armed());
  // The first step arms it; the clock starts then, not at the start of loading.
  EXPECT_EQ(w.observe(t0 + 601s, ranks({1, 1})).kind, Kind::kNone);
  EXPECT_TRUE(w.armed());
  EXPECT_EQ(w.observe(t0 + 602500ms, ranks({1, 1})).kind, Kind::kBehind);
  EXPECT_EQ(w.observe(t0 + 603s, ranks({1, 1})).kind, Kind::kTimedOut);
}

TEST(StallWatchdog, MovingCountersNeverReport) {
  StallWatchdog w(policy(2s, 1s));
  for (uint64_t i = 1; i < 1000; ++i)  // a step every 500 ms for 500 s
    EXPECT_EQ(w.observe(t0 + std::chrono::milliseconds(500 * i), ranks({i, i})).kind, Kind::kNone);
}

TEST(StallWatchdog, StoppedCountersAreLoggedEveryIntervalThenTimeOut) {
  StallWatchdog w(policy(5s, 2s));
  w.observe(t0, ranks({7, 7}));
  EXPECT_EQ(w.observe(t0 + 1999ms, ranks({7, 7})).kind, Kind::kNone);
  const StallReport first = w.observe(t0 + 2s, ranks({7, 7}));
  EXPECT_EQ(first.kind, Kind::kBehind);
  EXPECT_EQ(first.quiet, 2s);
  EXPECT_EQ(rank_ids(first.behind), (std::vector<int>{0, 1}));     // level: all behind
  EXPECT_EQ(w.observe(t0 + 3s, ranks({7, 7})).kind, Kind::kNone);  // once per interval
  EXPECT_EQ(w.observe(t0 + 4s, ranks({7, 7})).kind, Kind::kBehind);
  const StallReport end = w.observe(t0 + 5s, ranks({7, 7}));
  EXPECT_EQ(end.kind, Kind::kTimedOut);
  EXPECT_EQ(end.quiet, 5s);
}

TEST(StallWatchdog, BehindAreTheRanksBelowTheHighestCount) {
  StallWatchdog w(policy(10s, 1s));
  w.observe(t0, ranks({5, 5, 5}));
  w.observe(t0 + 100ms, ranks({6, 5, 6}));  // rank 1 stopped before counting step 6
  const StallReport r = w.observe(t0 + 1100ms, ranks({6, 5, 6}));
  EXPECT_EQ(r.kind, Kind::kBehind);
  EXPECT_EQ(rank_ids(r.behind), (std::vector<int>{1}));
  EXPECT_EQ(r.quiet, 1100ms);  // rank 1 moved last at t0
}

TEST(StallWatchdog, ARankLaggingWhileOthersMoveIsStalledOnItsOwnClock) {
  StallWatchdog w(policy(3s, 1s));
  w.observe(t0, ranks({1, 1}));
  for (uint64_t i = 2; i <= 30; ++i)  // rank 0 keeps counting, rank 1 does not
    w.observe(t0 + std::chrono::milliseconds(100 * i), ranks({i, 1}));
  const StallReport r = w.observe(t0 + 3s, ranks({30, 1}));
  EXPECT_EQ(r.kind, Kind::kTimedOut);
  EXPECT_EQ(rank_ids(r.behind), (std::vector<int>{1}));
}

TEST(StallWatchdog, ExitedRanksAreNeverBehindAndAFinishedRunIsNotWatched) {
  StallWatchdog w(policy(2s, 1s));
  std::vector<RankSteps> rs = ranks({9, 9});
  w.observe(t0, rs);
  rs[0].running = false;  // rank 0 sent EXIT and left; rank 1 should follow but hangs
  const StallReport r = w.observe(t0 + 2s, rs);
  EXPECT_EQ(r.kind, Kind::kTimedOut);
  EXPECT_EQ(rank_ids(r.behind), (std::vector<int>{1}));
  StallWatchdog done(policy(2s, 1s));
  rs[1].running = false;
  done.observe(t0, ranks({9, 9}));
  EXPECT_EQ(done.observe(t0 + 60s, rs).kind, Kind::kNone);
}

TEST(StallWatchdog, ARankThatContinuesBeforeTheTimeoutRecovers) {
  StallWatchdog w(policy(5s, 1s));
  w.observe(t0, ranks({3, 3}));
  EXPECT_EQ(w.observe(t0 + 1s, ranks({3, 3})).kind, Kind::kBehind);
  EXPECT_EQ(w.observe(t0 + 2s, ranks({3, 3})).kind, Kind::kBehind);
  EXPECT_EQ(w.observe(t0 + 2100ms, ranks({4, 4})).kind, Kind::kRecovered);
  EXPECT_EQ(w.observe(t0 + 2200ms, ranks({5, 5})).kind, Kind::kNone);
  // A later stall is a new one: its clock and its log count start over.
  EXPECT_EQ(w.observe(t0 + 3200ms, ranks({5, 5})).kind, Kind::kBehind);
  EXPECT_EQ(w.observe(t0 + 7100ms, ranks({5, 5})).kind, Kind::kBehind);  // 4.9 s quiet
  EXPECT_EQ(w.observe(t0 + 7150ms, ranks({5, 5})).kind, Kind::kNone);    // one line per interval
  EXPECT_EQ(w.observe(t0 + 7200ms, ranks({5, 5})).kind, Kind::kTimedOut);
}

TEST(StallWatchdog, ZeroTimeoutIsOff) {
  StallWatchdog w(policy(0ms, 1ms));
  w.observe(t0, ranks({1}));
  EXPECT_EQ(w.observe(t0 + 3600s, ranks({1})).kind, Kind::kNone);
  EXPECT_FALSE((StallPolicy{0ms, 1ms}.enabled()));
  EXPECT_TRUE(StallPolicy{}.enabled());
  EXPECT_EQ(StallPolicy{}.timeout, 300s);
  EXPECT_EQ(StallPolicy{}.log_interval, 60s);
}

TEST(StallWatchdog, PolicyFromSecondsRoundsUpToMilliseconds) {
  const StallPolicy p = stall_policy(2.5, 0.0001);
  EXPECT_EQ(p.timeout, 2500ms);
  EXPECT_EQ(p.log_interval, 1ms);  // tiny, not off
  EXPECT_FALSE(stall_policy(0, 60).enabled());
}

TEST(StallWatchdog, TextsNameTheStoppedRankFirstOfAll) {
  std::vector<RankSteps> behind = ranks({57, 57});
  behind[1].stopped = true;
  EXPECT_EQ(rank_ids(blamed_ranks(behind)), (std::vector<int>{1}));
  behind[1].stopped = false;
  EXPECT_EQ(rank_ids(blamed_ranks(behind)), (std::vector<int>{0, 1}));  // cannot tell
  behind[1].stopped = true;
  EXPECT_EQ(describe_ranks(behind),
            "rank 0 (pid 100, 57 steps done), rank 1 (pid 101, 57 steps done, process stopped)");
  StallReport r;
  r.kind = Kind::kTimedOut;
  r.quiet = 2000ms;
  r.behind = behind;
  const StallPolicy p = policy(2s, 500ms);
  EXPECT_EQ(stall_message(r, p),
            "stalled: rank 1 (pid 101, 57 steps done, process stopped) completed no step for "
            "2.0 s (--stall-timeout 2); the run is torn down, finished results are kept");
  r.kind = Kind::kBehind;
  r.quiet = 500ms;
  EXPECT_EQ(stall_log_line(r, p),
            "no step completed for 0.5 s; behind: rank 0 (pid 100, 57 steps done), rank 1 (pid "
            "101, 57 steps done, process stopped); the run is torn down at 2.0 s "
            "(--stall-timeout)");
}

TEST(StallWatchdog, ProcessStoppedReadsTheKernelsState) {
  EXPECT_FALSE(process_stopped(::getpid()));
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_EQ(::kill(child, SIGSTOP), 0);
  bool stopped = false;
  for (int i = 0; i < 200 && !stopped; ++i, std::this_thread::sleep_for(5ms))
    stopped = process_stopped(child);
  EXPECT_TRUE(stopped);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(process_stopped(child));  // gone
}

// ---- the --tp 1 monitor ---------------------------------------------------------------------

struct StallSeen {
  std::mutex mutex;
  std::string message;
  Clock::time_point at;
  int calls = 0;
};

InProcessStallMonitor::OnStall record(StallSeen& seen) {
  return [&seen](const std::string& m) {
    std::lock_guard<std::mutex> lock(seen.mutex);
    seen.message = m;
    seen.at = Clock::now();
    ++seen.calls;
  };
}

TEST(InProcessStallMonitor, ACounterThatStopsFiresOnceAfterTheTimeout) {
  std::atomic<uint64_t> steps{0};
  StallSeen seen;
  Clock::time_point last_step;
  {
    InProcessStallMonitor monitor(policy(300ms, 100ms), steps, record(seen), 10ms);
    for (int i = 0; i < 5; ++i) {
      std::this_thread::sleep_for(20ms);
      ++steps;
      last_step = Clock::now();
    }
    std::this_thread::sleep_for(700ms);
  }
  ASSERT_EQ(seen.calls, 1);
  // The thread sees the last step at its next look (within a tick), so not much before this.
  EXPECT_GE(seen.at - last_step, 280ms);
  EXPECT_NE(seen.message.find("stalled: rank 0 (pid " + std::to_string(::getpid()) + ", 5 steps"),
            std::string::npos)
      << seen.message;
}

TEST(InProcessStallMonitor, AMovingCounterNeverFires) {
  std::atomic<uint64_t> steps{0};
  StallSeen seen;
  {
    InProcessStallMonitor monitor(policy(300ms, 100ms), steps, record(seen), 10ms);
    for (int i = 0; i < 80; ++i, std::this_thread::sleep_for(10ms)) ++steps;  // 2+ timeouts long
  }
  EXPECT_EQ(seen.calls, 0);
}

TEST(InProcessStallMonitor, NotArmedBeforeTheFirstStepAndOffAtZero) {
  std::atomic<uint64_t> steps{0};
  StallSeen seen;
  {
    InProcessStallMonitor monitor(policy(100ms, 50ms), steps, record(seen), 10ms);
    std::this_thread::sleep_for(400ms);  // "loading"
  }
  EXPECT_EQ(seen.calls, 0);
  steps = 3;
  {
    InProcessStallMonitor off(policy(0ms, 50ms), steps, record(seen), 10ms);
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(seen.calls, 0);
}

// ---- counting and the supervisor's hook -------------------------------------------------------

class FakeExecutor : public StepExecutor {
 public:
  StepResult execute(const StepCommand&) override { return {}; }
  int num_kv_blocks() const override { return 42; }
};

TEST(StallStepCounting, CountingExecutorCountsEveryPrefillAndDecodeButNotExit) {
  std::atomic<uint64_t> steps{0};
  CountingStepExecutor counted(std::make_unique<FakeExecutor>(), steps);
  StepCommand cmd;
  for (StepKind kind :
       {StepKind::kPrefill, StepKind::kDecode, StepKind::kDecode, StepKind::kExit}) {
    cmd.kind = kind;
    counted.execute(cmd);
  }
  EXPECT_EQ(steps.load(), 3u);
  EXPECT_EQ(counted.num_kv_blocks(), 42);
}

TEST(StallTickHook, FailsTheRunNamingTheRankBelowTheOthersAtTheTimeout) {
  EXPECT_FALSE(make_stall_tick_hook(policy(0ms, 1s), nullptr));  // off: no hook at all
  std::atomic<uint64_t> steps[2];
  steps[0] = 4;
  steps[1] = 3;
  const TickHook hook = make_stall_tick_hook(policy(100ms, 1s), steps);
  ASSERT_TRUE(hook);
  const std::vector<RankState> group{{0, ::getpid(), true}, {1, ::getpid(), true}};
  EXPECT_FALSE(hook(group).has_value());  // arms
  std::optional<TickFailure> failure;
  for (int i = 0; i < 100 && !failure; ++i, std::this_thread::sleep_for(10ms))
    failure = hook(group);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->rank, 1);
  EXPECT_NE(failure->message.find("stalled: rank 1 ("), std::string::npos) << failure->message;
}

}  // namespace
}  // namespace nanovllm
