#include "bench/nanovllm_bench_progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "engine/progress.h"

namespace nanovllm::bench {

BenchProgress::BenchProgress(BenchPlan plan, BenchProgressOptions options)
    : plan_(std::move(plan)), options_(std::move(options)), done_(plan_.workloads.size()) {
  start_ = last_line_ = now();
}

double BenchProgress::now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void BenchProgress::log(const std::string& line) {
  last_line_ = now();
  if (options_.log) {
    options_.log(line);
  } else {
    spdlog::info("{}", line);
  }
}

void BenchProgress::begin_run(const std::string& name, int run) {
  current_ = -1;
  for (size_t i = 0; i < plan_.workloads.size(); ++i)
    if (plan_.workloads[i].name == name && plan_.workloads[i].skipped.empty())
      current_ = static_cast<int>(i);
  if (current_ < 0) throw std::invalid_argument("no workload '" + name + "' runs in the plan");
  shown_ = current_;
  run_ = run;
  run_requests_ = run_prompt_ = run_output_ = 0;
  run_start_ = last_line_ = now();
}

void BenchProgress::step(bool prefill, double seconds, int64_t prompt_tokens, int64_t output_tokens,
                         int64_t finished_requests) {
  (prefill ? prefill_s_ : decode_s_) += seconds;
  (prefill ? prefill_tokens_ : decode_tokens_) += prefill ? prompt_tokens : output_tokens;
  run_prompt_ += prompt_tokens;
  run_output_ += output_tokens;
  run_requests_ += finished_requests;
  prompt_done_ += prompt_tokens;
  output_done_ += output_tokens;
  if (now() - last_line_ >= options_.log_interval_s) log(status());
}

void BenchProgress::end_run(double elapsed_s) {
  if (current_ < 0) return;
  const PlannedWorkload& w = plan_.workloads[static_cast<size_t>(current_)];
  // The run's whole planned work counts as done (stop strings may end requests early).
  prompt_done_ += std::max<int64_t>(0, w.prompt_tokens - run_prompt_);
  output_done_ += std::max<int64_t>(0, w.output_tokens - run_output_);
  run_prompt_ = w.prompt_tokens;
  run_output_ = w.output_tokens;
  run_requests_ = w.requests;
  Done& d = done_[static_cast<size_t>(current_)];
  d.runs += 1;
  d.run_seconds += elapsed_s;
  current_ = -1;  // shown_ still names it
  log(status());
}

std::optional<double> BenchProgress::seconds_per(bool prefill) const {
  const double s = prefill ? prefill_s_ : decode_s_;
  const int64_t tokens = prefill ? prefill_tokens_ : decode_tokens_;
  if (tokens <= 0 || prefill_s_ + decode_s_ < kMinMeasuredSeconds) return std::nullopt;
  return s / static_cast<double>(tokens);
}

std::optional<double> BenchProgress::eta_s() const {
  const std::optional<double> per_prompt = seconds_per(true), per_output = seconds_per(false);
  const double run_elapsed = current_ >= 0 ? now() - run_start_ : 0.0;
  double left = 0;
  for (size_t i = 0; i < plan_.workloads.size(); ++i) {
    const PlannedWorkload& w = plan_.workloads[i];
    if (!w.skipped.empty()) continue;
    const bool running = static_cast<int>(i) == current_;
    const int runs_left = plan_.runs - done_[i].runs - (running ? 1 : 0);
    if (done_[i].runs > 0) {  // its own time per run
      const double per_run = done_[i].run_seconds / done_[i].runs;
      left += runs_left * per_run + (running ? std::max(0.0, per_run - run_elapsed) : 0.0);
      continue;
    }
    const int64_t prompt_left = runs_left * w.prompt_tokens +
                                (running ? std::max<int64_t>(0, w.prompt_tokens - run_prompt_) : 0);
    const int64_t output_left = runs_left * w.output_tokens +
                                (running ? std::max<int64_t>(0, w.output_tokens - run_output_) : 0);
    if ((prompt_left > 0 && !per_prompt) || (output_left > 0 && !per_output)) return std::nullopt;
    if (prompt_left > 0) left += static_cast<double>(prompt_left) * *per_prompt;
    if (output_left > 0) left += static_cast<double>(output_left) * *per_output;
  }
  return left;
}

std::string BenchProgress::status() const {
  std::string line;
  if (shown_ >= 0) {
    const PlannedWorkload& w = plan_.workloads[static_cast<size_t>(shown_)];
    line = fmt::format("{} run {}/{}: {}/{} requests, {}/{} output tokens | ", w.name, run_,
                       plan_.runs, run_requests_, w.requests, with_commas(run_output_),
                       with_commas(w.output_tokens));
  }
  const std::optional<double> eta = eta_s();
  return line + fmt::format("all runs: {}/{} prompt + {}/{} output tokens, {} elapsed | ETA {}",
                            with_commas(prompt_done_), with_commas(plan_.total_prompt_tokens()),
                            with_commas(output_done_), with_commas(plan_.total_output_tokens()),
                            format_duration(now() - start_),
                            eta ? format_duration(*eta) : std::string("?"));
}

}  // namespace nanovllm::bench
