#include "engine/engine_config.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "engine/sampling_params.h"
#include "ipc/step_command.h"

namespace nanovllm {

namespace {

void require_positive(const char* name, int value) {
  if (value <= 0)
    throw std::invalid_argument(std::string(name) + " must be > 0, got " + std::to_string(value));
}

}  // namespace

void EngineConfig::cap_max_model_len(int max_position_embeddings) {
  if (max_position_embeddings > 0) max_model_len = std::min(max_model_len, max_position_embeddings);
}

void EngineConfig::validate() const {
  require_positive("max_num_batched_tokens", max_num_batched_tokens);
  require_positive("max_num_seqs", max_num_seqs);
  require_positive("max_model_len", max_model_len);
  require_positive("kvcache_block_size", kvcache_block_size);
  if (num_kvcache_blocks != -1) require_positive("num_kvcache_blocks", num_kvcache_blocks);
  // Without chunked prefill a prompt (or a preempted sequence) of max_model_len tokens must
  // fit in one step's budget, or it could never be scheduled.
  if (!enable_chunked_prefill && max_num_batched_tokens < max_model_len)
    throw std::invalid_argument("max_num_batched_tokens (" +
                                std::to_string(max_num_batched_tokens) +
                                ") must be >= max_model_len (" + std::to_string(max_model_len) +
                                ") without chunked prefill (--no-enable-chunked-prefill)");
  if (long_prefill_token_threshold < 0)
    throw std::invalid_argument("long_prefill_token_threshold must be >= 0, got " +
                                std::to_string(long_prefill_token_threshold));
  // A decode step has one token per running sequence: with fewer tokens per step than
  // sequences admitted, the sequences beyond the budget hold their KV and starve (vLLM
  // refuses this too).
  if (max_num_batched_tokens < max_num_seqs)
    throw std::invalid_argument("max_num_batched_tokens (" +
                                std::to_string(max_num_batched_tokens) +
                                ") must be >= max_num_seqs (" + std::to_string(max_num_seqs) +
                                "): a decode step has one token per running sequence");
  for (const int32_t id : eos_token_ids)
    if (id < 0)
      throw std::invalid_argument("eos_token_ids must be >= 0, got " + std::to_string(id));
  // min_tokens masks eos and a request's stop_token_ids in one fixed-width row per slot.
  constexpr int kMaxEosTokenIds = kMaxMinTokensMaskedIds - kMaxStopTokenIds;
  if (static_cast<int>(eos_token_ids.size()) > kMaxEosTokenIds)
    throw std::invalid_argument("the model names " + std::to_string(eos_token_ids.size()) +
                                " eos token ids, more than the " + std::to_string(kMaxEosTokenIds) +
                                " supported");
}

}  // namespace nanovllm
