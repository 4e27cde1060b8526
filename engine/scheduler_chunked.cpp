// Chunked prefill (vLLM V1's scheduling on nano-vllm's block manager): a step is a budget of
// max_num_batched_tokens. Running sequences come first, decodes before chunks, in the order
// they were admitted; then waiting sequences are admitted with a first chunk while budget,
// blocks and max_num_seqs allow. A prompt longer than what is left takes several steps; each
// chunk's full blocks are hashed as it computes them, so the prefix cache never serves a
// block before its KV exists.
#include <algorithm>
#include <deque>
#include <vector>

#include "engine/scheduler.h"
#include "kernels/check.h"

namespace nanovllm {

namespace {

// A running sequence that samples its next token from one computed token (it has sampled
// before, so it holds a sampling slot): a decode-command row. A prompt's last single token
// is a prefill row.
bool is_decoding(const Sequence& seq) {
  return seq.num_tokens() - seq.num_computed_tokens == 1 && seq.sampling_slot >= 0;
}

}  // namespace

int Scheduler::chunk_size(int remaining, int budget) const {
  int n = std::min(remaining, budget);
  // One long prompt takes at most the threshold per step, so it cannot hold the decodes
  // (or the other prompts) for a whole budget's worth of prefill; alone it holds nobody.
  if (remaining > 1 && config_.long_prefill_token_threshold > 0 && !lone_sequence_)
    n = std::min(n, config_.long_prefill_token_threshold);
  return n;
}

bool Scheduler::fits_whole(int num_new_tokens) const {
  const int threshold = config_.long_prefill_token_threshold;
  return num_new_tokens <= config_.max_num_batched_tokens &&
         (threshold == 0 || lone_sequence_ || num_new_tokens <= threshold);
}

void Scheduler::schedule_chunked(ScheduledBatch& batch) {
  // A prompt that fits a step whole (and is not over the long-prefill threshold) is
  // prefilled in a pure step first, as nano-vllm does: the decodes wait one step of at most
  // a budget's worth of short prompts, and throughput is that of unchunked scheduling. Only
  // long prompts are chunked, decode-first, so they never hold the decodes for long.
  // A lone sequence (one long prompt, nothing decoding or waiting) takes the whole budget:
  // on 4 H100s the 8B shape's 32k-token prompt took 0.977x the time at tp 1 and 0.956x at
  // tp 4 in chunks of 16,384 rather than 4,096 (bench/results/h100x4-2026-11-28-issue31_
  // lone_prompt_chunks.txt).
  lone_sequence_ = running_.size() + waiting_.size() == 1;
  bool mid_prefill = false;
  for (const Sequence* seq : running_) mid_prefill |= !is_decoding(*seq);
  if (!mid_prefill && !waiting_.empty() &&
      fits_whole(waiting_.front()->num_tokens() -
                 admission_match(*waiting_.front()).num_cached_tokens) &&
      schedule_prefill(batch)) {
    last_step_had_chunks_ = true;
    return;
  }
  int budget = config_.max_num_batched_tokens;
  bool take_decodes = true, take_chunks = true;
  if (!config_.mixed_chunked_steps) {
    // Alternating pure steps: while both kinds are pending, a chunk step follows a decode
    // step and the other way round; decode steps keep their CUDA graphs.
    bool has_decodes = false, has_chunks = false;
    for (const Sequence* seq : running_) {
      has_decodes |= is_decoding(*seq);
      has_chunks |= !is_decoding(*seq);
    }
    has_chunks |= !waiting_.empty() && static_cast<int>(running_.size()) < config_.max_num_seqs;
    if (has_decodes && has_chunks) {
      take_chunks = !last_step_had_chunks_;
      take_decodes = last_step_had_chunks_;
    }
  }
  schedule_running_chunked(batch, take_decodes, take_chunks, budget);
  if (take_chunks) admit_chunked(batch, budget);
  // The kind whose turn it is could not run (no block for an admission): the other one.
  if (batch.empty() && !(take_decodes && take_chunks)) {
    schedule_running_chunked(batch, true, true, budget);
    admit_chunked(batch, budget);
  }
  batch.is_prefill = static_cast<int>(batch.seqs.size()) != batch.num_decode_tokens;
  last_step_had_chunks_ = batch.is_prefill;
}

void Scheduler::schedule_running_chunked(ScheduledBatch& batch, bool take_decodes, bool take_chunks,
                                         int& budget) {
  // Decodes first, then prefilling sequences, each group in admission order.
  std::deque<Sequence*> queue;
  for (Sequence* seq : running_)
    if (is_decoding(*seq)) queue.push_back(seq);
  for (Sequence* seq : running_)
    if (!is_decoding(*seq)) queue.push_back(seq);
  running_.clear();
  std::vector<Sequence*> waiting_turn;  // running, but not in this step
  while (!queue.empty()) {
    Sequence* seq = queue.front();
    queue.pop_front();
    const int remaining = seq->num_tokens() - seq->num_computed_tokens;
    CHECK_GE(remaining, 1);
    const bool decoding = is_decoding(*seq);
    if (budget == 0 || (decoding ? !take_decodes : !take_chunks)) {
      waiting_turn.push_back(seq);
      continue;
    }
    const int n = chunk_size(remaining, budget);
    const int end = seq->num_computed_tokens + n;
    if (!make_room(*seq, end, queue, batch)) continue;  // victims: those not yet scheduled
    block_manager_.grow(*seq, end);
    add_row(batch, *seq, n);
    batch.num_decode_tokens += decoding ? 1 : 0;
    budget -= n;
  }
  // Scheduled ones first, in order, then those left for a later step.
  running_.insert(running_.end(), batch.seqs.begin(), batch.seqs.end());
  running_.insert(running_.end(), waiting_turn.begin(), waiting_turn.end());
}

void Scheduler::admit_chunked(ScheduledBatch& batch, int& budget) {
  while (budget > 0 && !waiting_.empty() &&
         static_cast<int>(running_.size()) < config_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    const PrefixMatch match = admission_match(*seq);
    const int n = chunk_size(seq->num_tokens() - match.num_cached_tokens, budget);
    const int end = match.num_cached_tokens + n;
    if (!block_manager_.can_allocate(*seq, match, end)) break;
    admit(*seq, match, n, batch);
    budget -= n;
  }
}

}  // namespace nanovllm
