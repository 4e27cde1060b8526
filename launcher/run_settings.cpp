#include "launcher/run_settings.h"

#include <sched.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

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
  try {
    e.validate();
  } catch (const std::invalid_argument& err) {
    throw UsageError(err.what());
  }
  return e;
}

}  // namespace

RunSettings make_run_settings(const LaunchOptions& o) {
  RunSettings s;
  s.model_dir = o.model;
  s.tp_size = o.tensor_parallel_size;
  s.device = o.device;
  s.cpu_threads = std::max(1, available_cpus() / s.tp_size);
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
  job.vocab_size = static_cast<int32_t>(s.model.vocab_size);
  job.engine = engine_config(o, s.model);

  KvCacheSizing sizing;
  sizing.num_blocks_override = o.num_gpu_blocks_override;
  sizing.cpu_kv_cache_space_gib = o.cpu_kv_cache_space_gib;
  sizing.block_size = o.block_size;
  sizing.tp_size = s.tp_size;
  job.engine.num_kvcache_blocks = plan_kv_cache_blocks(sizing, s.model, s.device);
  if (job.engine.num_kvcache_blocks > 0) {  // known now (CPU, or forced): refuse before loading
    const std::string shortfall = kv_cache_shortfall(
        job.engine.num_kvcache_blocks, job.engine.kvcache_block_size, job.engine.max_model_len);
    if (!shortfall.empty()) throw UsageError(shortfall);
  }
  s.gpu_memory_utilization = o.gpu_memory_utilization;
  s.enforce_eager = o.enforce_eager;

  job.cli_sampling = o.sampling;
  job.cli_sampling.seed.reset();  // not a shared seed: the base of each request's derived seed
  job.seed = o.sampling.seed.value_or(0);
  const EngineConfig& e = job.engine;
  spdlog::info(
      "model {} ({} layers, hidden {}), --tp {}, device {}, max_model_len {}, "
      "{} tokens per step, chunked prefill {} (long prefill threshold {}), "
      "{} KV blocks of {} tokens (0: sized after warm-up), {} CPU threads per rank",
      s.model_dir.string(), s.model.num_hidden_layers, s.model.hidden_size, s.tp_size,
      s.device == Device::kCpu ? "cpu" : "cuda", e.max_model_len, e.max_num_batched_tokens,
      e.enable_chunked_prefill ? "on" : "off", e.long_prefill_token_threshold, e.num_kvcache_blocks,
      e.kvcache_block_size, s.cpu_threads);
  return s;
}

}  // namespace nanovllm
