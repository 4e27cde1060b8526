#include "engine/llm_engine.h"

#include <spdlog/spdlog.h>

#include <stdexcept>

#include "engine/in_flight_step.h"
#include "engine/step_builder.h"
#include "kernels/check.h"

namespace nanovllm {

const EngineConfig& LLMEngine::validated(const EngineConfig& config) {
  config.validate();
  if (config.num_kvcache_blocks <= 0)
    throw std::invalid_argument(
        "num_kvcache_blocks must be set (> 0) before the engine starts, got " +
        std::to_string(config.num_kvcache_blocks));
  return config;
}

LLMEngine::LLMEngine(const EngineConfig& config, StepExecutor& executor, BlockHashFn hash_fn)
    : config_(validated(config)),
      executor_(executor),
      block_manager_(config_.num_kvcache_blocks, config_.kvcache_block_size, std::move(hash_fn),
                     config_.enable_prefix_caching),
      scheduler_(config_, block_manager_),
      sampling_slots_(config_.max_num_seqs) {}

LLMEngine::LLMEngine(const EngineConfig& config, StepExecutor& executor, const Tokenizer* tokenizer,
                     BlockHashFn hash_fn)
    : LLMEngine(config, executor, std::move(hash_fn)) {
  tokenizer_ = tokenizer;
}

// A sequence that stops running gives its slot back; its next prefill (a recompute after
// preemption) takes one again and sends its parameters again.
void LLMEngine::release_sampling_slot(Sequence& seq) {
  CHECK_MSG(seq.sampling_slot >= 0, "seq " << seq.seq_id << " stops running without a slot");
  sampling_slots_.release(seq.sampling_slot);
  seq.sampling_slot = -1;
}

AddRequestResult LLMEngine::add_request(std::vector<int32_t> prompt_token_ids,
                                        SamplingParams params, std::string user_tag) {
  AddRequestResult result;
  result.error = scheduler_.rejection_reason(static_cast<int>(prompt_token_ids.size()), params);
  if (result.error.empty() && !params.stop.empty() && tokenizer_ == nullptr)
    result.error = "stop strings need a tokenizer, and this engine has none";
  if (result.error.empty() && params.n < 1)
    result.error = "n must be >= 1, got " + std::to_string(params.n);
  if (!result.error.empty()) {
    ++stats_.num_rejected;
    spdlog::debug("rejected request {}: {}", user_tag, result.error);
    return result;
  }
  const int64_t request_id = next_seq_id_;
  const uint64_t seed = params.seed ? *params.seed : default_sequence_seed(request_id);
  const int n = params.n;
  for (int32_t i = 0; i < n; ++i) {
    SamplingParams p = params;
    p.seed = completion_seed(seed, i);
    auto seq = std::make_unique<Sequence>(next_seq_id_++, prompt_token_ids, std::move(p),
                                          config_.kvcache_block_size);
    seq->request_id = request_id;
    seq->completion_index = i;
    if (!seq->sampling_params.stop.empty())
      seq->stop_checker = std::make_unique<StopChecker>(*tokenizer_, seq->sampling_params);
    scheduler_.add(seq.get());
    sequences_.emplace(seq->seq_id, std::move(seq));
  }
  user_tags_.emplace(request_id, RequestTag{std::move(user_tag), n});
  result.seq_id = request_id;
  return result;
}

std::optional<std::string> LLMEngine::completion_text(const Sequence& seq) const {
  if (tokenizer_ == nullptr) return std::nullopt;
  if (seq.stop_match) return seq.stop_checker->text_until(*seq.stop_match);
  std::span<const int32_t> ids = seq.completion_token_ids();
  // The eos / stop token that ended it: a special one adds no text (vLLM drops it).
  const SamplingParams& p = seq.sampling_params;
  if (seq.finish_reason == FinishReason::kStop && !ids.empty() && !p.include_stop_str_in_output &&
      tokenizer_->is_special(ids.back()))
    ids = ids.first(ids.size() - 1);
  return tokenizer_->decode(ids, p.skip_special_tokens);
}

RequestOutput LLMEngine::output_of(Sequence& seq) {
  RequestOutput out;
  out.seq_id = seq.seq_id;
  out.request_id = seq.request_id;
  out.index = seq.completion_index;
  out.num_completions = seq.sampling_params.n;
  if (auto tag = user_tags_.find(seq.request_id); tag != user_tags_.end()) {
    if (--tag->second.num_unfinished == 0) {
      out.user_tag = std::move(tag->second.user_tag);
      user_tags_.erase(tag);
    } else {
      out.user_tag = tag->second.user_tag;
    }
  }
  out.text = completion_text(seq);
  if (seq.stop_match) out.stop_string = seq.stop_checker->stop_string(*seq.stop_match);
  out.stop_token_id = seq.stop_token_id;
  const auto completion = seq.completion_token_ids();
  out.completion_token_ids.assign(completion.begin(), completion.end());
  seq.token_ids.resize(seq.num_prompt_tokens);
  out.prompt_token_ids = std::move(seq.token_ids);
  out.finish_reason = seq.finish_reason;
  out.num_cached_tokens = seq.first_prefill_cached_tokens;
  out.num_preemptions = seq.num_preemptions;
  if (seq.sampling_params.logprobs) {
    out.logprobs = std::move(seq.logprobs);
    out.cumulative_logprob = seq.cumulative_logprob;
  }
  if (seq.sampling_params.prompt_logprobs && seq.completion_index == 0)
    out.prompt_logprobs = std::move(seq.prompt_logprobs);
  return out;
}

void LLMEngine::stop_workers() {
  StepCommand exit;
  exit.kind = StepKind::kExit;
  exit.step_id = next_step_id_++;
  executor_.execute(exit);
}

}  // namespace nanovllm
