// nanovllm-launch's command line (CLI11). vLLM's flag names where vLLM has one. Parsing
// never exits the process: --help, --version and errors come back as text and an exit code
// for main to print and return.
#pragma once

#include <spdlog/common.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/engine_config.h"
#include "engine/request.h"
#include "engine/request_reader.h"
#include "kernels/tensor.h"

namespace nanovllm {

struct LaunchOptions {
  std::filesystem::path model;    // Hugging Face model folder (exists, is a directory)
  std::filesystem::path prompts;  // prompts.jsonl (exists, is a regular file)
  std::optional<std::filesystem::path> output;  // -o; unset (or "-") = stdout
  int tensor_parallel_size = 1;                 // --tp
  // --data-parallel-size (-dp): engine replicas, each of --tp ranks, sharing the requests.
  int data_parallel_size = 1;
  RequestShard shard;             // --shard K/N: this launcher answers request i when i mod N == K
  Device device = Device::kCuda;  // --device; default cuda when a GPU is visible, else cpu
  std::optional<int> max_model_len;  // unset: from the model's config
  int max_num_seqs = 512;
  int max_num_batched_tokens = 16384;  // tokens computed per step (the per-step budget)
  // vLLM's --enable-chunked-prefill / --no-enable-chunked-prefill and
  // --long-prefill-token-threshold (0 = off). Defaults are EngineConfig's (set there only).
  bool enable_chunked_prefill = EngineConfig{}.enable_chunked_prefill;
  int long_prefill_token_threshold = EngineConfig{}.long_prefill_token_threshold;
  // vLLM's --enable-prefix-caching / --no-enable-prefix-caching (EngineConfig's default, on).
  bool enable_prefix_caching = EngineConfig{}.enable_prefix_caching;
  // vLLM's --async-scheduling / --no-async-scheduling (EngineConfig's default, on).
  bool async_scheduling = EngineConfig{}.async_scheduling;
  double gpu_memory_utilization = 0.9;         // (0, 1]
  int block_size = 256;                        // > 0, multiple of 16
  std::optional<int> num_gpu_blocks_override;  // also the block count of the CPU backend
  // CPU backend's KV cache per rank (vLLM's VLLM_CPU_KVCACHE_SPACE); unset: sized for the
  // request file (rank/kv_cache_sizing.h).
  std::optional<double> cpu_kv_cache_space_gib;
  bool enforce_eager = false;  // no CUDA graphs
  // vLLM's --kv-cache-dtype: auto / bfloat16 (the model's) or fp8 / fp8_e4m3 (half the bytes a
  // token); int8 (kernels/int8_kv.h: fp8's bytes, closer to bf16).
  DType kv_cache_dtype = DType::kBf16;
  // vLLM's --disable-custom-all-reduce: every all-reduce through NCCL (no peer memory).
  bool disable_custom_all_reduce = false;
  // --tp > 1: always gather the LM head's logits to rank 0, never sample from the vocabulary
  // shards (engine/shard_sampling_plan.h; the tokens are the same either way).
  bool disable_shard_sampling = false;
  // vLLM's --hf-overrides: top-level config.json fields replaced before the model is read;
  // --rope-scaling X is --hf-overrides '{"rope_scaling": X}'. An empty object: none.
  nlohmann::json hf_overrides = nlohmann::json::object();

  // Default sampling for requests that do not set their own; unset = "not given", so the
  // model's generation_config.json (or the built-in default) applies.
  // --seed is the base every request's derived seed comes from; ignore_eos is set (true)
  // only when --ignore-eos is given.
  SamplingOverrides sampling;

  bool resume = false;  // skip requests whose results are already in the -o file
  // Stall watchdog (launcher/stall_watchdog.h): a rank that completes no step for this long
  // ends the run with exit status 1; 0 = off. While a stall lasts, who is behind is logged
  // every stall_log_interval_s (a hidden flag, for tests).
  double stall_timeout_s = 300;
  double stall_log_interval_s = 60;
  spdlog::level::level_enum log_level = spdlog::level::info;
};

struct LaunchParse {
  std::optional<LaunchOptions> options;  // set: go ahead with the run
  int exit_code = 0;    // when options is unset: 0 after --help/--version, 2 on a usage error
  std::string message;  // help/version text (for stdout) or the error (for stderr)
  std::string notice;   // e.g. the device fallback; main logs it
};

// `visible_gpus`: what visible_gpu_count() says (passed in so tests need no GPU).
LaunchParse parse_launch_options(int argc, const char* const* argv, int visible_gpus);
// Same, probing the GPUs through NVML (no CUDA context).
LaunchParse parse_launch_options(int argc, const char* const* argv);

}  // namespace nanovllm
