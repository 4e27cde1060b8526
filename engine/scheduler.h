// Continuous batching (nano-vllm's Scheduler): a waiting and a running queue. Without
// chunked prefill each step is either a prefill of waiting sequences or one decode token for
// every running one; with it, a step is a token budget shared by decodes and prompt chunks. When a
// decode cannot get a KV block, the most recently admitted running sequence is preempted
// (its blocks freed, recomputed later from its tokens). The n completions of one request
// are prefilled together: the first computes the prompt, the others share its full blocks
// (reference counts) and compute only the partly filled last block.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/block_manager.h"
#include "engine/engine_config.h"
#include "engine/sequence.h"

namespace nanovllm {

struct ScheduledBatch {
  std::vector<Sequence*> seqs;
  // The step runs as a prefill command (varlen rows) rather than a decode command: some row
  // computes more than one token or starts a sequence.
  bool is_prefill = false;
  // [seqs.size()] tokens each sequence computes this step, from its num_computed_tokens: the
  // rest of its prompt (or a chunk of it, with chunked prefill), 1 for decode. A row samples
  // when it reaches num_tokens().
  std::vector<int> num_scheduled_tokens;
  int num_decode_tokens = 0;  // rows of sequences that were decoding (the rest is prefill)
  int num_cached_tokens = 0;  // prefix-cache hits of the sequences admitted in this step
  // Running sequences this schedule() call sent back to waiting (decode only): the engine
  // gives back what they hold outside the block manager (their sampling slots).
  std::vector<Sequence*> preempted;

  bool empty() const { return seqs.empty(); }
  int num_tokens() const;
};

class Scheduler {
 public:
  // config must be validated with num_kvcache_blocks set; block_manager outlives this.
  Scheduler(const EngineConfig& config, BlockManager& block_manager);

  // Why a request could never run under this configuration, or "" if it can.
  std::string rejection_reason(int num_prompt_tokens, const SamplingParams& params) const;

  void add(Sequence* seq);  // to the back of waiting; seq must be admissible
  bool is_finished() const { return waiting_.empty() && running_.empty(); }
  ScheduledBatch schedule();
  // Appends each sequence's token and finishes it (freeing its blocks, dropping it from
  // running) on, in this order: eos (unless ignore_eos) or a stop_token_ids entry, once
  // min_tokens completion tokens exist; a stop string (searched once more than min_tokens
  // exist); max_tokens or max_model_len. Returns the sequences finished now.
  std::vector<Sequence*> postprocess(std::span<Sequence* const> seqs,
                                     std::span<const int32_t> token_ids);
  // Async scheduling: the next decode step of `seqs`, running sequences whose next input is
  // pending (sampled by the step in flight), with the blocks for that token. False (nothing
  // changed) when the free blocks do not cover them all: the step waits for the results then,
  // so that only schedule() preempts.
  bool schedule_ahead(std::span<Sequence* const> seqs, ScheduledBatch& batch);

  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::deque<Sequence*>& running() const { return running_; }
  int64_t num_preemptions() const { return num_preemptions_; }
  const EngineConfig& config() const { return config_; }

 private:
  bool schedule_prefill(ScheduledBatch& batch);
  void schedule_decode(ScheduledBatch& batch);
  // Chunked prefill (scheduler_chunked.cpp): a budget of max_num_batched_tokens, decodes
  // first, then chunks of prefilling sequences, then newly admitted ones.
  void schedule_chunked(ScheduledBatch& batch);
  void schedule_running_chunked(ScheduledBatch& batch, bool take_decodes, bool take_chunks,
                                int& budget);
  void admit_chunked(ScheduledBatch& batch, int& budget);
  // The tokens a sequence with `remaining` to compute may take in a step with `budget` left
  // (within the long-prefill threshold unless it is the lone sequence).
  int chunk_size(int remaining, int budget) const;
  // Chunked prefill: a prompt with num_new_tokens to compute is prefilled whole in one
  // step (within the budget and, unless it is the lone sequence, the long-prefill threshold).
  bool fits_whole(int num_new_tokens) const;
  // Moves waiting_.front() (== seq) to running with blocks for its cached tokens plus
  // num_new_tokens, and schedules those.
  void admit(Sequence& seq, const PrefixMatch& match, int num_new_tokens, ScheduledBatch& batch);
  // Adds seq's num_tokens to the batch (and records them on seq, for its siblings).
  void add_row(ScheduledBatch& batch, Sequence& seq, int num_tokens);
  // The matched prefix seq would get at admission (its own, or a running sibling's).
  PrefixMatch admission_match(const Sequence& seq) const;
  // Blocks for seq's first num_tokens tokens, preempting from the back of `others` (the
  // running sequences not yet scheduled), then seq itself. False when seq was preempted.
  bool make_room(Sequence& seq, int num_tokens, std::deque<Sequence*>& others,
                 ScheduledBatch& batch);
  void preempt(Sequence* seq);
  bool is_eos(int32_t token_id) const;
  // Why seq, which just got `token`, finishes now (kNone: it goes on); records the stop
  // string or stop token that ended it.
  FinishReason finish_reason_after(Sequence& seq, int32_t token) const;
  // A completion of seq's request that holds KV blocks now, to share its prompt's; or null.
  const Sequence* running_sibling(const Sequence& seq) const;

  EngineConfig config_;
  BlockManager& block_manager_;
  std::deque<Sequence*> waiting_;
  std::deque<Sequence*> running_;
  // request_id -> its unfinished completions, for requests with n > 1.
  std::unordered_map<int64_t, std::vector<Sequence*>> siblings_;
  int64_t num_preemptions_ = 0;
  bool last_step_had_chunks_ = false;  // alternating chunked steps: what the last step was
  // Chunked steps: this step's scheduler holds one sequence in all (running or waiting), so
  // the long-prefill threshold, which protects the others, does not cap it.
  bool lone_sequence_ = false;
};

}  // namespace nanovllm
