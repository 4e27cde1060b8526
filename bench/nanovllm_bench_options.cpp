#include "bench/nanovllm_bench_options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/nanovllm_bench_selection.h"
#include "launcher/cli_parse.h"
#include "launcher/usage_error.h"

namespace nanovllm::bench {

namespace fs = std::filesystem;

namespace {

void validate(BenchOptions& o, const std::string& device_flag,
              const std::vector<std::string>& layouts, int visible_gpus, const FlagGiven& given,
              std::string& notice) {
  if (o.block_size <= 0 || o.block_size % 16 != 0)
    throw UsageError("--block-size " + std::to_string(o.block_size) +
                     ": must be a positive multiple of 16");
  if (!(o.gpu_memory_utilization > 0.0 && o.gpu_memory_utilization <= 1.0))
    throw UsageError("--gpu-memory-utilization: must be in (0, 1]");
  if (!(o.cpu_kv_cache_space_gib > 0.0)) throw UsageError("--cpu-kv-cache-space: must be > 0");
  if (o.sampling_flags.top_p &&
      !(*o.sampling_flags.top_p > 0.0f && *o.sampling_flags.top_p <= 1.0f))
    throw UsageError("--top-p: must be in (0, 1]");
  if (o.sampling_flags.top_k && *o.sampling_flags.top_k < -1)
    throw UsageError("--top-k: must be -1 or 0 (off) or > 0");
  if (!(o.token_scale > 0.0 && o.token_scale <= 1.0))
    throw UsageError("--token-scale: must be in (0, 1]");
  for (const int n : o.num_seqs)
    if (n < 1) throw UsageError("--num-seqs: every count must be >= 1");

  if (device_flag.empty()) {
    o.device = visible_gpus > 0 ? Device::kCuda : Device::kCpu;
    if (visible_gpus == 0) notice = "no GPU visible; running on the CPU backend (--device cpu)";
  } else {
    o.device = device_flag == "cuda" ? Device::kCuda : Device::kCpu;
  }
  o.workloads = workload_list(o.workloads, o.device);
  apply_device_sizes(o, given);
  o.layouts = bench_layouts(o.tp_sizes, o.dp_sizes, layouts, given("--tp") || given("--dp"));
  if (o.child_dp < 1) throw UsageError("--child-dp: must be >= 1");
  if (o.device == Device::kCuda) check_layouts_fit(o.layouts, visible_gpus);
  if (o.knock_out_all_reduce &&
      (o.device != Device::kCuda || std::none_of(o.layouts.begin(), o.layouts.end(),
                                                 [](const BenchLayout& l) { return l.tp > 1; })))
    throw UsageError(
        "--knock-out-all-reduce: needs --device cuda and a --tp above 1 (the all-reduces it "
        "skips are the GPU ranks')");
  std::error_code ec;
  if (!fs::is_directory(o.model, ec))
    throw UsageError("model folder '" + o.model.string() + "' is not a directory");
  resolve_workload_file(o);
}

}  // namespace

bool BenchOptions::runs_workload(const std::string& name) const {
  return std::find(workloads.begin(), workloads.end(), name) != workloads.end();
}

BenchParse parse_bench_options(int argc, const char* const* argv, int visible_gpus) {
  BenchOptions o;
  std::string device_flag, sampling = "workload", log_level = "info", child_json;
  std::vector<std::string> workloads{"all"}, layouts;
  std::string chunked_step_mode = o.mixed_chunked_steps ? "mixed" : "alternating";
  CLI::App app{
      "End-to-end benchmark of nanovllm: the launcher's processes on a model folder, "
      "timed per workload against the machine's limit.",
      "nanovllm-bench"};
  // Flag pairs listed without CLI11's "{false}" (launcher/cli_parse.h).
  const auto formatter = std::make_shared<HelpFormatter>();
  formatter->column_width(44);
  app.formatter(formatter);
  const auto positive = CLI::Range(1, INT_MAX);

  app.add_option("model", o.model, "Hugging Face model folder")->required();
  app.add_option("--tp,--tensor-parallel-size", o.tp_sizes, "tensor-parallel sizes, e.g. 1,2")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--dp,--data-parallel-size", o.dp_sizes,
                 "data-parallel sizes, e.g. 1,2,4: engine replicas of --tp ranks each, on their "
                 "own GPUs; every replica runs the whole workload (the work scales with them), "
                 "each run starting together; with several --tp sizes, every pair runs")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--layouts", layouts,
                 "instead of --tp/--dp: the configurations to run, in order, e.g. "
                 "dp4xtp1,dp2xtp2,dp1xtp4 (tp<N>xdp<N> or dp<N>xtp<N>)")
      ->delimiter(',');
  app.add_option("--device", device_flag, "cuda (default when a GPU is visible) or cpu")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  app.add_option("--max-model-len", o.max_model_len, "longest prompt + output")->check(positive);
  app.add_option("--max-num-seqs", o.max_num_seqs, "most sequences in one step")
      ->check(positive)
      ->capture_default_str();
  const CLI::Option* batched_tokens =
      app.add_option("--max-num-batched-tokens", o.max_num_batched_tokens,
                     "most tokens in one step (without chunked prefill: default max(16384, "
                     "max model len))")
          ->check(positive)
          ->capture_default_str();
  app.add_option("--gpu-memory-utilization", o.gpu_memory_utilization, "share of GPU memory")
      ->capture_default_str();
  app.add_option("--block-size", o.block_size, "tokens per KV-cache block")->capture_default_str();
  app.add_option("--num-gpu-blocks-override", o.num_gpu_blocks_override, "KV-cache blocks")
      ->check(positive);
  app.add_option("--cpu-kv-cache-space", o.cpu_kv_cache_space_gib, "GiB of KV cache on the CPU")
      ->capture_default_str();
  app.add_flag("--enforce-eager", o.enforce_eager, "no CUDA graphs");
  app.add_option("--kv-cache-dtype", o.kv_cache_dtype,
                 "KV cache element: auto, bfloat16, fp8, fp8_e4m3 or int8 (the launcher's flag)")
      ->check(CLI::IsMember({"auto", "bfloat16", "fp8", "fp8_e4m3", "int8"}))
      ->capture_default_str();
  app.add_flag("--disable-custom-all-reduce", o.disable_custom_all_reduce,
               "--tp on GPUs: every all-reduce through NCCL, none through peer memory");
  app.add_flag("--disable-shard-sampling", o.disable_shard_sampling,
               "--tp: gather every step's logits to rank 0 instead of sampling from the "
               "vocabulary shards");
  app.add_flag("--knock-out-all-reduce", o.knock_out_all_reduce,
               "timing experiment, CUDA with a --tp above 1: every all-reduce of the forward pass "
               "is skipped (wrong outputs); beside a normal run, the decode step's all-reduce "
               "share inside its CUDA graph");
  app.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", o.enable_prefix_caching,
               "reuse the KV blocks of prompts' computed prefixes (vLLM's flags; default on)");
  app.add_flag("--async-scheduling,!--no-async-scheduling", o.async_scheduling,
               "launch the next decode step while one runs (vLLM's flags; default on where the "
               "executor allows: one GPU with CUDA graphs)");
  app.add_flag("--enable-chunked-prefill,!--no-enable-chunked-prefill", o.enable_chunked_prefill,
               "prompts in chunks sharing each step's token budget with the decodes (default on)");
  app.add_option("--long-prefill-token-threshold", o.long_prefill_token_threshold,
                 "most prompt tokens one sequence computes in a step while others run or "
                 "wait (0 = the whole budget)")
      ->check(CLI::Range(0, INT_MAX))
      ->capture_default_str();
  app.add_option("--chunked-step-mode", chunked_step_mode,
                 "with chunking: mixed (decodes and chunks in one step) or alternating (decode "
                 "steps and chunk steps take turns)")
      ->check(CLI::IsMember({"mixed", "alternating"}))
      ->capture_default_str();

  app.add_option("--sampling", sampling,
                 "workload (temperature 0.6 only, as nano-vllm's bench.py) or model-defaults "
                 "(plus generation_config.json)")
      ->check(CLI::IsMember({"workload", "model-defaults"}))
      ->capture_default_str();
  app.add_option("--temperature", o.sampling_flags.temperature,
                 "every request's temperature (0 = greedy)")
      ->check(CLI::Range(0.0f, 1e6f));
  app.add_option("--top-p", o.sampling_flags.top_p, "every request's top-p");
  app.add_option("--top-k", o.sampling_flags.top_k, "every request's top-k (-1 or 0 = off)");
  app.add_option("--min-p", o.sampling_flags.min_p, "every request's min-p")
      ->check(CLI::Range(0.0f, 1.0f));
  app.add_option("--seed", o.sampling_flags.seed, "request i samples with seed N + i");
  app.add_option("--stop", o.stop,
                 "a stop string for every request (repeat the flag for several; the model "
                 "folder's tokenizer.json detokenizes the completions)");
  app.add_option("--logprobs", o.logprobs,
                 "every request's logprobs (the sampled token's and N alternatives)")
      ->check(CLI::Range(0, 20));
  app.add_option("--presence-penalty", o.presence_penalty, "every request's presence penalty")
      ->check(CLI::Range(-2.0f, 2.0f));
  app.add_option("--frequency-penalty", o.frequency_penalty, "every request's frequency penalty")
      ->check(CLI::Range(-2.0f, 2.0f));
  app.add_option("--repetition-penalty", o.repetition_penalty,
                 "every request's repetition penalty (> 0)")
      ->check(CLI::PositiveNumber);

  app.add_option("--workloads", workloads,
                 "nanovllm, nanovllm-cpu, fixed, latency, shared-prefix, decode-step, long, "
                 "interference, or all (all but long and interference, and nanovllm-cpu on the "
                 "CPU, nanovllm on CUDA)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--runs", o.runs, "repetitions, each on a fresh engine")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--workload-file", o.workload_file,
                 "the nanovllm workload (default: the installed or committed one)");
  app.add_option("--max-requests", o.max_requests,
                 "nanovllm: only the first N requests (0: all; nanovllm-cpu: 16)")
      ->check(CLI::Range(0, INT_MAX));
  app.add_option("--token-scale", o.token_scale,
                 "nanovllm: scale prompt lengths and max_tokens (nanovllm-cpu: 0.125)")
      ->capture_default_str();
  // The CPU backend's defaults of these: bench/nanovllm_bench_selection.h's CpuSizes.
  app.add_option("--num-seqs", o.num_seqs, "fixed: sequences per row (CPU: 1,8)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--input-len", o.input_len, "fixed, latency: prompt tokens (CPU: 128)")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--output-len", o.output_len, "fixed, latency: output tokens (CPU: 32)")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--prefix-requests", o.prefix_requests, "shared-prefix: requests (CPU: 8)")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--prefix-len", o.prefix_len, "shared-prefix: shared prompt tokens (CPU: 256)")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--suffix-len", o.suffix_len, "shared-prefix: own prompt tokens (CPU: 16)")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--prefix-output-len", o.prefix_output_len,
                 "shared-prefix: output tokens (CPU: 32)")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--decode-batch", o.decode_batches, "decode-step: sequences (a list: 1,16,256)")
      ->delimiter(',')
      ->check(positive)
      ->capture_default_str();
  app.add_option("--decode-context", o.decode_context, "decode-step: context tokens")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--json", o.json, "write the result JSON here (bench/README.md)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();
  // Internal: how the benchmark runs one configuration in a fresh process of itself.
  app.add_option("--child-json", child_json)->group("");
  app.add_option("--child-tp", o.child_tp)->group("");
  app.add_option("--child-dp", o.child_dp)->group("");
  app.add_option("--child-stop-fd", o.child_stop_fd)->group("");

  BenchParse result;
  if (const auto exit = run_cli_parse(app, "nanovllm-bench", [&] {
        // vLLM's single-dash spellings -tp and -dp, which CLI11 cannot declare.
        std::vector<std::string> args(argv, argv + argc);
        std::vector<const char*> long_flags;
        for (std::string& a : args) {
          if (a == "-tp") a = "--tensor-parallel-size";
          if (a == "-dp") a = "--data-parallel-size";
          long_flags.push_back(a.c_str());
        }
        app.parse(argc, long_flags.data());
        o.workloads = workloads;
        o.max_num_batched_tokens_given = batched_tokens->count() > 0;
        o.mixed_chunked_steps = chunked_step_mode == "mixed";
        o.sampling =
            sampling == "model-defaults" ? SamplingMode::kModelDefaults : SamplingMode::kWorkload;
        o.log_level = spdlog::level::from_str(log_level);
        if (!child_json.empty()) o.child_json = child_json;
        const FlagGiven given = [&](const char* flag) { return app.count(flag) > 0; };
        validate(o, device_flag, layouts, visible_gpus, given, result.notice);
      })) {
    result.exit_code = exit->exit_code;
    result.message = exit->message;
    return result;
  }
  result.options = std::move(o);
  return result;
}

