#include "launcher/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <cmath>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "launcher/cli_parse.h"
#include "launcher/gpu_probe.h"
#include "launcher/usage_error.h"

#ifndef NANOVLLM_VERSION
#define NANOVLLM_VERSION "unknown"
#endif

namespace nanovllm {
namespace {

// Checks that CLI11's Range cannot express (open intervals, multiples, cross-flag rules).
void validate(LaunchOptions& o, const std::string& device_flag, int visible_gpus,
              std::string& notice) {
  namespace fs = std::filesystem;
  if (o.block_size <= 0 || o.block_size % 16 != 0)
    throw UsageError("--block-size " + std::to_string(o.block_size) +
                     ": must be a positive multiple of 16 (the paged-attention kernels move "
                     "the KV cache in 16-token tiles, so a block must hold whole tiles)");
  if (!(o.gpu_memory_utilization > 0.0 && o.gpu_memory_utilization <= 1.0))
    throw UsageError("--gpu-memory-utilization " + std::to_string(o.gpu_memory_utilization) +
                     ": must be in (0, 1]");
  if (o.cpu_kv_cache_space_gib &&
      !(*o.cpu_kv_cache_space_gib > 0.0 && std::isfinite(*o.cpu_kv_cache_space_gib)))
    throw UsageError("--cpu-kv-cache-space " + std::to_string(*o.cpu_kv_cache_space_gib) +
                     ": must be a finite number of GiB, more than 0");
  if (o.sampling.top_p && !(*o.sampling.top_p > 0.0f && *o.sampling.top_p <= 1.0f))
    throw UsageError("--top-p " + std::to_string(*o.sampling.top_p) + ": must be in (0, 1]");
  if (o.sampling.top_k && *o.sampling.top_k < -1)
    throw UsageError("--top-k " + std::to_string(*o.sampling.top_k) +
                     ": must be -1 or 0 (off) or > 0");
  // Past a billion seconds the watchdog's millisecond clock would overflow; nobody means it.
  if (!(o.stall_timeout_s >= 0.0 && o.stall_timeout_s <= 1e9))
    throw UsageError("--stall-timeout " + std::to_string(o.stall_timeout_s) +
                     ": must be 0 (off) or a number of seconds up to 1e9");
  if (!(o.stall_log_interval_s > 0.0 && o.stall_log_interval_s <= 1e9))
    throw UsageError("--stall-log-interval " + std::to_string(o.stall_log_interval_s) +
                     ": must be more than 0 and at most 1e9 seconds");
  // The budget vs max_model_len rule (chunking off) needs the model's limit: run_settings.
  if (o.output && o.output->string() == "-") o.output.reset();
  if (o.resume && !o.output)
    throw UsageError(
        "--resume needs -o FILE: it skips the requests whose results that file "
        "already holds, which stdout cannot");

  if (device_flag.empty()) {
    o.device = visible_gpus > 0 ? Device::kCuda : Device::kCpu;
    if (visible_gpus == 0) notice = "no GPU visible; running on the CPU backend (--device cpu)";
  } else {
    o.device = device_flag == "cuda" ? Device::kCuda : Device::kCpu;
  }
  if (o.device == Device::kCuda && o.tensor_parallel_size > visible_gpus)
    throw UsageError("--tp " + std::to_string(o.tensor_parallel_size) + " on --device cuda needs " +
                     std::to_string(o.tensor_parallel_size) + " GPUs; " +
                     std::to_string(visible_gpus) + " visible");
  const int64_t gpus_needed = static_cast<int64_t>(o.data_parallel_size) * o.tensor_parallel_size;
  if (o.device == Device::kCuda && gpus_needed > visible_gpus)
    throw UsageError("--data-parallel-size " + std::to_string(o.data_parallel_size) + " x --tp " +
                     std::to_string(o.tensor_parallel_size) + " on --device cuda needs " +
                     std::to_string(gpus_needed) + " GPUs; " + std::to_string(visible_gpus) +
                     " visible (CUDA_VISIBLE_DEVICES)");

  std::error_code ec;
  if (!fs::exists(o.model, ec))
    throw UsageError("model folder '" + o.model.string() + "' does not exist");
  if (!fs::is_directory(o.model, ec))
    throw UsageError("model folder '" + o.model.string() + "' is not a directory");
  if (!fs::exists(o.prompts, ec))
    throw UsageError("prompts file '" + o.prompts.string() + "' does not exist");
  if (!fs::is_regular_file(o.prompts, ec))
    throw UsageError("prompts file '" + o.prompts.string() + "' is not a regular file");
  // Opening -o truncates (or, with --resume, rewrites) it: never the input under another name.
  if (o.output && fs::exists(*o.output, ec) && fs::equivalent(*o.output, o.prompts, ec))
    throw UsageError("-o '" + o.output->string() + "' is the prompts file '" + o.prompts.string() +
                     "' (the same file, a link to it or a hard link): writing results there "
                     "would destroy the input; choose another output file");
}

// "K/N" with 0 <= K < N.
RequestShard parse_shard(const std::string& text) {
  const auto bad = [&text](const std::string& why) {
    return UsageError("--shard '" + text + "': " + why +
                      " (K/N: this launcher answers the requests whose index is K mod N; "
                      "0 <= K < N)");
  };
  const size_t slash = text.find('/');
  if (slash == std::string::npos) throw bad("expected K/N");
  RequestShard shard;
  try {
    size_t used_k = 0, used_n = 0;
    shard.index = std::stoi(text.substr(0, slash), &used_k);
    shard.count = std::stoi(text.substr(slash + 1), &used_n);
    if (used_k != slash || used_n != text.size() - slash - 1) throw bad("expected K/N");
  } catch (const std::logic_error&) {  // stoi: not a number, out of range
    throw bad("expected two whole numbers K/N");
  }
  if (shard.count < 1 || shard.index < 0 || shard.index >= shard.count)
    throw bad("K must be in [0, N) and N at least 1");
  return shard;
}

// vLLM's single-dash spellings -tp N and -dp N, which CLI11 cannot declare.
std::vector<std::string> with_long_flags(int argc, const char* const* argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& a : args) {
    if (a == "-dp") a = "--data-parallel-size";
    if (a == "-tp") a = "--tensor-parallel-size";
  }
  return args;
}

// --hf-overrides and --rope-scaling as one object of config.json fields (UsageError naming the
// flag when either is not the JSON it must be).
nlohmann::json config_overrides(const std::string& hf_overrides, const std::string& rope_scaling) {
  const auto parse = [](const std::string& text, const char* flag) {
    try {
      return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw UsageError(std::string(flag) + ": not JSON: " + e.what());
    }
  };
  nlohmann::json out = nlohmann::json::object();
  if (!hf_overrides.empty()) {
    out = parse(hf_overrides, "--hf-overrides");
    if (!out.is_object())
      throw UsageError("--hf-overrides: expected a JSON object of config.json fields, got " +
                       out.dump());
  }
  if (!rope_scaling.empty()) {
    const nlohmann::json r = parse(rope_scaling, "--rope-scaling");
    if (!r.is_object())
      throw UsageError(
          "--rope-scaling: expected a JSON object such as {\"rope_type\": "
          "\"yarn\", \"factor\": 4.0, ...}, got " +
          r.dump());
    out["rope_scaling"] = r;
  }
  return out;
}

}  // namespace

