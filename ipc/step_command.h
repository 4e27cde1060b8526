// What rank 0 broadcasts each step: the prepared batch every rank runs the same forward
// pass on (nano-vllm's prepare_prefill / prepare_decode output), or the order to exit.
// Serialized with Boost.Serialization (ipc/step_command_serialization.h).
#pragma once

#include <cstdint>
#include <vector>

namespace nanovllm {

enum class StepKind : uint8_t { kPrefill, kDecode, kExit };

// Bumped whenever StepCommand's fields or their meaning change; the ring's header carries it,
// so a worker of another build refuses the ring instead of misreading commands.
inline constexpr uint32_t kStepCommandSchemaVersion = 3;

// A sampling slot's parameters (rank 0's sampler keeps them on the device until the slot is
// refilled). temperature 0 = greedy; top_k <= 0 or >= vocab, top_p >= 1, min_p <= 0 = no
// filter; seed keys the slot's Philox draws.
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
};

// eos ids (a model has a few) plus kMaxStopTokenIds (engine/sampling_params.h).
inline constexpr int kMaxMinTokensMaskedIds = 48;

struct StepCommand {
  StepKind kind = StepKind::kExit;
  uint64_t step_id = 0;

  // Tokens of this step, T = input_ids.size().
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
  // Sampling state lives on rank 0's device, one slot per running sequence (vLLM's persistent
  // batch): each sampled row names its slot, and a slot's parameters travel once, in the step
  // where a sequence starts using it. Workers other than rank 0 ignore both.
  std::vector<int32_t> sample_slots;                // [S] slot of each sampled row
  std::vector<SlotSamplingParams> new_slot_params;  // [N] slots (re)filled this step

  int num_seqs() const {
    return kind == StepKind::kPrefill ? static_cast<int>(cu_seqlens_q.size()) - 1
                                      : static_cast<int>(context_lens.size());
  }
  int num_tokens() const { return static_cast<int>(input_ids.size()); }
};

}  // namespace nanovllm
