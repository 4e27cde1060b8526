#include "engine/step_builder.h"

#include <gtest/gtest.h>

namespace nanovllm {
namespace {

using V = std::vector<int32_t>;

// block_size 4. A: 10 tokens, first block (4 tokens) from the prefix cache, blocks {7, 2, 9}.
// B: 3 tokens, nothing cached, block {5}.
struct Batch {
  Sequence a{11, {100, 101, 102, 103, 104, 105, 106, 107, 108, 109}, SamplingParams{}, 4};
  Sequence b{12, {200, 201, 202}, SamplingParams{}, 4};
  Batch() {
    a.num_cached_tokens = 4;
    a.block_table = {7, 2, 9};
    a.sampling_params.seed = 123;
    a.sampling_params.temperature = 0.5f;
    a.sampling_params.top_k = 20;
    b.block_table = {5};
    b.sampling_params.seed = default_sequence_seed(b.seq_id);  // what LLMEngine resolves
    b.sampling_params.temperature = 0.0f;
  }
};

TEST(StepBuilder, PrefillSkipsCachedPrefixAndMapsSlotsThroughBlockTable) {
  Batch batch;
  Sequence* seqs[] = {&batch.a, &batch.b};
  const StepCommand cmd = build_prefill_command(seqs, 4);
  EXPECT_EQ(cmd.kind, StepKind::kPrefill);
  EXPECT_EQ(cmd.input_ids, (V{104, 105, 106, 107, 108, 109, 200, 201, 202}));
  EXPECT_EQ(cmd.positions, (V{4, 5, 6, 7, 8, 9, 0, 1, 2}));
  // token 4 -> block 2 row 0 = 8; token 8 -> block 9 row 0 = 36; B's tokens -> block 5.
  EXPECT_EQ(cmd.slot_mapping, (V{8, 9, 10, 11, 36, 37, 20, 21, 22}));
  EXPECT_EQ(cmd.cu_seqlens_q, (V{0, 6, 9}));
  EXPECT_EQ(cmd.cu_seqlens_k, (V{0, 10, 13}));
  EXPECT_EQ(cmd.max_seqlen_q, 6);
  EXPECT_EQ(cmd.max_seqlen_k, 10);
  EXPECT_EQ(cmd.block_table_width, 3);
  EXPECT_EQ(cmd.block_tables, (V{7, 2, 9, 5, -1, -1}));
  EXPECT_EQ(cmd.logits_indices, (V{5, 8}));
  EXPECT_EQ(cmd.sample_positions, (V{10, 3}));
  EXPECT_EQ(cmd.temperatures, (std::vector<float>{0.5f, 0.0f}));
  EXPECT_EQ(cmd.top_k, (V{20, -1}));
  ASSERT_EQ(cmd.seeds.size(), 2u);
  EXPECT_EQ(cmd.seeds[0], 123u);
  EXPECT_EQ(cmd.seeds[1], default_sequence_seed(12));
  EXPECT_EQ(cmd.num_seqs(), 2);
}

TEST(StepBuilder, DecodeTakesLastTokenAndItsSlot) {
  Batch batch;
  batch.a.append_token(110);  // token index 10 -> block 9 (third), row 2 -> slot 38
  batch.b.append_token(203);  // token index 3 -> block 5, row 3 -> slot 23
  Sequence* seqs[] = {&batch.a, &batch.b};
  const StepCommand cmd = build_decode_command(seqs, 4);
  EXPECT_EQ(cmd.kind, StepKind::kDecode);
  EXPECT_EQ(cmd.input_ids, (V{110, 203}));
  EXPECT_EQ(cmd.positions, (V{10, 3}));
  EXPECT_EQ(cmd.slot_mapping, (V{38, 23}));
  EXPECT_EQ(cmd.context_lens, (V{11, 4}));
  EXPECT_EQ(cmd.block_tables, (V{7, 2, 9, 5, -1, -1}));
  EXPECT_EQ(cmd.logits_indices, (V{0, 1}));
  EXPECT_EQ(cmd.sample_positions, (V{11, 4}));
  EXPECT_EQ(cmd.num_seqs(), 2);
}

TEST(StepBuilder, DefaultSeedIsDeterministicPerSequenceAndDiffersAcrossSequences) {
  EXPECT_EQ(default_sequence_seed(1), default_sequence_seed(1));
  EXPECT_NE(default_sequence_seed(1), default_sequence_seed(2));
}

TEST(StepBuilder, ASequenceWithoutAResolvedSeedIsABug) {
  Sequence x(1, {1}, SamplingParams{}, 4);
  x.block_table = {0};
  Sequence* seqs[] = {&x};
  EXPECT_THROW(build_prefill_command(seqs, 4), std::exception);
}

}  // namespace
}  // namespace nanovllm
