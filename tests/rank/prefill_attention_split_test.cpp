// The split of an fp8 cache's prefill step (rank/prefill_attention_split.h): its leading
// one-query sequences and the rest's bounds, from the command's cu_seqlens.
#include "rank/prefill_attention_split.h"

#include <gtest/gtest.h>

namespace nanovllm {
namespace {

StepCommand prefill(std::vector<int32_t> cu_q, std::vector<int32_t> cu_k) {
  StepCommand cmd;
  cmd.kind = StepKind::kPrefill;
  cmd.cu_seqlens_q = std::move(cu_q);
  cmd.cu_seqlens_k = std::move(cu_k);
  return cmd;
}

TEST(PrefillAttentionSplit, LeadingOneQueryRowsThenTheRestsBounds) {
  // Two decodes (contexts 40 and 17), a 30-token chunk over 50 cached, a 5-token prompt, and a
  // one-token prompt end after them (not leading: it stays with the rest).
  const PrefillAttentionSplit s =
      split_prefill_attention(prefill({0, 1, 2, 32, 37, 38}, {0, 40, 57, 137, 142, 163}), 16);
  EXPECT_EQ(s.lead_rows, 2);
  EXPECT_EQ(s.lead_context_lens, (std::vector<int32_t>{40, 17}));
  EXPECT_EQ(s.lead_max_context_len, 40);
  EXPECT_EQ(s.rest_max_seqlen_q, 30);
  EXPECT_EQ(s.rest_max_seqlen_k, 80);
  EXPECT_EQ(s.rest_kv_blocks, 5 + 1 + 2);  // ceil(80/16) + ceil(5/16) + ceil(21/16)
}

TEST(PrefillAttentionSplit, NoLeadWhenTheFirstSequenceHasSeveralQueries) {
  const PrefillAttentionSplit s = split_prefill_attention(prefill({0, 3, 4}, {0, 3, 20}), 16);
  EXPECT_EQ(s.lead_rows, 0);
  EXPECT_TRUE(s.lead_context_lens.empty());
  EXPECT_EQ(s.rest_max_seqlen_q, 3);
  EXPECT_EQ(s.rest_max_seqlen_k, 17);
  EXPECT_EQ(s.rest_kv_blocks, 1 + 2);
}

TEST(PrefillAttentionSplit, EverySequenceOneQueryLeavesNoRest) {
  const PrefillAttentionSplit s = split_prefill_attention(prefill({0, 1, 2}, {0, 9, 9}), 4);
  EXPECT_EQ(s.lead_rows, 2);
  EXPECT_EQ(s.lead_context_lens, (std::vector<int32_t>{9, 0}));
  EXPECT_EQ(s.rest_max_seqlen_q, 0);
  EXPECT_EQ(s.rest_kv_blocks, 0);
}

}  // namespace
}  // namespace nanovllm