LaunchOptions launch_options(const BenchOptions& o, int tp, int dp) {
  LaunchOptions l;
  l.model = o.model;
  l.tensor_parallel_size = tp;
  l.data_parallel_size = dp;
  l.device = o.device;
  l.max_model_len = o.max_model_len;
  l.max_num_seqs = o.max_num_seqs;
  l.max_num_batched_tokens = o.max_num_batched_tokens;
  l.enable_chunked_prefill = o.enable_chunked_prefill;
  l.long_prefill_token_threshold = o.long_prefill_token_threshold;
  l.enable_prefix_caching = o.enable_prefix_caching;
  l.disable_custom_all_reduce = o.disable_custom_all_reduce;
  l.disable_shard_sampling = o.disable_shard_sampling;
  // vLLM's default budget without chunking: one step holds a max_model_len prompt (the cap by
  // the model's limit only lowers max_model_len; apply_engine_flags sees the capped value).
  if (!o.enable_chunked_prefill && !o.max_num_batched_tokens_given && o.max_model_len)
    l.max_num_batched_tokens = std::max(l.max_num_batched_tokens, *o.max_model_len);
  l.gpu_memory_utilization = o.gpu_memory_utilization;
  l.block_size = o.block_size;
  l.num_gpu_blocks_override = o.num_gpu_blocks_override;
  l.cpu_kv_cache_space_gib = o.cpu_kv_cache_space_gib;
  l.enforce_eager = o.enforce_eager;
  if (o.kv_cache_dtype == "fp8" || o.kv_cache_dtype == "fp8_e4m3")
    l.kv_cache_dtype = DType::kFp8E4M3;
  if (o.kv_cache_dtype == "int8") l.kv_cache_dtype = DType::kI8;
  l.log_level = o.log_level;
  return l;
}

void apply_engine_flags(const BenchOptions& o, EngineConfig& engine) {
  engine.enable_prefix_caching = o.enable_prefix_caching;
  engine.async_scheduling = o.async_scheduling;
  engine.enable_chunked_prefill = o.enable_chunked_prefill;
  engine.long_prefill_token_threshold = o.long_prefill_token_threshold;
  engine.mixed_chunked_steps = o.mixed_chunked_steps;
  if (!o.enable_chunked_prefill && !o.max_num_batched_tokens_given)
    engine.max_num_batched_tokens = std::max(engine.max_num_batched_tokens, engine.max_model_len);
  try {
    EngineConfig limits = engine;
    limits.num_kvcache_blocks = -1;  // 0 here means "sized after warm-up" (CUDA)
    limits.validate();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

}  // namespace nanovllm::bench
