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
#include "bench/nanovllm_bench_workloads.h"
#include "bench/step_recorder.h"
#include "engine/engine_config.h"
#include "engine/tokenizer.h"

namespace nanovllm::bench {

// One repetition of a workload.
struct RunMeasure {
  double elapsed_s = 0;  // the first add_request to the last token, wall clock
  int64_t num_requests = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;   // completion tokens the requests got
  int64_t cached_tokens = 0;   // prompt tokens served by the prefix cache (first prefills)
  int64_t prefill_tokens = 0;  // prompt tokens computed by prefill steps
  int64_t decode_tokens = 0;   // tokens decode steps produced
  int64_t num_steps = 0;
  double prefill_s = 0;         // wall time of the engine's prefill steps (schedule + execute)
  double decode_s = 0;          // the same for its decode steps
  double ttft_ms = 0;           // mean over requests: run start to its first token
  double tpot_ms = 0;           // mean over requests with > 1 token: first to last token / (n - 1)
  std::optional<double> gpu_s;  // Σ CUDA-event time of the steps on rank 0's stream
  std::optional<double> limit_s;         // the limit model over the steps this run ran
  std::optional<double> decode_limit_s;  // the same over its decode steps only (S_TG's limit)
  std::vector<OpCost> limit_breakdown;   // the same, per operation (empty without limits)
};

class BenchRunner {
 public:
  // `engine`: the engine limits with num_kvcache_blocks set; `limit`: unset on the CPU.
  // tokenizer: for workloads with stop strings (may be null otherwise); it outlives this.
  BenchRunner(StepRecorder& executor, const EngineConfig& engine, std::optional<LimitSetup> limit,
              const Tokenizer* tokenizer = nullptr);

  // One short request first, as bench.py does (kernels, allocator, graphs warmed); seconds.
  double warm_up(double token_scale);
  // One timed repetition; progress on stderr. Throws std::runtime_error when the engine
  // refuses a request (the limits do not fit the workload) or on SIGINT.
  RunMeasure run(const Workload& workload);

 private:
  StepRecorder& executor_;
  EngineConfig engine_;
  std::optional<LimitSetup> limit_;
  const Tokenizer* tokenizer_;
};

}  // namespace nanovllm::bench
