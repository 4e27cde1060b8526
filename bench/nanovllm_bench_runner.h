// The timed part of the benchmark, in rank 0's process: each repetition of a workload runs
// on a fresh LLMEngine (no prefix-cache hits carried over) over the one loaded executor, and
// is measured with the wall clock (the whole run, each step, each request's first and last
// token) and, where the executor times steps, with CUDA events; its limit is the limit
// model summed over the steps the recorder saw.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/limit_model.h"
#include "bench/nanovllm_bench_progress.h"
#include "bench/nanovllm_bench_workloads.h"
#include "bench/step_recorder.h"
#include "engine/engine_config.h"
#include "engine/tokenizer.h"

namespace nanovllm::bench {

// A workload with late requests (interference): the token gaps of the sequences that were
// running when the late request arrived. A gap is the time between two consecutive tokens of
// one of those sequences (wall clock, as the host sees the tokens).
struct InterferenceMeasure {
  // The longest gap that overlaps [late request added, its first token]: the running
  // sequences' worst wait while it was prefilled.
  double max_gap_ms = 0;
  // The longest gap between tokens that both came after every running sequence had its first
  // token and before the late request was added: steady decoding.
  double baseline_max_gap_ms = 0;
  double long_ttft_ms = 0;  // the late request: added to its first token
};

// One repetition of a workload.
struct RunMeasure {
  double elapsed_s = 0;  // the first add_request to the last token, wall clock
  // When it started, seconds on the steady clock (CLOCK_MONOTONIC: one clock for every
  // process of the machine, so the replicas of a --dp run can be put on one time line).
  double clock_start_s = 0;
  int64_t num_requests = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;   // completion tokens the requests got
  int64_t cached_tokens = 0;   // prompt tokens served by the prefix cache (first prefills)
  int64_t prefill_tokens = 0;  // prompt tokens computed (by the prefill steps)
  int64_t decode_tokens = 0;   // tokens the decode steps produced
  int64_t num_steps = 0;
  // A step is a prefill step when it computed any prompt tokens (with chunked prefill a mixed
  // step also decodes: its time and decode tokens count as prefill), else a decode step.
  double prefill_s = 0;  // wall time of the engine's prefill steps (schedule + execute)
  double decode_s = 0;   // the same for its decode steps
  double ttft_ms = 0;    // mean over requests: its arrival (run start or late add) to first token
  double tpot_ms = 0;    // mean over requests with > 1 token: first to last token / (n - 1)
  std::optional<double> gpu_s;           // Σ CUDA-event time of the steps on rank 0's stream
  std::optional<double> limit_s;         // the limit model over the steps this run ran
  std::optional<double> decode_limit_s;  // the same over its decode steps only (S_TG's limit)
  std::vector<OpCost> limit_breakdown;   // the same, per operation (empty without limits)
  // Workloads with count_prefill_flops (long): prefill_flops of the prompts (with a model
  // shape) and 100 · (flop_count / tp) / bf16_flop_per_s / prefill_s (with limits).
  std::optional<double> flop_count;
  std::optional<double> prefill_flop_pct;
  std::optional<InterferenceMeasure> interference;  // workloads with late requests
};

class BenchRunner {
 public:
  // `engine`: the engine limits with num_kvcache_blocks set; `limit`: unset on the CPU.
  // tokenizer: for workloads with stop strings (may be null otherwise); it outlives this.
  BenchRunner(StepRecorder& executor, const EngineConfig& engine, std::optional<LimitSetup> limit,
              const Tokenizer* tokenizer = nullptr);

  // The model's shape for flop_count where there are no limits (CPU); with limits, theirs.
  void set_model_shape(const ModelShape& shape) { shape_ = shape; }

  // One short request first, as bench.py does (kernels, allocator, graphs warmed); seconds.
  // Throws BenchStopped (bench/nanovllm_bench_stop.h) when the parent asks to stop.
  double warm_up(double token_scale);
  // One timed repetition, counted into `progress` (may be null; its begin_run / end_run are
  // the caller's). Throws std::runtime_error when the engine refuses a request (the limits do
  // not fit the workload) or on a stop signal, BenchStopped when the parent asks to stop;
  // either between two steps.
  RunMeasure run(const Workload& workload, BenchProgress* progress = nullptr);

 private:
  StepRecorder& executor_;
  EngineConfig engine_;
  std::optional<LimitSetup> limit_;
  std::optional<ModelShape> shape_;
  const Tokenizer* tokenizer_;
};

}  // namespace nanovllm::bench
