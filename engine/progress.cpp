#include "engine/progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace nanovllm {
namespace {

double rate(int64_t count, double seconds) {
  return seconds > 0 ? static_cast<double>(count) / seconds : 0.0;
}

// Weight of the newest decode step in the recent averages: about the last 10 steps count, so
// the ETA follows the batch as it drains at the end of a run.
constexpr double kRecentWeight = 0.2;

void moving_average(double& average, double x, bool first) {
  average = first ? x : average + kRecentWeight * (x - average);
}

// Per decode step, the weight the older steps keep in the step-time fit: about the last 50
// steps count, enough to hold batches of different sizes while a run drains.
constexpr double kFitDecay = 0.98;
// Below this variance of the batch sizes (in sequences squared) the fit is not trusted.
constexpr double kMinBatchVariance = 0.25;

}  // namespace

void Progress::StepTimeFit::add(double batch, double seconds) {
  for (double* sum : {&w, &b, &t, &bb, &bt}) *sum *= kFitDecay;
  w += 1;
  b += batch;
  t += seconds;
  bb += batch * batch;
  bt += batch * seconds;
}

std::optional<std::pair<double, double>> Progress::StepTimeFit::costs() const {
  if (w <= 0) return std::nullopt;
  const double mean_b = b / w, mean_t = t / w;
  const double var_b = bb / w - mean_b * mean_b;
  if (var_b < kMinBatchVariance) return std::nullopt;
  // Neither part below zero: noise must not make a smaller batch slower or a step free.
  const double per_token = std::max(0.0, (bt / w - mean_b * mean_t) / var_b);
  const double per_step = mean_t - per_token * mean_b;
  if (per_step < 0) return std::pair{0.0, mean_t / mean_b};
  return std::pair{per_step, per_token};
}

double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool stderr_is_terminal() {
  return isatty(STDERR_FILENO) == 1;
}

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

Progress::Progress(int64_t total_requests, ProgressOptions options)
    : total_(total_requests), options_(std::move(options)) {
  const double t = now();
  run_start_ = options_.run_start.value_or(t);
  generation_start_ = t;
  last_output_ = t;
  last_step_end_ = t;
}

double Progress::now() const {
  return options_.clock ? options_.clock() : monotonic_seconds();
}

void Progress::begin_startup() {
  startup_start_ = now();
}

void Progress::end_startup(const std::optional<StartupTiming>& parts) {
  startup_s_ = now() - startup_start_.value_or(run_start_);
  startup_parts_ = parts;
  emit_log(startup_line());
}

void Progress::begin_generation() {
  generation_start_ = now();
  last_step_end_ = generation_start_;
  last_output_ = generation_start_;
}

double Progress::generation_time() const {
  // Once a step ran, generation ends with the latest one (nanovllm-bench's elapsed_s ends
  // with the last token too); before that it is still going.
  return (num_steps_ > 0 ? last_step_end_ : now()) - generation_start_;
}

std::optional<double> Progress::eta() const {
  if (!work_left_) return std::nullopt;
  const WorkLeft& w = *work_left_;
  double seconds = 0;
  if (w.prompt_tokens > 0) {
    if (prefill_steps_ < kMinPrefillSteps || prefill_step_tokens_ <= 0) return std::nullopt;
    seconds += static_cast<double>(w.prompt_tokens) * prefill_s_ /
               static_cast<double>(prefill_step_tokens_);
  }
  if (w.output_tokens > 0) {
    if (decode_steps_ < kMinDecodeSteps) return std::nullopt;
    // Each decode step gives every running sequence one token: the output left spread over
    // the batch, but no fewer steps than the longest output left needs.
    const auto output = static_cast<double>(w.output_tokens);
    const double steps = std::max(output / std::max(1.0, recent_decode_batch_),
                                  static_cast<double>(w.longest_output));
    if (const auto c = decode_fit_.costs()) {
      seconds += c->first * steps + c->second * output;
    } else {
      seconds += steps * recent_decode_step_s_;
    }
  }
  return seconds;
}

std::string Progress::startup_line() const {
  if (!startup_s_) return {};
  std::string line = fmt::format("start-up {:.1f} s", *startup_s_);
  if (startup_parts_) {
    const StartupTiming& p = *startup_parts_;
    line += fmt::format(": load {:.1f} s, warm-up {:.1f} s, graph capture {:.1f} s", p.load_s,
                        p.warmup_s, p.graph_capture_s);
    if (p.nccl_setup_s > 0) line += fmt::format(", NCCL set-up {:.1f} s", p.nccl_setup_s);
  }
  return line;
}

