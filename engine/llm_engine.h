// The engine loop (nano-vllm's LLMEngine, token ids only): owns the requests' Sequences,
// the block manager and the scheduler; each step schedules a batch, runs it through a
// StepRunner and hands back the sequences that finished.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/block_manager.h"
#include "engine/engine_config.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/step_runner.h"

namespace nanovllm {

// add_request's answer: an id, or why the request can never run (other requests proceed).
struct AddRequestResult {
  std::optional<int64_t> seq_id;
  std::string error;  // empty when accepted
  bool ok() const { return seq_id.has_value(); }
};

// A finished request, detached from the engine (its Sequence is freed).
struct RequestOutput {
  int64_t seq_id = -1;
  std::string user_tag;
  std::vector<int32_t> prompt_token_ids;
  std::vector<int32_t> completion_token_ids;  // includes the eos token when one ended it
  FinishReason finish_reason = FinishReason::NONE;
  int num_cached_tokens = 0;  // prefix-cache hit tokens at its first prefill
  int num_preemptions = 0;
};

struct EngineStats {
  int64_t num_steps = 0;
  int64_t num_prefill_steps = 0;
  int64_t num_decode_steps = 0;
  int64_t num_prefill_tokens = 0;  // prompt (and recomputed) tokens actually computed
  int64_t num_cached_tokens = 0;   // prefill tokens served by the prefix cache instead
  int64_t num_decode_tokens = 0;
  int64_t num_preemptions = 0;
  int64_t num_finished = 0;
  int64_t num_rejected = 0;
  double scheduler_seconds = 0;  // schedule + postprocess
  double runner_seconds = 0;     // StepRunner::run
};

class LLMEngine {
 public:
  // Throws std::invalid_argument on a bad config (num_kvcache_blocks must be set).
  // The runner outlives the engine.
  LLMEngine(const EngineConfig& config, StepRunner& runner,
            BlockHashFn hash_fn = compute_block_hash);

  AddRequestResult add_request(std::vector<int32_t> prompt_token_ids, SamplingParams params,
                               std::string user_tag = {});
  // One scheduler step; returns the requests that finished in it (possibly none).
  std::vector<RequestOutput> step();
  bool is_finished() const { return scheduler_.is_finished(); }

  const EngineStats& stats() const { return stats_; }
  const EngineConfig& config() const { return config_; }
  // Read access for tests, invariant checks and the simulator.
  const BlockManager& block_manager() const { return block_manager_; }
  const Scheduler& scheduler() const { return scheduler_; }
  int num_unfinished_requests() const { return static_cast<int>(sequences_.size()); }

 private:
  static const EngineConfig& validated(const EngineConfig& config);

  EngineConfig config_;
  StepRunner& runner_;
  BlockManager block_manager_;
  Scheduler scheduler_;
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> sequences_;  // unfinished ones
  std::unordered_map<int64_t, std::string> user_tags_;
  int64_t next_seq_id_ = 0;
  EngineStats stats_;
};

}  // namespace nanovllm
