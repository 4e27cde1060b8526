// What rank 0 broadcasts each step: the prepared batch every rank runs the same forward
// pass on (nano-vllm's prepare_prefill / prepare_decode output), or the order to exit.
// Serialized with Boost.Serialization (ipc/step_command_serialization.h).
#pragma once

#include <cstdint>
#include <vector>

namespace nanovllm {

enum class StepKind : uint8_t { kPrefill, kDecode, kExit };

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
  // that produces a token this step.
  std::vector<int32_t> logits_indices;  // [S] row index into [T]
  // Sampling, per sampled sequence (read by rank 0 only; small, so everyone gets it):
  std::vector<float> temperatures;        // [S]
  std::vector<int32_t> top_k;             // [S]
  std::vector<float> top_p;               // [S]
  std::vector<float> min_p;               // [S]
  std::vector<uint64_t> seeds;            // [S]
  std::vector<int32_t> sample_positions;  // [S] index of the token being sampled

  int num_seqs() const {
    return kind == StepKind::kPrefill ? static_cast<int>(cu_seqlens_q.size()) - 1
                                      : static_cast<int>(context_lens.size());
  }
  int num_tokens() const { return static_cast<int>(input_ids.size()); }
};

}  // namespace nanovllm