std::string Progress::status_line() const {
  const double t = now() - generation_start_;
  std::string line = fmt::format("{}/{} requests", num_done(), total_);
  if (num_failed_ > 0) line += fmt::format(" ({} failed)", num_failed_);
  line += fmt::format(" | prefill {:.0f} tok/s | decode {:.0f} tok/s | {} elapsed",
                      rate(prefill_tokens_, t), rate(decode_tokens_, t), format_duration(t));
  // None until the rates are measured: a guess is worse than nothing.
  if (const std::optional<double> left = eta()) {
    // "~": the work left is an upper bound (outputs may end before max_tokens), but the rates
    // move with the batch and the machine, so the time is an estimate, never a promise.
    line += fmt::format(" | ETA {}{}", *left > 0 ? "~" : "", format_duration(*left));
  }
  return line;
}

std::string Progress::bar_line() const {
  const int width = std::max(1, options_.bar_width);
  const double fraction =
      total_ > 0 ? std::min(1.0, static_cast<double>(num_done()) / static_cast<double>(total_))
                 : 1.0;
  const int filled = static_cast<int>(fraction * width);
  // fmt rather than operator+ chains: GCC 12 -O3 raises a false -Wrestrict on those.
  return fmt::format("[{}{}] {}", std::string(filled, '#'), std::string(width - filled, '-'),
                     status_line());
}

std::string Progress::summary() const {
  // Throughput over the generation time only (start-up excluded, as vLLM reports it), with
  // nanovllm-bench's definitions: output tok/s = completion tokens / generation time (its
  // output_tok_s over elapsed_s); "prefill steps" = prompt tokens computed / time of the
  // steps that computed any (S_PP); "decode steps" = tokens of the other steps / their time
  // (S_TG).
  const double g = std::max(0.0, generation_time());
  const double wall = now() - run_start_;
  std::string s = fmt::format(
      "requests: {} ok, {} failed | tokens: {} prefill, {} decode, {} output | generation {} "
      "({:.1f} s) | throughput: {:.0f} output tok/s, {:.1f} req/s | prefill steps {:.0f} tok/s, "
      "decode steps {:.0f} tok/s | wall {} ({:.1f} s)",
      num_ok_, num_failed_, prefill_tokens_, decode_tokens_, output_tokens_, format_duration(g), g,
      rate(output_tokens_, g), rate(num_ok_, g), rate(prefill_step_tokens_, prefill_s_),
      rate(decode_step_tokens_, decode_s_), format_duration(wall), wall);
  if (startup_s_) s += fmt::format(" incl. start-up {:.1f} s", *startup_s_);
  return s;
}

bool Progress::output_due() const {
  const double interval = options_.live ? options_.redraw_interval_s : options_.log_interval_s;
  return now() - last_output_ >= interval;
}

void Progress::update() {
  const double t = now();
  const int64_t prefilled = prefill_tokens_ - seen_prefill_;
  const int64_t decoded = decode_tokens_ - seen_decode_;
  if (prefilled > 0 || decoded > 0) {  // a step ran since the last call
    const double step_s = t - last_step_end_;
    ++num_steps_;
    if (prefilled > 0) {
      ++prefill_steps_;
      prefill_s_ += step_s;
      prefill_step_tokens_ += prefilled;
    } else {
      const bool first = decode_steps_ == 0;
      ++decode_steps_;
      decode_s_ += step_s;
      decode_step_tokens_ += decoded;
      moving_average(recent_decode_step_s_, step_s, first);
      moving_average(recent_decode_batch_, static_cast<double>(decoded), first);
      decode_fit_.add(static_cast<double>(decoded), step_s);
    }
    seen_prefill_ = prefill_tokens_;
    seen_decode_ = decode_tokens_;
    last_step_end_ = t;
  }
  const double interval = options_.live ? options_.redraw_interval_s : options_.log_interval_s;
  if (t - last_output_ < interval) return;
  last_output_ = t;
  if (options_.live) {
    // Carriage return, the line, then erase whatever a longer previous line left.
    const std::string text = fmt::format("\r{}\x1b[K", bar_line());
    if (options_.write_live) {
      options_.write_live(text);
    } else {
      std::fputs(text.c_str(), stderr);
      std::fflush(stderr);
    }
    drawn_ = true;
  } else {
    emit_log(fmt::format("progress: {}", status_line()));
  }
}

void Progress::emit_log(const std::string& text) const {
  if (options_.log) {
    options_.log(text);
  } else {
    spdlog::info("{}", text);
  }
}

void Progress::finish() {
  if (drawn_) {
    const std::string clear = "\r\x1b[K";
    if (options_.write_live) {
      options_.write_live(clear);
    } else {
      std::fputs(clear.c_str(), stderr);
      std::fflush(stderr);
    }
    drawn_ = false;
  }
  emit_log(fmt::format("done: {}", summary()));
}

}  // namespace nanovllm
