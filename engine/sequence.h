// One request's tokens and its place in the KV cache (nano-vllm's Sequence).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/position_logprobs.h"
#include "engine/sampling_params.h"
#include "engine/stop_checker.h"

namespace nanovllm {

enum class SequenceStatus : uint8_t { kWaiting, kRunning, kFinished };

// Why a request finished: kStop = an eos or stop token was sampled, or a stop string
// appeared; kLength = max_tokens completion
// tokens or max_model_len total tokens reached; kError = it could not run (result files
// only). kNone while it is unfinished.
enum class FinishReason : uint8_t { kNone, kStop, kLength, kError };
// "stop", "length", "error" or "" (the result file's finish_reason field).
const char* to_string(FinishReason reason);

// The one rule for a prompt's length: it must leave room for at least one generated token
// within max_model_len. "" when it does, else the message (the reader and the scheduler
// both ask this).
std::string prompt_room_error(int64_t num_prompt_tokens, int max_model_len);

class Sequence {
 public:
  Sequence(int64_t seq_id, std::vector<int32_t> prompt_token_ids, SamplingParams params,
           int block_size);

  int64_t seq_id;
  // A request with n completions runs as n sequences; they share request_id (completion 0's
  // seq_id) and their prompt's full KV blocks.
  int64_t request_id;
  int32_t completion_index = 0;  // [0, sampling_params.n)
  SequenceStatus status = SequenceStatus::kWaiting;
  std::vector<int32_t> token_ids;  // prompt followed by completion
  int32_t last_token;
  int num_prompt_tokens;
  int num_cached_tokens = 0;  // leading tokens whose KV came from the prefix cache
  // Leading tokens whose KV is in the cache (cached or computed): a step computes tokens
  // [num_computed_tokens, num_computed_tokens + its chunk); when that reaches num_tokens()
  // the step samples the next token. 1 short of num_tokens() while decoding.
  int num_computed_tokens = 0;
  // Tokens the step being scheduled computes for it (0 when it is not in that step): its KV
  // up to num_computed_tokens + this exists once the step ran, so a sibling may share it.
  int num_scheduled_tokens = 0;
  // Tokens sampled by launched steps whose results the host has not read yet (async
  // scheduling, 0 to 2): the next decode step's input is such a token, taken on the device.
  // They are not in token_ids; num_computed_tokens counts the launched steps' work.
  int num_pending_tokens = 0;
  std::vector<int32_t> block_table;  // KV block ids, one per block_size tokens
  SamplingParams sampling_params;
  int block_size;
  FinishReason finish_reason = FinishReason::kNone;  // set by Scheduler::postprocess
  int num_preemptions = 0;               // times the scheduler evicted it (KV recomputed later)
  int first_prefill_cached_tokens = -1;  // num_cached_tokens of its first prefill; -1 before
  // Its slot in rank 0's per-slot sampling state (engine/sampling_slots.h); -1 while it holds
  // none. Taken at its prefill, given back when it finishes or is preempted, so a recompute
  // prefill sends its parameters again.
  int sampling_slot = -1;
  // Set when the request has stop strings: the completion's text, searched as it grows.
  std::unique_ptr<StopChecker> stop_checker;
  std::optional<StopMatch> stop_match;   // the stop string that finished it
  std::optional<int32_t> stop_token_id;  // the stop_token_ids entry that finished it
  // With sampling_params.logprobs: one entry per completion token (parallel to
  // completion_token_ids()), and their summed logprob (vLLM's cumulative_logprob).
  std::vector<PositionLogprobs> logprobs;
  double cumulative_logprob = 0.0;
  // With sampling_params.prompt_logprobs (completion 0 only): entry i is prompt token i + 1
  // given the tokens before it; filled chunk by chunk as the prompt is computed.
  std::vector<PositionLogprobs> prompt_logprobs;

  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  // Completion 0 of a request asking for prompt_logprobs, before every entry is in: its prompt
  // is computed in full (none of it from the prefix cache).
  bool owes_prompt_logprobs() const {
    return sampling_params.prompt_logprobs.has_value() && completion_index == 0 &&
           static_cast<int>(prompt_logprobs.size()) < num_prompt_tokens - 1;
  }
  int num_completion_tokens() const { return num_tokens() - num_prompt_tokens; }
  bool is_finished() const { return status == SequenceStatus::kFinished; }
  std::span<const int32_t> prompt_token_ids() const {
    return {token_ids.data(), static_cast<size_t>(num_prompt_tokens)};
  }
  std::span<const int32_t> completion_token_ids() const {
    return std::span<const int32_t>(token_ids).subspan(num_prompt_tokens);
  }
  int num_cached_blocks() const { return num_cached_tokens / block_size; }
  int num_blocks() const { return (num_tokens() + block_size - 1) / block_size; }
  int last_block_num_tokens() const { return num_tokens() - (num_blocks() - 1) * block_size; }
  // Token ids of block i (the last one may be partial).
  std::span<const int32_t> block(int i) const;

  void append_token(int32_t token_id);
};

}  // namespace nanovllm
