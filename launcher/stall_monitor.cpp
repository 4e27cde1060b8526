#include "launcher/stall_monitor.h"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "engine/job/interrupt.h"

namespace nanovllm {

namespace {

// Logs a kBehind or kRecovered report; returns the message that ends the run at kTimedOut.
std::optional<std::string> act_on(StallReport& report, const StallPolicy& policy) {
  if (report.kind == StallReport::Kind::kNone) return std::nullopt;
  for (RankSteps& r : report.behind) r.stopped = process_stopped(r.pid);
  switch (report.kind) {
    case StallReport::Kind::kBehind:
      spdlog::warn("{}", stall_log_line(report, policy));
      return std::nullopt;
    case StallReport::Kind::kRecovered:
      spdlog::info("{}", stall_log_line(report, policy));
      return std::nullopt;
    case StallReport::Kind::kTimedOut:
      return stall_message(report, policy);
    case StallReport::Kind::kNone:
      break;
  }
  return std::nullopt;
}

}  // namespace

bool process_stopped(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::stringstream text;
  text << in.rdbuf();
  // "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')'.
  const std::string stat = text.str();
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  const char state = stat[close + 2];
  return state == 'T' || state == 't';
}

TickHook make_stall_tick_hook(const StallPolicy& policy, const std::atomic<uint64_t>* steps) {
  if (!policy.enabled()) return {};
  // The hook is copied into the options: the watchdog's memory of past looks is shared.
  auto watchdog = std::make_shared<StallWatchdog>(policy);
  return
      [watchdog, policy, steps](const std::vector<RankState>& ranks) -> std::optional<TickFailure> {
        std::vector<RankSteps> look;
        look.reserve(ranks.size());
        for (const RankState& r : ranks)
          look.push_back(
              RankSteps{r.rank, r.pid, steps[r.rank].load(std::memory_order_relaxed), r.running});
        StallReport report = watchdog->observe(StallWatchdog::Clock::now(), look);
        const std::optional<std::string> message = act_on(report, policy);
        if (!message) return std::nullopt;
        return TickFailure{blamed_ranks(report.behind).front().rank, *message};
      };
}

InProcessStallMonitor::InProcessStallMonitor(const StallPolicy& policy,
                                             const std::atomic<uint64_t>& steps, OnStall on_stall,
                                             std::chrono::milliseconds tick)
    : policy_(policy),
      steps_(steps),
      on_stall_(std::move(on_stall)),
      tick_(tick),
      pid_(::getpid()) {
  if (!policy_.enabled()) return;
  // The thread takes no stop signal: they are rank 0's, whose handler the main thread polls.
  sigset_t stop, old;
  ::sigemptyset(&stop);
  for (int sig : kStopSignals) ::sigaddset(&stop, sig);
  ::pthread_sigmask(SIG_BLOCK, &stop, &old);
  thread_ = std::thread([this] { watch(); });
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

InProcessStallMonitor::~InProcessStallMonitor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void InProcessStallMonitor::watch() {
  StallWatchdog watchdog(policy_);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, tick_, [this] { return stopping_; })) {
    const RankSteps rank0{0, pid_, steps_.load(std::memory_order_relaxed), true};
    StallReport report = watchdog.observe(StallWatchdog::Clock::now(), {rank0});
    if (const std::optional<std::string> message = act_on(report, policy_)) {
      lock.unlock();
      on_stall_(*message);
      return;
    }
  }
}

}  // namespace nanovllm
