// The engine loop (nano-vllm's LLMEngine, token ids only): owns the requests' Sequences,
// the block manager and the scheduler; each step schedules a batch, builds its StepCommand,
// has a StepExecutor run it and hands back the sequences that finished.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/block_manager.h"
#include "engine/engine_config.h"
#include "engine/sampling_slots.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/tokenizer.h"
#include "ipc/step_executor.h"

namespace nanovllm {

struct InFlightStep;  // engine/in_flight_step.h

// add_request's answer: an id, or why the request can never run (other requests proceed).
struct AddRequestResult {
  std::optional<int64_t> seq_id;
  std::string error;  // empty when accepted
  bool ok() const { return seq_id.has_value(); }
};

// A finished completion, detached from the engine (its Sequence is freed). A request with
// n > 1 gives n of these, one as each completion finishes, in any order.
struct RequestOutput {
  int64_t seq_id = -1;          // this completion's sequence
  int64_t request_id = -1;      // what add_request returned (completion 0's seq_id)
  int32_t index = 0;            // completion index in [0, n)
  int32_t num_completions = 1;  // the request's n
  std::string user_tag;
  std::vector<int32_t> prompt_token_ids;
  std::vector<int32_t> completion_token_ids;  // includes the eos / stop token that ended it
  FinishReason finish_reason = FinishReason::kNone;
  std::optional<std::string> stop_string;  // the stop string that ended it
  std::optional<int32_t> stop_token_id;    // the stop_token_ids entry that ended it (not eos)
  // The completion's text, when the engine has a tokenizer (else unset): detokenized with the
  // request's skip_special_tokens, cut before a stop string (or after it, with
  // include_stop_str_in_output); the eos / stop token that ended it adds no text when special.
  std::optional<std::string> text;
  int num_cached_tokens = 0;  // prefix-cache hit tokens at its first prefill
  int num_preemptions = 0;
  // Set when the request asked for logprobs: one entry per completion token, and their sum.
  std::optional<std::vector<PositionLogprobs>> logprobs;
  std::optional<double> cumulative_logprob;
  // Set on completion 0 when the request asked for prompt_logprobs: entry i is prompt token
  // i + 1 (vLLM's list has a null for token 0 in front).
  std::optional<std::vector<PositionLogprobs>> prompt_logprobs;
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
  int64_t num_sampling_steps = 0;       // steps that sampled a token
  int64_t num_shard_sampled_steps = 0;  // of those, drawn from the vocabulary shards
  int64_t num_steps_ahead = 0;          // of num_steps, launched before the step before them ended
  double scheduler_seconds = 0;         // schedule + postprocess
  double executor_seconds = 0;          // StepExecutor::launch and collect
};

class LLMEngine {
 public:
  // Throws std::invalid_argument on a bad config (num_kvcache_blocks must be set).
  // The executor outlives the engine. config.enable_prefix_caching false: no prompt block is
  // ever served from the cache (hash_fn is then never called).
  LLMEngine(const EngineConfig& config, StepExecutor& executor,
            BlockHashFn hash_fn = compute_block_hash);
  // With a tokenizer (it must outlive the engine): requests may have stop strings, and every
  // RequestOutput carries its text.
  LLMEngine(const EngineConfig& config, StepExecutor& executor, const Tokenizer* tokenizer,
            BlockHashFn hash_fn = compute_block_hash);

  // A request without a seed gets default_sequence_seed(its seq_id). With params.n > 1 it
  // runs as n sequences, completion i seeded completion_seed(seed, i); the returned id is the
  // RequestOutputs' request_id.
  AddRequestResult add_request(std::vector<int32_t> prompt_token_ids, SamplingParams params,
                               std::string user_tag = {});
  ~LLMEngine();

  // One scheduler step; returns the requests that finished in it (possibly none). With async
  // scheduling (EngineConfig::async_scheduling) the next decode step may be launched before
  // this one's results are read: it is in flight when step() returns, and the next call
  // collects it.
  std::vector<RequestOutput> step();
  // No request left and no step in flight.
  bool is_finished() const;
  // Sends the EXIT command through the executor (under tensor parallelism it ends the
  // workers' loops). Call once, after the last step.
  void stop_workers();

  const EngineStats& stats() const { return stats_; }
  const EngineConfig& config() const { return config_; }
  // Read access for tests, invariant checks and the simulator.
  const BlockManager& block_manager() const { return block_manager_; }
  const Scheduler& scheduler() const { return scheduler_; }
  const SamplingSlots& sampling_slots() const { return sampling_slots_; }
  int num_unfinished_requests() const { return static_cast<int>(sequences_.size()); }

 private:
  static const EngineConfig& validated(const EngineConfig& config);
  void release_sampling_slot(Sequence& seq);
  RequestOutput output_of(Sequence& seq);
  std::optional<std::string> completion_text(const Sequence& seq) const;

  // The step loop (llm_engine_step.cpp).
  // Marks the rows as computed, launches cmd (its step id and shard-sampling choice set here).
  std::unique_ptr<InFlightStep> launch(ScheduledBatch batch, StepCommand cmd);
  std::unique_ptr<InFlightStep> schedule_and_launch();
  // The next decode step of the running sequences while in_flight_ runs, or null where async
  // scheduling does not apply.
  std::unique_ptr<InFlightStep> launch_ahead();
  // Collects step's results (the oldest launched) and postprocesses them.
  std::vector<RequestOutput> complete(InFlightStep& step);
  // seq finished: its rows in in_flight_ are dropped.
  void drop_from_in_flight(const Sequence* seq);

  struct RequestTag {
    std::string user_tag;
    int num_unfinished = 0;  // completions still running
  };

  EngineConfig config_;
  StepExecutor& executor_;
  BlockManager block_manager_;
  Scheduler scheduler_;
  SamplingSlots sampling_slots_;  // one per sequence that can run at once (max_num_seqs)
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> sequences_;  // unfinished ones
  const Tokenizer* tokenizer_ = nullptr;
  std::unordered_map<int64_t, RequestTag> user_tags_;  // request_id -> its tag
  int64_t next_seq_id_ = 0;
  uint64_t next_step_id_ = 0;
  EngineStats stats_;
  std::unique_ptr<InFlightStep> in_flight_;  // launched, not yet collected
};

}  // namespace nanovllm
