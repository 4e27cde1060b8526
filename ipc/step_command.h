// What rank 0 broadcasts each step: the prepared batch every rank runs the same forward
// pass on (nano-vllm's prepare_prefill / prepare_decode output), or the order to exit.
// Serialized with Boost.Serialization (ipc/step_command_serialization.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace nanovllm {

enum class StepKind : uint8_t { kPrefill, kDecode, kExit };

// Bumped whenever StepCommand's fields or their meaning change; the ring's header carries it,
// so a worker of another build refuses the ring instead of misreading commands.
inline constexpr uint32_t kStepCommandSchemaVersion = 6;

// A sampling slot's parameters (the sampler keeps them on the device until the slot is
// refilled; kernels/sampler.h states their rules). temperature 0 = greedy; top_k <= 0 or
// >= vocab, top_p >= 1, min_p <= 0 = no filter; seed keys the slot's Philox draws. The workers
// receive these first six fields only (they draw shard candidates: sample_from_shards); the
// rest is rank 0's alone.
struct SlotSamplingParams {
  int32_t slot = -1;
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t seed = 0;
  // min_tokens: a row of this slot whose sampled token lands below position
  // min_tokens_position (row position + 1 < it) cannot sample min_tokens_masked_ids (the
  // stop_token_ids, and eos unless ignore_eos): they are set to -inf before anything else.
  // 0 / empty: nothing masked.
  int32_t min_tokens_position = 0;
  std::vector<int32_t> min_tokens_masked_ids;  // [<= kMaxMinTokensMaskedIds]
  // Penalties (1, 0, 0 = off). With any on, the slot's token state starts from
  // token_state_ids / token_state_values: each id once, its u16 state (kernels/sampler_math.h:
  // the prompt bit when repetition_penalty != 1, and the times the sequence already generated
  // it, for a sequence recomputed after preemption); every other token starts at 0.
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<int32_t> token_state_ids;      // [D] distinct token ids
  std::vector<uint16_t> token_state_values;  // [D]
  // logit_bias: ids unique, [<= kMaxLogitBias] entries.
  std::vector<int32_t> logit_bias_ids;
  std::vector<float> logit_bias_values;
  int32_t num_logprobs = -1;  // alternatives each sampled token reports; -1: no logprobs
};

// eos ids (a model has a few) plus kMaxStopTokenIds (engine/sampling_params.h).
inline constexpr int kMaxMinTokensMaskedIds = 48;
// logit_bias entries per slot (engine/sampling_params.h's kMaxLogitBias).
inline constexpr int kMaxSlotLogitBias = 1024;
// Alternatives a logprobs row reports at most (kernels/logprobs.h's kMaxLogprobs).
inline constexpr int kMaxSlotLogprobs = 20;
// A token state value (kernels/sampler_math.h): the prompt bit, and the generated count in
// the low bits, saturating.
inline constexpr uint16_t kTokenStateInPrompt = 0x8000;
inline constexpr uint16_t kTokenStateCountMax = 0x7fff;

inline constexpr int32_t kPendingInputToken = -1;

struct StepCommand {
  StepKind kind = StepKind::kExit;
  uint64_t step_id = 0;

  // Tokens of this step, T = input_ids.size(). In a kDecode command launched while the step
  // before it is in flight (StepExecutor::accepts_pending_inputs), kPendingInputToken: the
  // token that step sampled for the row's sampling slot, which rank 0's host has not seen yet.
  std::vector<int32_t> input_ids;     // [T]
  std::vector<int32_t> positions;     // [T]
  std::vector<int32_t> slot_mapping;  // [T] cache slot of each token,
                                      // -1 = store nothing (padding, warm-up)

  // Prefill (B sequences):
  std::vector<int32_t> cu_seqlens_q;  // [B + 1] new tokens per sequence, prefix sums
  std::vector<int32_t> cu_seqlens_k;  // [B + 1] cached + new tokens per sequence
  int32_t max_seqlen_q = 0;
  int32_t max_seqlen_k = 0;

  // Decode (B = T sequences):
  std::vector<int32_t> context_lens;  // [B] tokens in the cache after this step's store

  // Both:
  std::vector<int32_t> block_tables;  // [B, block_table_width] row-major, padded with -1
  int32_t block_table_width = 0;

  // Which rows of the hidden states get logits and a sampled token: one per sequence
  // that produces a token this step. Row i samples token number positions[logits_indices[i]]
  // + 1 of its sequence (the Philox counter of its draw).
  std::vector<int32_t> logits_indices;  // [S] row index into [T]
  // prompt_logprobs: rows whose logits give the log-probability of the prompt's next token
  // (every rank computes those logits: the LM head is sharded).
  std::vector<int32_t> prompt_logprobs_indices;  // [P] row index into [T]

  // Sampling state lives on the device, one slot per running sequence (vLLM's persistent
  // batch): each sampled row names its slot, and a slot's parameters travel once, in the step
  // where a sequence starts using it (to the workers: the first six fields).
  std::vector<int32_t> sample_slots;                // [S] slot of each sampled row
  std::vector<SlotSamplingParams> new_slot_params;  // [N] slots (re)filled this step
  // --tp > 1: every rank reduces its LM-head shard of each sampled row to candidate keys and
  // rank 0 merges them (kernels/shard_sampler.h) instead of gathering the logits. Rank 0's
  // engine sets it when every sampled row's rule decomposes (ipc/shard_sampling_rule.h) and
  // no row asks for logprobs.
  bool sample_from_shards = false;
  // Every rank runs this step eagerly, without its decode CUDA graph: rank 0 profiles it (a
  // phase timer, ipc/broadcast_step_executor.h). A worker replaying its graph meanwhile would
  // run the graph's padded batch (16 rows for 12) while rank 0 runs the live rows, and their
  // collectives would differ in size: the ranks hung at decode batch 12 (2026-11-27).
  bool eager = false;

  // Rank 0's alone, never sent to the workers (ipc/step_command_serialization.h):
  bool sample_logprobs = false;  // some sampled row's slot has num_logprobs >= 0
  // prompt_logprobs: the token each row's logprob is of, and the alternatives it reports.
  std::vector<int32_t> prompt_logprobs_targets;  // [P]
  std::vector<int32_t> prompt_logprobs_num_top;  // [P] in [0, kMaxLogprobs]

  int num_seqs() const {
    return kind == StepKind::kPrefill ? static_cast<int>(cu_seqlens_q.size()) - 1
                                      : static_cast<int>(context_lens.size());
  }
  // Some input id is kPendingInputToken (taken on the device from the step before).
  bool has_pending_inputs() const {
    return std::find(input_ids.begin(), input_ids.end(), kPendingInputToken) != input_ids.end();
  }
  int num_tokens() const { return static_cast<int>(input_ids.size()); }
};

}  // namespace nanovllm
