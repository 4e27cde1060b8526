// Continuous batching (nano-vllm's Scheduler): a waiting and a running queue; each step is
// either a prefill of waiting sequences or one decode token for every running one. When a
// decode cannot get a KV block, the most recently admitted running sequence is preempted
// (its blocks freed, recomputed later from its tokens).
#pragma once

#include <deque>
#include <span>
#include <string>
#include <vector>

#include "engine/block_manager.h"
#include "engine/engine_config.h"
#include "engine/sequence.h"

namespace nanovllm {

struct ScheduledBatch {
  std::vector<Sequence*> seqs;
  bool is_prefill = false;
  // [seqs.size()] tokens each sequence computes this step: num_tokens - num_cached_tokens for
  // prefill, 1 for decode.
  std::vector<int> num_scheduled_tokens;
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
  // Appends each sequence's token, finishes it on eos / max_tokens / max_model_len (freeing
  // its blocks and dropping it from running). Returns the sequences finished now.
  std::vector<Sequence*> postprocess(std::span<Sequence* const> seqs,
                                     std::span<const int32_t> token_ids);

  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::deque<Sequence*>& running() const { return running_; }
  int64_t num_preemptions() const { return num_preemptions_; }
  const EngineConfig& config() const { return config_; }

 private:
  bool schedule_prefill(ScheduledBatch& batch);
  void schedule_decode(ScheduledBatch& batch);
  void preempt(Sequence* seq);
  bool is_eos(int32_t token_id) const;

  EngineConfig config_;
  BlockManager& block_manager_;
  std::deque<Sequence*> waiting_;
  std::deque<Sequence*> running_;
  int64_t num_preemptions_ = 0;
};

}  // namespace nanovllm
