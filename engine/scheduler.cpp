#include "engine/scheduler.h"

#include <algorithm>
#include <cstdint>

#include "kernels/check.h"

namespace nanovllm {

int ScheduledBatch::num_tokens() const {
  int total = 0;
  for (const int n : num_scheduled_tokens) total += n;
  return total;
}

Scheduler::Scheduler(const EngineConfig& config, BlockManager& block_manager)
    : config_(config), block_manager_(block_manager) {
  config_.validate();
  CHECK_EQ(config_.num_kvcache_blocks, block_manager_.num_blocks());
  CHECK_EQ(config_.kvcache_block_size, block_manager_.block_size());
}

std::string Scheduler::rejection_reason(int num_prompt_tokens, const SamplingParams& params) const {
  const auto str = [](int64_t v) { return std::to_string(v); };
  if (num_prompt_tokens <= 0) return "prompt is empty";
  if (params.max_tokens < 1) return "max_tokens must be >= 1, got " + str(params.max_tokens);
  if (std::string room = prompt_room_error(num_prompt_tokens, config_.max_model_len); !room.empty())
    return room;
  if (!config_.enable_chunked_prefill && num_prompt_tokens > config_.max_num_batched_tokens)
    return "prompt has " + str(num_prompt_tokens) + " tokens, more than max_num_batched_tokens (" +
           str(config_.max_num_batched_tokens) + ")";
  // The most KV it can ever hold must fit the whole cache, or it would wait forever.
  const int64_t max_len = std::min<int64_t>(
      static_cast<int64_t>(num_prompt_tokens) + params.max_tokens, config_.max_model_len);
  const int64_t blocks = (max_len + config_.kvcache_block_size - 1) / config_.kvcache_block_size;
  if (blocks > config_.num_kvcache_blocks)
    return "needs up to " + str(blocks) + " KV blocks (" + str(max_len) +
           " tokens), more than the cache holds (num_kvcache_blocks " +
           str(config_.num_kvcache_blocks) + ")";
  return "";
}

void Scheduler::add(Sequence* seq) {
  CHECK(seq != nullptr);
  CHECK(seq->status == SequenceStatus::kWaiting);
  CHECK_MSG(rejection_reason(seq->num_prompt_tokens, seq->sampling_params).empty(),
            "inadmissible sequence " << seq->seq_id);
  waiting_.push_back(seq);
  if (seq->sampling_params.n > 1) siblings_[seq->request_id].push_back(seq);
}

const Sequence* Scheduler::running_sibling(const Sequence& seq) const {
  const auto it = siblings_.find(seq.request_id);
  if (it == siblings_.end()) return nullptr;
  for (const Sequence* s : it->second)
    if (s != &seq && !s->block_table.empty()) return s;
  return nullptr;
}

ScheduledBatch Scheduler::schedule() {
  ScheduledBatch batch;
  for (Sequence* seq : running_) seq->num_scheduled_tokens = 0;
  if (config_.enable_chunked_prefill) {
    schedule_chunked(batch);
  } else if (!schedule_prefill(batch)) {
    schedule_decode(batch);
  }
  return batch;
}

PrefixMatch Scheduler::admission_match(const Sequence& seq) const {
  // prompt_logprobs need every prompt row's logits: nothing from the cache or a sibling (its
  // own blocks are still registered for others).
  if (seq.owes_prompt_logprobs()) return block_manager_.match_prefix(seq, /*use_cache=*/false);
  const Sequence* sibling = running_sibling(seq);
  return sibling ? block_manager_.match_fork(seq, *sibling) : block_manager_.match_prefix(seq);
}

bool Scheduler::schedule_prefill(ScheduledBatch& batch) {
  int num_batched_tokens = 0;
  // Bounding running (not just this batch) by max_num_seqs keeps every admitted sequence in
  // the next decode batch; nano-vllm lets running grow past it and starves the overflow.
  while (!waiting_.empty() && static_cast<int>(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    const PrefixMatch match = admission_match(*seq);
    // Only uncached tokens cost compute.
    const int num_new_tokens = seq->num_tokens() - match.num_cached_tokens;
    if (num_batched_tokens + num_new_tokens > config_.max_num_batched_tokens ||
        !block_manager_.can_allocate(match))
      break;
    // With chunked prefill, a long prompt goes in chunks (scheduler_chunked.cpp).
    if (config_.enable_chunked_prefill && !fits_whole(num_new_tokens)) break;
    admit(*seq, match, num_new_tokens, batch);
    num_batched_tokens += num_new_tokens;
  }
  batch.is_prefill = !batch.empty();
  return batch.is_prefill;
}

void Scheduler::schedule_decode(ScheduledBatch& batch) {
  // One token per sequence, so the token budget bounds the batch too.
  const size_t limit =
      static_cast<size_t>(std::min(config_.max_num_seqs, config_.max_num_batched_tokens));
  while (!running_.empty() && batch.seqs.size() < limit) {
    Sequence* seq = running_.front();
    running_.pop_front();
    if (!make_room(*seq, seq->num_tokens(), running_, batch)) continue;
    block_manager_.may_append(*seq);
    add_row(batch, *seq, 1);
    ++batch.num_decode_tokens;
  }
  // Scheduled sequences go back to the front, in order, ahead of any not reached this step.
  running_.insert(running_.begin(), batch.seqs.begin(), batch.seqs.end());
  batch.is_prefill = false;
}

bool Scheduler::schedule_ahead(std::span<Sequence* const> seqs, ScheduledBatch& batch) {
  CHECK(batch.empty());
  int blocks_needed = 0;
  for (const Sequence* seq : seqs) {
    CHECK(seq->status == SequenceStatus::kRunning);
    CHECK_EQ(seq->num_pending_tokens, 1);
    // Decoding: every token but the pending one computed.
    CHECK_EQ(seq->num_computed_tokens, seq->num_tokens());
    // With the pending token, whose KV this step writes.
    blocks_needed +=
        block_manager_.blocks_to_grow(*seq, seq->num_tokens() + seq->num_pending_tokens);
  }
  if (blocks_needed > block_manager_.num_free_blocks()) return false;
  for (Sequence* seq : running_) seq->num_scheduled_tokens = 0;
  for (Sequence* seq : seqs) {
    block_manager_.grow(*seq, seq->num_tokens() + seq->num_pending_tokens);
    add_row(batch, *seq, 1);
    ++batch.num_decode_tokens;
  }
  batch.is_prefill = false;
  return true;
}

void Scheduler::add_row(ScheduledBatch& batch, Sequence& seq, int num_tokens) {
  batch.seqs.push_back(&seq);
  batch.num_scheduled_tokens.push_back(num_tokens);
  seq.num_scheduled_tokens = num_tokens;
}

void Scheduler::admit(Sequence& seq, const PrefixMatch& match, int num_new_tokens,
                      ScheduledBatch& batch) {
  CHECK(&seq == waiting_.front());
  block_manager_.allocate(seq, match, match.num_cached_tokens + num_new_tokens);
  if (seq.first_prefill_cached_tokens < 0) seq.first_prefill_cached_tokens = seq.num_cached_tokens;
  batch.num_cached_tokens += seq.num_cached_tokens;
  seq.status = SequenceStatus::kRunning;
  waiting_.pop_front();
  running_.push_back(&seq);
  add_row(batch, seq, num_new_tokens);
}

bool Scheduler::make_room(Sequence& seq, int num_tokens, std::deque<Sequence*>& others,
                          ScheduledBatch& batch) {
  while (!block_manager_.can_grow(seq, num_tokens)) {
    // Evict the most recently admitted sequence first (it has the least work done).
    Sequence* victim = others.empty() ? &seq : others.back();
    if (!others.empty()) others.pop_back();
    preempt(victim);
    batch.preempted.push_back(victim);
    if (victim == &seq) return false;
  }
  return true;
}

void Scheduler::preempt(Sequence* seq) {
  seq->status = SequenceStatus::kWaiting;
  seq->num_scheduled_tokens = 0;
  block_manager_.deallocate(*seq);
  waiting_.push_front(seq);
  ++seq->num_preemptions;
  ++num_preemptions_;
}

bool Scheduler::is_eos(int32_t token_id) const {
  return std::find(config_.eos_token_ids.begin(), config_.eos_token_ids.end(), token_id) !=
         config_.eos_token_ids.end();
}

FinishReason Scheduler::finish_reason_after(Sequence& seq, int32_t token) const {
  const SamplingParams& p = seq.sampling_params;
  const int num_generated = seq.num_completion_tokens();
  // Before min_tokens the sampler masks eos and stop ids; this guards the rule on the host.
  if (num_generated >= p.min_tokens) {
    if (!p.ignore_eos && is_eos(token)) return FinishReason::kStop;
    if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) !=
        p.stop_token_ids.end()) {
      seq.stop_token_id = token;
      return FinishReason::kStop;
    }
  }
  if (seq.stop_checker) {
    seq.stop_match = seq.stop_checker->append(token, /*search=*/num_generated > p.min_tokens);
    if (seq.stop_match) return FinishReason::kStop;
  }
  if (num_generated >= p.max_tokens || seq.num_tokens() >= config_.max_model_len)
    return FinishReason::kLength;
  return FinishReason::kNone;
}

std::vector<Sequence*> Scheduler::postprocess(std::span<Sequence* const> seqs,
                                              std::span<const int32_t> token_ids) {
  CHECK_EQ(seqs.size(), token_ids.size());
  std::vector<Sequence*> finished;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence* seq = seqs[i];
    CHECK(seq->status == SequenceStatus::kRunning);
    const int32_t token = token_ids[i];
    seq->append_token(token);
    const FinishReason reason = finish_reason_after(*seq, token);
    if (reason == FinishReason::kNone) continue;
    seq->finish_reason = reason;
    seq->status = SequenceStatus::kFinished;
    block_manager_.deallocate(*seq);
    const auto it = std::find(running_.begin(), running_.end(), seq);
    CHECK(it != running_.end());
    running_.erase(it);
    if (const auto group = siblings_.find(seq->request_id); group != siblings_.end()) {
      std::erase(group->second, seq);
      if (group->second.empty()) siblings_.erase(group);
    }
    finished.push_back(seq);
  }
  return finished;
}

}  // namespace nanovllm
