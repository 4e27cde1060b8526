// A benchmark process's progress over its whole plan (bench/nanovllm_bench_plan.h), on stderr:
// which workload and repetition runs, its requests and tokens done, the tokens done of every
// run together, and an ETA. A line every few seconds during a run and one when it ends.
//
// The ETA is the time the work left would take: a workload with a finished run takes its
// measured time per run for each run it has left (runs of one workload are the same work);
// one without takes its prompt tokens left times the seconds per prompt token of the prefill
// steps so far, plus its output tokens left times the seconds per token of the decode steps so
// far. Until both kinds of step have been measured for at least kMinMeasuredSeconds it is
// unknown ("ETA ?") rather than a guess from a few steps.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/nanovllm_bench_plan.h"

namespace nanovllm::bench {

struct BenchProgressOptions {
  double log_interval_s = 5.0;                  // during a run: one line this often
  std::function<double()> clock;                // seconds, monotonic; empty: steady_clock
  std::function<void(const std::string&)> log;  // empty: spdlog::info
};

class BenchProgress {
 public:
  static constexpr double kMinMeasuredSeconds = 1.0;

  explicit BenchProgress(BenchPlan plan, BenchProgressOptions options = {});

  // Run `run` (1-based) of the plan's workload `name` starts.
  void begin_run(const std::string& name, int run);
  // One engine step of it ended: whether it computed prompt tokens (a prefill step), its wall
  // time, the prompt tokens it prefilled (computed or served by the prefix cache), the
  // completion tokens and finished requests it added. Logs a line when one is due.
  void step(bool prefill, double seconds, int64_t prompt_tokens, int64_t output_tokens,
            int64_t finished_requests);
  // The run ended after `elapsed_s`; logs its line.
  void end_run(double elapsed_s);

  // Seconds until the plan is done; unset while unknown.
  std::optional<double> eta_s() const;
  // "fixed n=8 run 2/3: 5/8 requests, 120/256 output tokens | all runs: 3,200/11,648 prompt +
  //  900/8,613 output tokens, 0:42 elapsed | ETA 1:23"
  std::string status() const;

 private:
  struct Done {
    int runs = 0;            // finished runs
    double run_seconds = 0;  // Σ their elapsed time
  };
  double now() const;
  void log(const std::string& line);
  std::optional<double> seconds_per(bool prefill) const;

  BenchPlan plan_;
  BenchProgressOptions options_;
  std::vector<Done> done_;  // by plan index
  double start_ = 0, run_start_ = 0, last_line_ = 0;
  int current_ = -1;  // plan index of the running workload; -1: between runs
  int shown_ = -1;    // the one the lines name: running, or the last that ran
  int run_ = 0;
  int64_t run_requests_ = 0, run_prompt_ = 0, run_output_ = 0;
  int64_t prompt_done_ = 0, output_done_ = 0;  // every run, the current one included
  double prefill_s_ = 0, decode_s_ = 0;        // Σ step time by kind
  int64_t prefill_tokens_ = 0, decode_tokens_ = 0;
};

}  // namespace nanovllm::bench
