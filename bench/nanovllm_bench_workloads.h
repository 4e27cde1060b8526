// The requests of each benchmark workload, as token ids and sampling parameters (no
// tokenizer: every prompt is token ids, as in nano-vllm's bench.py).
//   nanovllm       bench/data/nanovllm_workload.jsonl: 256 prompts of 100..1024 random ids,
//                  max_tokens 100..1024, temperature 0.6, ignore_eos
//   nanovllm-cpu   the same file at a CPU's size: its first 16 lines, lengths scaled by 1/8
//   fixed n=N      N prompts of input_len random ids, output_len tokens each (one per N)
//   latency        one prompt of input_len ids, output_len tokens
//   shared-prefix  prefix_requests prompts: one prefix_len-token prefix + suffix_len own ids
//   long           chunked prefill: Python's random.seed(0); 64 prompts of randint(4096, 32768)
//                  ids, each randint(0, 10000); then max_tokens = randint(64, 512) per request
//   interference   64 requests (512 ids, 1024 tokens) decoding, then one late 32000-token
//                  prompt (16 tokens): how long the running sequences wait while it prefills
// Random ids are uniform in [0, min(10000, vocab)) (bench.py's randint(0, 10000)) from a
// fixed seed per workload, so every run and every tp size sees the same prompts (`long`:
// Python's draw exactly, each id mod vocab where the vocabulary has <= 10000 ids).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/nanovllm_bench_options.h"
#include "engine/request.h"
#include "engine/sampling_params.h"

namespace nanovllm::bench {

struct BenchRequest {
  std::vector<int32_t> prompt;
  SamplingParams params;
};

struct Workload {
  std::string name;  // "nanovllm", "nanovllm-cpu", "fixed n=16", "latency", "long", ...
  std::string kind;  // "nanovllm", "fixed", "latency", "shared-prefix", "long", "interference"
  std::vector<BenchRequest> requests;               // added at the run's start, in order
  nlohmann::json shape = nlohmann::json::object();  // sizes that define it (report only)
  // Added (in order) once every request of `requests` has late_after_tokens completion tokens
  // or has finished; the run then measures the running sequences' token gaps around them
  // (RunMeasure::interference). Empty for all but `interference`.
  std::vector<BenchRequest> late_requests;
  int late_after_tokens = 1;
  // Skipped with a log line (not an error) when longest_sequence() > the engine's
  // max_model_len: long and interference, which need --max-model-len set for them.
  bool skip_when_too_long = false;
  // Report the prompts' FLOPs (prefill_flops) and prefill_flop_pct: `long`.
  bool count_prefill_flops = false;

  int64_t num_requests() const;       // requests + late_requests
  int64_t prompt_tokens() const;      // over both
  int64_t max_output_tokens() const;  // Σ max_tokens: what ignore_eos generates
  int64_t longest_sequence() const;   // max over both of prompt + max_tokens
};

// The sampling of every request: the workload's own values, then (model-defaults mode) the
// folder's generation_config.json, then the command-line flags; max_tokens and ignore_eos
// stay the workload's, and --seed gives request i the seed `seed + i` (make_workloads).
struct SamplingChoice {
  SamplingOverrides model_defaults;  // empty in workload mode
  SamplingOverrides flags;
};
SamplingChoice sampling_choice(const BenchOptions& o);
SamplingParams resolve_params(const SamplingOverrides& workload, const SamplingChoice& choice);

// nano-vllm's workload file, first max_requests lines (0: all), lengths scaled by
// token_scale (ceil, at least 1). Throws std::runtime_error naming the file and line.
Workload nanovllm_workload(const std::filesystem::path& file, int max_requests, double token_scale,
                           const SamplingChoice& choice);
Workload fixed_workload(int num_seqs, int input_len, int output_len, int64_t vocab_size,
                        const SamplingChoice& choice);
Workload latency_workload(int input_len, int output_len, int64_t vocab_size,
                          const SamplingChoice& choice);
Workload shared_prefix_workload(int num_requests, int prefix_len, int suffix_len, int output_len,
                                int64_t vocab_size, const SamplingChoice& choice);
// Issue 18's `long` workload, drawn with PythonRandom (bench/python_random.h) in Python's
// order: seed 0, every prompt (its length randint(4096, 32768), then its ids randint(0,
// 10000)), then every max_tokens = randint(64, 512); temperature 0.6, ignore_eos.
// Σ max_tokens 19,796, Σ prompt tokens 1,289,860, longest prompt 31,995.
Workload long_workload(int64_t vocab_size, const SamplingChoice& choice);

// The interference workload's sizes (the defaults are issue 18's).
struct InterferenceShape {
  int num_running = 64;           // requests decoding when the long prompt arrives
  int running_prompt_len = 512;   // their prompts (random ids)
  int running_output_len = 1024;  // their max_tokens
  int late_prompt_len = 32000;    // the late request's prompt (random ids)
  int late_output_len = 16;       // its max_tokens
  // The late request arrives once every running request has this many tokens, so the steps
  // before it give a steady-decode baseline of the token gaps.
  int late_after_tokens = 32;
};
Workload interference_workload(const InterferenceShape& shape, int64_t vocab_size,
                               const SamplingChoice& choice);

// The workloads the options ask for, in order (decode-step is measured apart).
std::vector<Workload> make_workloads(const BenchOptions& o, int64_t vocab_size);

// ceil(n * scale), at least 1: how --token-scale shrinks a length.
int64_t scaled_length(int64_t n, double scale);

}  // namespace nanovllm::bench
