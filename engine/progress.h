// Progress of a run on stderr: a live one-line bar when stderr is a terminal, otherwise a
// spdlog info line every few seconds (logs stay readable in files), a start-up line once the
// model is loaded, and a final summary. The clock and both outputs are injectable so tests
// drive it with a fake clock.
//
// Three spans of time, as vLLM users expect them: start-up (model load, warm-up, graph
// capture, NCCL set-up; reported on its own line), generation (from the engine's start, its
// requests added and first step next, to the end of its last step: every tok/s figure and
// the req/s divide by it, as nanovllm-bench's do) and wall (the whole run, start-up and
// request validation included; reported once, as such).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ipc/step_executor.h"

namespace nanovllm {

// Seconds on std::chrono::steady_clock: Progress's clock unless ProgressOptions has one.
double monotonic_seconds();

struct ProgressOptions {
  bool live = false;               // redraw one line in place (stderr is a terminal)
  double log_interval_s = 5.0;     // not live: one log line this often
  double redraw_interval_s = 0.1;  // live: at most this often
  int bar_width = 24;              // live: characters of the bar itself
  std::function<double()> clock;   // seconds, monotonic; empty = monotonic_seconds
  std::function<void(std::string_view)> write_live;  // empty = stderr
  std::function<void(const std::string&)> log;       // empty = spdlog::info
  // When the run began, on `clock` (the wall time's start); unset = when Progress is built.
  std::optional<double> run_start;
};

// What is left to compute, in tokens (the ETA's input; the job knows its requests).
struct WorkLeft {
  int64_t prompt_tokens = 0;  // prompt tokens not yet prefilled (computed or cached)
  // Output tokens not yet generated, each sequence's max_tokens (and max_model_len) bounding
  // its own, and the most any one sequence may still generate.
  int64_t output_tokens = 0;
  int64_t longest_output = 0;
};

bool stderr_is_terminal();

// "0:07", "12:34", "1:02:03"
std::string format_duration(double seconds);

class Progress {
 public:
  // Steps measured before their rate is trusted for an ETA: prefill steps are large and
  // alike, decode steps are small and vary with the batch.
  static constexpr int kMinPrefillSteps = 1;
  static constexpr int kMinDecodeSteps = 3;

  // Starts the clock; generation starts here too unless begin_generation() moves it.
  // `total_requests` counts every request that will get a result line.
  explicit Progress(int64_t total_requests, ProgressOptions options = {});

  // Around the model load: logs the start-up line (its parts where the executor timed them).
  void begin_startup();
  void end_startup(const std::optional<StartupTiming>& parts);
  // The engine's first step comes next: generation time starts now.
  void begin_generation();

  // The engine's running totals (EngineStats), so callers keep no "seen so far" copies.
  void set_tokens(int64_t prefill_total, int64_t decode_total) {
    prefill_tokens_ = prefill_total;
    decode_tokens_ = decode_total;
  }
  // Completion tokens of a finished sequence (the summary's output tok/s).
  void add_output_tokens(int64_t count) { output_tokens_ += count; }
  void request_finished(bool ok) { (ok ? num_ok_ : num_failed_) += 1; }
  // Without it (or before the rates are measured) there is no ETA. Only the line update()
  // draws reads it: callers refresh it when output_due().
  void set_work_left(const WorkLeft& work) { work_left_ = work; }
  // Whether the next update() draws the bar or logs a line.
  bool output_due() const;

  // Call after every engine step (after set_tokens): times the step (a prefill step when it
  // computed any prompt token, else a decode step, as nanovllm-bench classifies them) and
  // redraws the bar or logs a line when one is due.
  void update();
  // Clears the bar and logs the summary.
  void finish();

  // Seconds left while the rates and the work left are known: prompt tokens left at the
  // prefill steps' rate, plus the decode steps left (the output left over the recent batch
  // size, at least the longest output left) at the recent decode step time. Once the decode
  // batch has varied, a step's time is split into a per-step and a per-token part (a line
  // through the recent steps: on a GPU steps cost about the same at any small batch, on the
  // CPU backend about per token), so a tail of few sequences is timed at their batch. An
  // upper bound as far as those rates hold: outputs may end before max_tokens.
  std::optional<double> eta() const;

  // "start-up 2.4 s: load 1.9 s, warm-up 0.3 s, graph capture 0.2 s, NCCL set-up 0.1 s"
  std::string startup_line() const;
  // "12/100 requests | prefill 1234 tok/s | decode 567 tok/s | 0:12 elapsed | ETA ~1:30"
  // (rates over the generation time; the ETA only once measured)
  std::string status_line() const;
  // "[#####-------------------] " followed by status_line()
  std::string bar_line() const;
  // "requests: 98 ok, 2 failed | tokens: 12345 prefill, 6789 decode, 6887 output |
  //  generation 0:12 (12.3 s) | throughput: 560 output tok/s, 8.0 req/s | prefill steps
  //  20123 tok/s, decode steps 612 tok/s | wall 0:15 (15.0 s) incl. start-up 2.4 s"
  std::string summary() const;

  int64_t num_done() const { return num_ok_ + num_failed_; }
  int64_t output_tokens() const { return output_tokens_; }

 private:
  double now() const;
  double generation_time() const;
  void emit_log(const std::string& text) const;

  int64_t total_;
  ProgressOptions options_;
  double run_start_;
  double generation_start_;
  double last_output_;  // when the bar was drawn / a line logged
  int64_t num_ok_ = 0;
  int64_t num_failed_ = 0;
  int64_t prefill_tokens_ = 0;
  int64_t decode_tokens_ = 0;
  int64_t output_tokens_ = 0;
  std::optional<WorkLeft> work_left_;
  // Start-up: begun at, its length and parts once over.
  std::optional<double> startup_start_;
  std::optional<double> startup_s_;
  std::optional<StartupTiming> startup_parts_;
  // Step timing, from one update() to the next (the first from generation_start_).
  double last_step_end_;
  int64_t seen_prefill_ = 0;  // the token totals at the last step's end
  int64_t seen_decode_ = 0;
  int64_t num_steps_ = 0;
  int64_t prefill_steps_ = 0;
  double prefill_s_ = 0;  // prefill steps' time, and the prompt tokens they computed
  int64_t prefill_step_tokens_ = 0;
  int64_t decode_steps_ = 0;
  double decode_s_ = 0;  // pure decode steps' time, and the tokens they produced
  int64_t decode_step_tokens_ = 0;
  double recent_decode_step_s_ = 0;  // moving averages of the latest decode steps
  double recent_decode_batch_ = 0;
  // Decode step time against batch size, seconds = per_step + per_token * batch: weighted
  // least squares over the decode steps, each older step weighing less.
  struct StepTimeFit {
    double w = 0, b = 0, t = 0, bb = 0, bt = 0;  // decayed sums of 1, b, t, b * b, b * t
    void add(double batch, double seconds);
    // {per_step, per_token}; nullopt while the recent batch sizes hardly vary.
    std::optional<std::pair<double, double>> costs() const;
  };
  StepTimeFit decode_fit_;
  bool drawn_ = false;  // a live bar is on screen
};

}  // namespace nanovllm
