#include "launcher/run_settings.h"

#include <fmt/format.h>
#include <sched.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>

#include "ipc/step_limits.h"
#include "launcher/kv_cache_report.h"
#include "launcher/usage_error.h"
#include "layers/tensor_parallel_shape.h"
#include "rank/kv_cache_sizing.h"

namespace nanovllm {

namespace {

constexpr int kDefaultMaxModelLen = 4096;  // nano-vllm's default, capped by the model's limit

int available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// NVLink SHARP multicast reserves GPU memory per communicator and gains nothing at decode's
// message sizes (a few hundred KB); it stays off unless the user turned it on.
void use_nccl_defaults() {
  if (std::getenv("NCCL_NVLS_ENABLE") == nullptr) {
    ::setenv("NCCL_NVLS_ENABLE", "0", 1);
    spdlog::info("NCCL_NVLS_ENABLE=0 (NVLink multicast off; set NCCL_NVLS_ENABLE=1 to use it)");
  } else {
    spdlog::info("NCCL_NVLS_ENABLE={} (from the environment)", std::getenv("NCCL_NVLS_ENABLE"));
  }
}

EngineConfig engine_config(const LaunchOptions& o, const ModelConfig& model) {
  EngineConfig e;
  e.max_num_batched_tokens = o.max_num_batched_tokens;
  e.max_num_seqs = o.max_num_seqs;
  e.max_model_len = o.max_model_len.value_or(kDefaultMaxModelLen);
  // A default above the model's limit is lowered to it; a --max-model-len above it is an
  // error (vLLM's rule): past it the model was never trained, and YaRN is how to go further.
  const int64_t limit = model.max_context_len();
  if (o.max_model_len && limit > 0 && *o.max_model_len > limit)
    throw UsageError(
        "--max-model-len " + std::to_string(*o.max_model_len) + " exceeds the model's " +
        std::to_string(limit) +
        (model.rope_scaling
             ? " (rope_scaling: original_max_position_embeddings x factor)"
             : " (max_position_embeddings in config.json; YaRN rope scaling raises it, e.g. "
               "--rope-scaling '{\"rope_type\": \"yarn\", \"factor\": 4.0, "
               "\"original_max_position_embeddings\": 32768}')"));
  e.cap_max_model_len(static_cast<int>(limit));
  e.kvcache_block_size = o.block_size;
  e.eos_token_ids = model.eos_token_ids;
  e.enable_chunked_prefill = o.enable_chunked_prefill;
  e.long_prefill_token_threshold = o.long_prefill_token_threshold;
  e.enable_prefix_caching = o.enable_prefix_caching;
  e.async_scheduling = o.async_scheduling;
  // EngineConfig::validate's rule, in the flags' words: only without chunking must one step
  // hold a whole max_model_len prompt (checked after the cap by the model's limit).
  if (!e.enable_chunked_prefill && e.max_num_batched_tokens < e.max_model_len)
    throw UsageError(
        "--max-num-batched-tokens " + std::to_string(e.max_num_batched_tokens) +
        " is less than max_model_len " + std::to_string(e.max_model_len) +
        (o.max_model_len ? " (--max-model-len)" : " (the default --max-model-len)") +
        ": with --no-enable-chunked-prefill a prompt is prefilled in one step, so the step "
        "budget must hold max_model_len tokens; raise --max-num-batched-tokens to " +
        std::to_string(e.max_model_len) + ", lower --max-model-len, or leave chunked prefill on");
  // EngineConfig::validate's other cross-flag rule, in the flags' words.
  if (e.max_num_batched_tokens < e.max_num_seqs)
    throw UsageError("--max-num-batched-tokens " + std::to_string(e.max_num_batched_tokens) +
                     " is less than --max-num-seqs " + std::to_string(e.max_num_seqs) +
                     (o.max_num_seqs == LaunchOptions{}.max_num_seqs ? " (the default)" : "") +
                     ": a decode step has one token per running sequence; raise "
                     "--max-num-batched-tokens to " +
                     std::to_string(e.max_num_seqs) + " or lower --max-num-seqs");
  try {
    e.validate();
  } catch (const std::invalid_argument& err) {
    throw UsageError(err.what());
  }
  return e;
}

}  // namespace

int count_request_sequences(const std::filesystem::path& prompts, int limit,
                            const RequestShard& shard) {
  std::ifstream in(prompts, std::ios::binary);
  if (!in) return limit;
  int64_t count = 0;
  int64_t index = 0;  // of the non-blank line, for the shard
  for (std::string line; count < limit && std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r\n\f\v") == std::string::npos) continue;
    if (!shard.holds(index++)) continue;
    int64_t n = 1;
    if (line.find("\"n\"") != std::string::npos) {
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      const nlohmann::json* holder = &j;
      if (j.is_object() && j.contains("body") && j["body"].is_object()) holder = &j["body"];
      if (holder->is_object() && holder->contains("n") && (*holder)["n"].is_number_integer())
        n = std::max<int64_t>(1, (*holder)["n"].get<int64_t>());
    }
    count += n;
  }
  return static_cast<int>(std::min<int64_t>(count, limit));
}

void check_cuda_step_tokens(const EngineConfig& e) {
  const int64_t tokens = max_step_tokens(
      {e.max_num_batched_tokens, e.max_num_seqs, e.max_model_len, e.kvcache_block_size});
  if (tokens <= kMaxCudaStepTokens) return;
  std::string fix = fmt::format("lower --max-num-batched-tokens to {}", kMaxCudaStepTokens);
  if (!e.enable_chunked_prefill && e.max_model_len > kMaxCudaStepTokens)
    fix = fmt::format(
        "leave chunked prefill on (--no-enable-chunked-prefill makes one step hold a whole "
        "max_model_len {} prompt) and keep --max-num-batched-tokens at most {}",
        e.max_model_len, kMaxCudaStepTokens);
  throw UsageError(fmt::format(
      "--max-num-batched-tokens {}: a step on CUDA carries at most {} tokens (its kernels put "
      "a step's tokens on one grid dimension), and one here could carry {} ({} sequences of "
      "up to {} tokens); {}",
      e.max_num_batched_tokens, kMaxCudaStepTokens, tokens, e.max_num_seqs, e.max_model_len, fix));
}

RunSettings make_run_settings(const LaunchOptions& o) {
  RunSettings s;
  s.model_dir = o.model;
  s.tp_size = o.tensor_parallel_size;
  s.device = o.device;
  s.replicas = o.data_parallel_size;
  s.cpu_threads = std::max(1, available_cpus() / (s.tp_size * s.replicas));
  s.model = load_model_config(s.model_dir, &o.hf_overrides);
  try {
    check_tensor_parallel_shape(s.model, s.tp_size);
  } catch (const std::invalid_argument& err) {
    throw UsageError(std::string("--tp ") + std::to_string(s.tp_size) + ": " + err.what());
  }
  if (s.device == Device::kCuda && s.tp_size > 1) use_nccl_defaults();

  JobSettings& job = s.job;
  job.model_dir = o.model;
  job.prompts = o.prompts;
  job.output = o.output;
  job.resume = o.resume;
  job.shard = o.shard;
  job.vocab_size = static_cast<int32_t>(s.model.vocab_size);
  job.engine = engine_config(o, s.model);

  // No more sequences ever run than the file's completions: a larger max_num_seqs only costs
  // memory (sampling slots, ring slots, the CUDA warm-up's rows and graphs). Replicas share
  // them out: each gets room for its part (they take requests as they have room).
  const int flag_max_num_seqs = job.engine.max_num_seqs;
  int64_t count = 0;  // the sequences the requests ask for (up to the replicas' room)
  if (!o.prompts.empty()) {
    const int64_t limit = static_cast<int64_t>(flag_max_num_seqs) * s.replicas;
    count = count_request_sequences(o.prompts, static_cast<int>(std::min<int64_t>(limit, INT_MAX)),
                                    o.shard);
    job.engine.max_num_seqs = static_cast<int>(
        std::clamp<int64_t>((count + s.replicas - 1) / s.replicas, 1, flag_max_num_seqs));
  }
  if (s.device == Device::kCuda) check_cuda_step_tokens(job.engine);

  KvCacheSizing sizing;
  sizing.num_blocks_override = o.num_gpu_blocks_override;
  sizing.cpu_kv_cache_space_gib = o.cpu_kv_cache_space_gib;
  sizing.block_size = o.block_size;
  sizing.tp_size = s.tp_size;
  sizing.sequences = job.engine.max_num_seqs;
  sizing.max_model_len = job.engine.max_model_len;
  sizing.kv_dtype = o.kv_cache_dtype;
  s.kv_cache_dtype = o.kv_cache_dtype;
  try {
    job.engine.num_kvcache_blocks = plan_kv_cache_blocks(sizing, s.model, s.device);
  } catch (const std::runtime_error& err) {  // --cpu-kv-cache-space holds not one block
    throw UsageError(err.what());
  }
  check_kv_cache_fits(sizing, s.model, s.device, job.engine.num_kvcache_blocks,
                      job.engine.max_num_seqs);
  if (job.engine.num_kvcache_blocks > 0) {  // known now (CPU, or forced): refuse before loading
    const std::string shortfall = kv_cache_shortfall(
        job.engine.num_kvcache_blocks, job.engine.kvcache_block_size, job.engine.max_model_len);
    if (!shortfall.empty()) throw UsageError(shortfall);
  }
  s.gpu_memory_utilization = o.gpu_memory_utilization;
  s.enforce_eager = o.enforce_eager;
  s.custom_all_reduce = !o.disable_custom_all_reduce;
  job.engine.shard_sampling_ranks = o.disable_shard_sampling ? 1 : s.tp_size;
  job.engine.vocab_size = s.model.vocab_size;

  job.cli_sampling = o.sampling;
  job.cli_sampling.seed.reset();  // not a shared seed: the base of each request's derived seed
  job.seed = o.sampling.seed.value_or(0);
  const EngineConfig& e = job.engine;
  const std::string seqs =
      e.max_num_seqs == flag_max_num_seqs
          ? std::to_string(e.max_num_seqs)
          : fmt::format(
                "{} (--max-num-seqs {}, lowered to the {} sequence(s) the requests ask "
                "for{})",
                e.max_num_seqs, flag_max_num_seqs, count,
                s.replicas > 1 ? fmt::format(", over {} replicas", s.replicas) : "");
  spdlog::info(
      "model {} ({} layers, hidden {}), --tp {}, --data-parallel-size {}, device {}, "
      "max_model_len {}, max_num_seqs {}{}, "
      "{} tokens per step, chunked prefill {} (long prefill threshold {}), prefix caching {}, "
      "async scheduling {}, {} CPU threads per rank",
      s.model_dir.string(), s.model.num_hidden_layers, s.model.hidden_size, s.tp_size, s.replicas,
      s.device == Device::kCpu ? "cpu" : "cuda", e.max_model_len, seqs,
      s.replicas > 1 ? " per replica" : "", e.max_num_batched_tokens,
      e.enable_chunked_prefill ? "on" : "off", e.long_prefill_token_threshold,
      e.enable_prefix_caching ? "on" : "off", e.async_scheduling ? "on" : "off", s.cpu_threads);
  spdlog::info("{}", kv_cache_line(sizing, s.model, s.device, e.num_kvcache_blocks));
  return s;
}

}  // namespace nanovllm
