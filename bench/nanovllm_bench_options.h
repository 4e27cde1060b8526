// nanovllm-bench's command line (CLI11): the launcher's engine and sampling flags under the
// same names, the workloads and their sizes, repetitions, the configurations (tensor-parallel
// sizes and data-parallel replicas: bench/nanovllm_bench_layouts.h), and the internal flags
// with which the benchmark re-runs itself once per configuration (a fresh process each, since
// the launcher must fork before any CUDA call). Parsing never exits the process.
#pragma once

#include <spdlog/common.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bench/nanovllm_bench_layouts.h"
#include "engine/engine_config.h"
#include "engine/request.h"
#include "launcher/cli.h"

namespace nanovllm::bench {

// Which sampling settings the workloads run with, before the --temperature/--top-k/--top-p/
// --min-p flags (which override every request's own values).
enum class SamplingMode {
  kWorkload,       // each workload's own: temperature 0.6, nothing else (nano-vllm's bench.py)
  kModelDefaults,  // plus the model folder's generation_config.json (Qwen3: top-k 20, top-p 0.95)
};

// Every workload --workloads knows, in the order they run. What `all` (the default) means
// on each device: bench/nanovllm_bench_selection.h.
inline constexpr const char* kAllWorkloads[] = {"nanovllm", "nanovllm-cpu",  "fixed",
                                                "latency",  "shared-prefix", "decode-step",
                                                "long",     "interference"};

struct BenchOptions {
  std::filesystem::path model;
  std::vector<int> tp_sizes{1};  // --tp 1,2: tensor-parallel sizes, as given
  std::vector<int> dp_sizes{1};  // --dp 1,2,4: replicas, each running the whole workload
  // What runs, in order (set by parsing): --layouts, else every (tp, dp) of the two lists.
  std::vector<BenchLayout> layouts{BenchLayout{}};
  Device device = Device::kCuda;

  // The launcher's engine flags (launcher/cli.h), same meaning and defaults.
  std::optional<int> max_model_len;
  int max_num_seqs = 512;
  int max_num_batched_tokens = 16384;
  double gpu_memory_utilization = 0.9;
  int block_size = 256;
  std::optional<int> num_gpu_blocks_override;
  double cpu_kv_cache_space_gib = 4.0;
  bool enforce_eager = false;
  std::string kv_cache_dtype = "auto";     // --kv-cache-dtype (launcher/cli.h)
  bool enable_prefix_caching = true;       // --[no-]enable-prefix-caching
  bool async_scheduling = true;            // --[no-]async-scheduling
  bool disable_custom_all_reduce = false;  // NCCL for every all-reduce (vLLM's flag)
  bool disable_shard_sampling = false;     // --tp: gather the logits every step (launcher/cli.h)
  // --knock-out-all-reduce (CUDA, a tp above 1): the ranks skip every all-reduce of the forward
  // pass (RunSettings::knock_out_all_reduce). A timing experiment with wrong outputs: the
  // decode step's time beside a normal run's gives the all-reduce share inside the graph.
  bool knock_out_all_reduce = false;
  // false: --max-num-batched-tokens was not given (then --no-enable-chunked-prefill raises the
  // budget to max_model_len, as vLLM does, so every prompt fits one step).
  bool max_num_batched_tokens_given = false;
  // Chunked prefill (engine/engine_config.h): --enable-chunked-prefill (default) /
  // --no-enable-chunked-prefill, --long-prefill-token-threshold N (0 = off), and the bench's
  // own --chunked-step-mode mixed|alternating (EngineConfig::mixed_chunked_steps).
  bool enable_chunked_prefill = EngineConfig{}.enable_chunked_prefill;
  int long_prefill_token_threshold = EngineConfig{}.long_prefill_token_threshold;
  bool mixed_chunked_steps = EngineConfig{}.mixed_chunked_steps;

  SamplingMode sampling = SamplingMode::kWorkload;
  SamplingOverrides sampling_flags;  // temperature, top_p, top_k, min_p, seed (set = given)
  // --stop: every request's stop strings (the engine then detokenizes and searches each
  // completion as it grows: what stop strings cost).
  std::vector<std::string> stop;
  // --logprobs N and the three penalties: every request's (what the device-side request
  // fields cost).
  std::optional<int32_t> logprobs;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;

  std::vector<std::string> workloads;  // of kAllWorkloads, in that order
  int runs = 3;                        // repetitions, each on a fresh engine
  // nanovllm workload: the committed file, its first max_requests lines (0: all), prompt
  // lengths and max_tokens scaled by token_scale (rounded up, at least 1) for quick runs.
  // nanovllm-cpu: the same file at a CPU's size (bench/nanovllm_bench_selection.h's
  // CpuSizes unless --max-requests / --token-scale are given).
  std::filesystem::path workload_file;
  int max_requests = 0;
  double token_scale = 1.0;
  int cpu_max_requests = 16;
  double cpu_token_scale = 0.125;
  // fixed shapes (one row per num_seqs) and batch-1 latency (input_len, output_len).
  std::vector<int> num_seqs{1, 16, 64, 256};
  int input_len = 512;
  int output_len = 128;
  // shared prefix: requests sharing a prefix_len-token prompt, each with suffix_len own tokens.
  int prefix_requests = 256;
  int prefix_len = 2048;
  int suffix_len = 64;
  int prefix_output_len = 256;
  // decode step (CUDA): for each batch size, that many sequences at about `context` tokens of
  // context each (one entry per size, from one start-up).
  std::vector<int> decode_batches{256};
  int decode_context = 1024;

  std::optional<std::filesystem::path> json;  // --json: the result file
  spdlog::level::level_enum log_level = spdlog::level::info;

  // Internal (a child run): the one configuration to run (tp, dp), where its JSON goes, and
  // its end of the stop channel (bench/nanovllm_bench_stop.h; -1: none).
  std::optional<std::filesystem::path> child_json;
  int child_tp = 0;
  int child_dp = 1;
  int child_stop_fd = -1;

  bool runs_workload(const std::string& name) const;
};

struct BenchParse {
  std::optional<BenchOptions> options;  // set: go ahead
  int exit_code = 0;                    // when options is unset: 0 after --help, 2 on a usage error
  std::string message;                  // help text (stdout) or the error (stderr)
  std::string notice;                   // e.g. the device fallback
};

// `visible_gpus`: launcher/gpu_probe.h's count (passed in so tests need no GPU).
BenchParse parse_bench_options(int argc, const char* const* argv, int visible_gpus);

// The launcher's options for one configuration of this benchmark (make_run_settings' input:
// `dp` replicas of `tp` ranks, the CPU threads shared among all their ranks), chunked prefill
// and its threshold included; without chunking and without --max-num-batched-tokens the
// budget is raised to --max-model-len (as apply_engine_flags).
LaunchOptions launch_options(const BenchOptions& o, int tp, int dp = 1);

// The bench's engine flags the launcher does not carry, applied to make_run_settings' engine
// config: prefix caching, chunked prefill, its threshold and step mode; without chunking and
// without --max-num-batched-tokens, the budget becomes max(budget, max_model_len) (vLLM's
// default then). Throws UsageError when the result is invalid (EngineConfig::validate).
void apply_engine_flags(const BenchOptions& o, EngineConfig& engine);

}  // namespace nanovllm::bench