LaunchParse parse_launch_options(int argc, const char* const* argv, int visible_gpus) {
  LaunchOptions o;
  std::string device_flag, output, log_level = "info";
  CLI::App app{
      "Offline LLM inference for Qwen3 models: reads prompts.jsonl, writes one JSON "
      "result line per request.",
      "nanovllm-launch"};
  app.set_version_flag("--version", std::string("nanovllm-launch ") + NANOVLLM_VERSION);
  const auto formatter = std::make_shared<HelpFormatter>();
  formatter->column_width(40);
  app.formatter(formatter);
  const auto positive = CLI::Range(1, INT_MAX);

  app.add_option("model", o.model, "Hugging Face model folder")->required();
  app.add_option("prompts", o.prompts, "prompts.jsonl: one request a line")->required();
  app.add_option("-o,--output", output, "results JSONL file (default: stdout)");
  app.add_option("--tp,--tensor-parallel-size", o.tensor_parallel_size,
                 "tensor-parallel ranks (one process each)")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--dp,--data-parallel-size", o.data_parallel_size,
                 "engine replicas (-dp), each of --tp ranks on its own GPUs; they take the "
                 "requests as they have room and write one results file")
      ->check(positive)
      ->capture_default_str();
  std::string shard;
  app.add_option("--shard", shard,
                 "K/N: answer only the requests whose index (non-blank lines from 0) is K mod "
                 "N; N launchers with K = 0 ... N-1 answer the whole file");
  app.add_option("--device", device_flag, "cuda (default when a GPU is visible) or cpu")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  // 2: one prompt token and one generated token; below it no request could run.
  app.add_option("--max-model-len", o.max_model_len,
                 "longest prompt + output in tokens (default 4096, capped by the model's "
                 "max_position_embeddings)")
      ->check(CLI::Range(2, INT_MAX));
  app.add_option("--max-num-seqs", o.max_num_seqs, "most sequences in one step")
      ->check(positive)
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", o.max_num_batched_tokens,
                 "most tokens computed in one step (prompt chunks and decodes together); "
                 "without chunked prefill at least --max-model-len")
      ->check(positive)
      ->capture_default_str();
  app.add_flag("--enable-chunked-prefill,!--no-enable-chunked-prefill", o.enable_chunked_prefill,
               std::string("split prompts longer than the step budget over several steps, "
                           "mixed with the running decodes (default: ") +
                   (o.enable_chunked_prefill ? "on" : "off") +
                   "); --no-enable-chunked-prefill: a prompt is prefilled in one step");
  app.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", o.enable_prefix_caching,
               std::string("reuse the KV blocks of prompt prefixes already computed (default: ") +
                   (o.enable_prefix_caching ? "on" : "off") +
                   "); --no-enable-prefix-caching: every prompt token is computed");
  app.add_flag("--async-scheduling,!--no-async-scheduling", o.async_scheduling,
               std::string("schedule and launch the next decode step while one runs, so the "
                           "GPU never waits for the host between steps (one GPU with CUDA "
                           "graphs; default: ") +
                   (o.async_scheduling ? "on" : "off") + ")");
  app.add_option("--long-prefill-token-threshold", o.long_prefill_token_threshold,
                 "with chunked prefill: most tokens of one prompt per step while other "
                 "sequences run or wait (0 = up to the whole budget)")
      ->check(CLI::Range(0, INT_MAX))
      ->capture_default_str();
  app.add_option("--gpu-memory-utilization", o.gpu_memory_utilization,
                 "share of GPU memory to use, in (0, 1]")
      ->capture_default_str();
  app.add_option("--block-size", o.block_size, "tokens per KV-cache block (multiple of 16)")
      ->capture_default_str();
  app.add_option("--num-gpu-blocks-override", o.num_gpu_blocks_override,
                 "KV-cache blocks to allocate instead of sizing from memory (CPU backend too)")
      ->check(positive);
  app.add_option("--cpu-kv-cache-space", o.cpu_kv_cache_space_gib,
                 "GiB of KV cache per rank on the CPU backend (default: what the request file "
                 "needs, min(--max-num-seqs, its completions) sequences of max_model_len, at "
                 "most 4 GiB and at least one sequence)");
  app.add_flag("--enforce-eager", o.enforce_eager, "no CUDA graphs");
  std::string kv_cache_dtype = "auto";
  app.add_option("--kv-cache-dtype", kv_cache_dtype,
                 "KV cache element: auto (the model's bf16), bfloat16, fp8 or fp8_e4m3 (half the "
                 "bytes a token), int8 (as many bytes as fp8, closer to bf16)")
      ->check(CLI::IsMember({"auto", "bfloat16", "fp8", "fp8_e4m3", "int8"}))
      ->capture_default_str();
  app.add_flag("--disable-custom-all-reduce", o.disable_custom_all_reduce,
               "--tp on GPUs: every all-reduce through NCCL, none through peer memory");
  app.add_flag("--disable-shard-sampling", o.disable_shard_sampling,
               "--tp: gather every step's logits to rank 0 instead of sampling from the "
               "vocabulary shards (same tokens; a comparison switch)");
  std::string hf_overrides, rope_scaling;
  app.add_option("--hf-overrides", hf_overrides,
                 "JSON object whose fields replace config.json's (vLLM's flag), e.g. "
                 "'{\"max_position_embeddings\": 40960}'");
  app.add_option("--rope-scaling", rope_scaling,
                 "JSON rope scaling, e.g. '{\"rope_type\": \"yarn\", \"factor\": 4.0, "
                 "\"original_max_position_embeddings\": 32768}' (YaRN: max_model_len up to "
                 "factor x original)");
  app.add_option("--temperature", o.sampling.temperature, "default temperature (0 = greedy)")
      ->check(CLI::Range(0.0f, 1e6f));
  app.add_option("--top-p", o.sampling.top_p, "default top-p, in (0, 1]");
  app.add_option("--top-k", o.sampling.top_k, "default top-k (-1 or 0 = off)");
  app.add_option("--min-p", o.sampling.min_p, "default min-p, in [0, 1]")
      ->check(CLI::Range(0.0f, 1.0f));
  app.add_option("--max-tokens", o.sampling.max_tokens, "default most generated tokens")
      ->check(positive);
  app.add_option("--seed", o.sampling.seed, "default sampling seed");
  bool ignore_eos = false;
  app.add_flag("--ignore-eos", ignore_eos, "default: keep generating past end-of-sequence");
  app.add_flag("--resume", o.resume, "skip requests already in the -o file");
  app.add_option("--stall-timeout", o.stall_timeout_s,
                 "end the run (exit 1) when a rank completes no step for this many seconds; "
                 "0 = off")
      ->capture_default_str();
  // Hidden (empty group): lets the tests see the stall log within seconds.
  app.add_option("--stall-log-interval", o.stall_log_interval_s,
                 "seconds between the log lines naming the ranks behind while a stall lasts")
      ->group("");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();

  LaunchParse result;
  if (const auto exit = run_cli_parse(app, "nanovllm-launch", [&] {
        std::vector<std::string> args = with_long_flags(argc, argv);
        std::reverse(args.begin() + 1, args.end());  // CLI11 takes them last to first
        args.erase(args.begin());
        app.parse(std::move(args));
        if (!shard.empty()) o.shard = parse_shard(shard);
        if (kv_cache_dtype == "fp8" || kv_cache_dtype == "fp8_e4m3")
          o.kv_cache_dtype = DType::kFp8E4M3;
        if (kv_cache_dtype == "int8") o.kv_cache_dtype = DType::kI8;
        if (!output.empty()) o.output = output;
        if (ignore_eos) o.sampling.ignore_eos = true;
        o.log_level = spdlog::level::from_str(log_level);
        o.hf_overrides = config_overrides(hf_overrides, rope_scaling);
        validate(o, device_flag, visible_gpus, result.notice);
      })) {
    result.exit_code = exit->exit_code;
    result.message = exit->message;
    return result;
  }
  result.options = std::move(o);
  return result;
}

LaunchParse parse_launch_options(int argc, const char* const* argv) {
  return parse_launch_options(argc, argv, visible_gpu_count());
}

}  // namespace nanovllm
