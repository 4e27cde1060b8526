// The requests of each benchmark workload, as token ids and sampling parameters (no
// tokenizer: every prompt is token ids, as in nano-vllm's bench.py).
//   nanovllm       bench/data/nanovllm_workload.jsonl: 256 prompts of 100..1024 random ids,
//                  max_tokens 100..1024, temperature 0.6, ignore_eos
//   fixed n=N      N prompts of input_len random ids, output_len tokens each (one per N)
//   latency        one prompt of input_len ids, output_len tokens
//   shared-prefix  prefix_requests prompts: one prefix_len-token prefix + suffix_len own ids
// Random ids are uniform in [0, min(10000, vocab)) (bench.py's randint(0, 10000)) from a
// fixed seed per workload, so every run and every tp size sees the same prompts.
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
  std::string name;  // "nanovllm", "fixed n=16", "latency", "shared-prefix"
  std::string kind;  // "nanovllm", "fixed", "latency", "shared-prefix"
  std::vector<BenchRequest> requests;
  nlohmann::json shape = nlohmann::json::object();  // sizes that define it (report only)
  int64_t prompt_tokens() const;
  int64_t max_output_tokens() const;  // Σ max_tokens: what ignore_eos generates
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

// The workloads the options ask for, in order (decode-step is measured apart).
std::vector<Workload> make_workloads(const BenchOptions& o, int64_t vocab_size);

// ceil(n * scale), at least 1: how --token-scale shrinks a length.
int64_t scaled_length(int64_t n, double scale);

}  // namespace nanovllm::bench
