#include "engine/llm_engine.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <stdexcept>

#include "engine/shard_sampling_plan.h"
#include "engine/step_builder.h"
#include "kernels/check.h"

namespace nanovllm {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Row `row` of a step's logprobs, for `token` with `num_top` alternatives.
PositionLogprobs position_logprobs(const LogprobRows& rows, size_t row, int32_t token,
                                   int32_t num_top) {
  CHECK_LT(row, rows.num_rows());
  CHECK_LE(num_top, rows.width);
  PositionLogprobs p;
  p.token_id = token;
  p.logprob = rows.logprob[row];
  p.rank = rows.rank[row];
  const size_t first = row * static_cast<size_t>(rows.width);
  for (int32_t j = 0; j < num_top; ++j)
    p.top.emplace_back(rows.top_ids[first + j], rows.top_logprobs[first + j]);
  return p;
}

}  // namespace

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

std::vector<RequestOutput> LLMEngine::step() {
  std::vector<RequestOutput> outputs;
  if (scheduler_.is_finished()) return outputs;

  auto start = std::chrono::steady_clock::now();
  const int64_t preemptions_before = scheduler_.num_preemptions();
  ScheduledBatch batch = scheduler_.schedule();
  // Every admitted request fits the cache alone, so some sequence can always run.
  CHECK_MSG(!batch.empty(), "scheduler produced an empty batch with "
                                << scheduler_.waiting().size() << " waiting and "
                                << scheduler_.running().size() << " running");
  // A prompt preempted between chunks has not sampled yet: it holds no slot.
  for (Sequence* seq : batch.preempted)
    if (seq->sampling_slot >= 0) release_sampling_slot(*seq);

  StepCommand cmd = batch.is_prefill ? build_prefill_command(batch.seqs, batch.num_scheduled_tokens,
                                                             config_.kvcache_block_size,
                                                             sampling_slots_, config_.eos_token_ids)
                                     : build_decode_command(batch.seqs, config_.kvcache_block_size);
  cmd.step_id = next_step_id_++;
  cmd.sample_from_shards =
      !cmd.logits_indices.empty() && step_samples_from_shards(batch.seqs, config_);
  stats_.scheduler_seconds += seconds_since(start);

  start = std::chrono::steady_clock::now();
  const StepResult result = executor_.execute(cmd);
  const std::vector<int32_t>& tokens = result.sampled_token_ids;
  stats_.executor_seconds += seconds_since(start);

  start = std::chrono::steady_clock::now();
  // The rows that reached their sequence's end sampled its next token (a chunk short of a
  // prompt's end samples nothing). Prompt logprobs rows come in the builder's order.
  std::vector<Sequence*> sampled;
  size_t prompt_row = 0;
  CHECK_EQ(result.prompt_logprobs.num_rows(), cmd.prompt_logprobs_indices.size());
  for (size_t b = 0; b < batch.seqs.size(); ++b) {
    Sequence* seq = batch.seqs[b];
    const int begin = seq->num_computed_tokens;
    seq->num_computed_tokens += batch.num_scheduled_tokens[b];
    const PositionRange owed = prompt_logprobs_rows(*seq, begin, seq->num_computed_tokens);
    for (int t = owed.begin; t < owed.end; ++t)
      seq->prompt_logprobs.push_back(position_logprobs(result.prompt_logprobs, prompt_row++,
                                                       seq->token_ids[t + 1],
                                                       *seq->sampling_params.prompt_logprobs));
    if (seq->num_computed_tokens == seq->num_tokens()) sampled.push_back(seq);
  }
  CHECK_EQ(prompt_row, result.prompt_logprobs.num_rows());
  CHECK_EQ(tokens.size(), sampled.size());
  for (size_t i = 0; i < sampled.size(); ++i) {
    Sequence& seq = *sampled[i];
    if (!seq.sampling_params.logprobs) continue;
    seq.logprobs.push_back(
        position_logprobs(result.sampled_logprobs, i, tokens[i], *seq.sampling_params.logprobs));
    seq.cumulative_logprob += seq.logprobs.back().logprob;
  }
  ++stats_.num_steps;
  if (!cmd.logits_indices.empty()) ++stats_.num_sampling_steps;
  if (cmd.sample_from_shards) ++stats_.num_shard_sampled_steps;
  stats_.num_preemptions += scheduler_.num_preemptions() - preemptions_before;
  ++(batch.is_prefill ? stats_.num_prefill_steps : stats_.num_decode_steps);
  stats_.num_prefill_tokens += batch.num_tokens() - batch.num_decode_tokens;
  stats_.num_decode_tokens += batch.num_decode_tokens;
  stats_.num_cached_tokens += batch.num_cached_tokens;
  const std::vector<Sequence*> finished = scheduler_.postprocess(sampled, tokens);
  for (Sequence* seq : finished) {
    release_sampling_slot(*seq);
    outputs.push_back(output_of(*seq));
    CHECK_EQ(sequences_.erase(seq->seq_id), 1u);  // frees the Sequence
  }
  stats_.num_finished += static_cast<int64_t>(finished.size());
  stats_.scheduler_seconds += seconds_since(start);
  return outputs;
}

}  // namespace nanovllm
