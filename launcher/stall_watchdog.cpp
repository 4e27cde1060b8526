#include "launcher/stall_watchdog.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>

namespace nanovllm {

namespace {

using std::chrono::milliseconds;

std::string seconds(milliseconds d) {
  return fmt::format("{:.1f} s", d.count() / 1000.0);
}

// Ranks climb in lockstep (every step's collectives need all of them), so a rank below the
// highest count is the one holding the others up. When all are level, the counts cannot tell
// (the stalled rank hangs inside the very step the others wait in): all are behind.
std::vector<RankSteps> ranks_behind(const std::vector<RankSteps>& ranks) {
  uint64_t highest = 0;
  for (const RankSteps& r : ranks) highest = std::max(highest, r.steps);
  std::vector<RankSteps> below, running;
  for (const RankSteps& r : ranks) {
    if (!r.running) continue;
    running.push_back(r);
    if (r.steps < highest) below.push_back(r);
  }
  return below.empty() ? running : below;
}

}  // namespace

StallPolicy stall_policy(double timeout_s, double log_interval_s) {
  const auto ms = [](double s) {
    return milliseconds(static_cast<int64_t>(std::ceil(s * 1000.0)));
  };
  return StallPolicy{ms(timeout_s), ms(log_interval_s)};
}

StallReport StallWatchdog::observe(Clock::time_point now, const std::vector<RankSteps>& ranks) {
  StallReport report;
  if (!policy_.enabled()) return report;
  if (!armed_) {
    const bool stepped =
        std::any_of(ranks.begin(), ranks.end(), [](const RankSteps& r) { return r.steps > 0; });
    if (!stepped) return report;
    armed_ = true;
    last_steps_.assign(ranks.size(), 0);
    last_progress_.assign(ranks.size(), now);
  }
  Clock::time_point stalest = Clock::time_point::max();
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].steps != last_steps_[i]) {
      last_steps_[i] = ranks[i].steps;
      last_progress_[i] = now;
    }
    if (ranks[i].running) stalest = std::min(stalest, last_progress_[i]);
  }
  if (stalest == Clock::time_point::max()) return report;  // every rank exited: nothing to watch
  report.quiet = std::chrono::duration_cast<milliseconds>(now - stalest);

  if (report.quiet < policy_.log_interval && report.quiet < policy_.timeout) {
    if (logs_ > 0) report.kind = StallReport::Kind::kRecovered;
    logs_ = 0;
    return report;
  }
  if (report.quiet >= policy_.timeout) {
    report.kind = StallReport::Kind::kTimedOut;
  } else if (report.quiet >= policy_.log_interval * (logs_ + 1)) {
    report.kind = StallReport::Kind::kBehind;
    logs_ = static_cast<int>(report.quiet / policy_.log_interval);  // one line per interval
  } else {
    return report;
  }
  report.behind = ranks_behind(ranks);
  return report;
}

std::vector<RankSteps> blamed_ranks(const std::vector<RankSteps>& behind) {
  std::vector<RankSteps> stopped;
  for (const RankSteps& r : behind)
    if (r.stopped) stopped.push_back(r);
  return stopped.empty() ? behind : stopped;
}

std::string describe_ranks(const std::vector<RankSteps>& ranks) {
  std::string text;
  for (const RankSteps& r : ranks) {
    if (!text.empty()) text += ", ";
    text += fmt::format("rank {} (pid {}, {} steps done{})", r.rank, r.pid, r.steps,
                        r.stopped ? ", process stopped" : "");
  }
  return text;
}

std::string stall_log_line(const StallReport& report, const StallPolicy& policy) {
  if (report.kind == StallReport::Kind::kRecovered)
    return "stall over: every rank completes steps again";
  return fmt::format(
      "no step completed for {}; behind: {}; the run is torn down at {} "
      "(--stall-timeout)",
      seconds(report.quiet), describe_ranks(report.behind), seconds(policy.timeout));
}

std::string stall_message(const StallReport& report, const StallPolicy& policy) {
  const std::vector<RankSteps> blamed = blamed_ranks(report.behind);
  return fmt::format(
      "stalled: {} completed no step for {} (--stall-timeout {}); the run is "
      "torn down, finished results are kept",
      describe_ranks(blamed), seconds(report.quiet),
      fmt::format("{:g}", policy.timeout.count() / 1000.0));
}

}  // namespace nanovllm
