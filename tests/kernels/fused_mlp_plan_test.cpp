// How the fused decode MLP (kernels::fused_mlp_plan) cuts an MLP over the SMs: the 0.6B's and
// the 1.7B's tp-4 shard on an H200's 132 SMs and 227 KB, the 8B's tp-4 and tp-8 shards with
// their gate and up rows streamed, the shapes it refuses, and for a
// range of shapes that every act column and down row has exactly one block and no block is
// empty. Host code: runs without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>

#include "kernels/fused_mlp.h"

namespace nanovllm::test {
namespace {

using kernels::fused_mlp_plan;
using kernels::FusedMlpPlan;

constexpr int kH200Sms = 132;
constexpr int64_t kH200SmemOptin = 227 * 1024;

TEST(FusedMlpPlan, SpreadsTheSmallShapesOverEverySmOneBlockEach) {
  const std::optional<FusedMlpPlan> p = fused_mlp_plan(1, 1024, 3072, kH200Sms, kH200SmemOptin);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->act_per_block, 24);  // 3072 / 132 rounded up
  EXPECT_EQ(p->rows_per_block, 8);  // 1024 / 132 rounded up
  EXPECT_EQ(p->blocks, 128);
  // gate and up rows 2 x 24 x 1024, down rows 8 x 3072, x and residual 1024 each and act 3072
  // (bf16), and 16 mbarriers.
  EXPECT_EQ(p->smem_bytes, 2 * (2 * 24 * 1024 + 8 * 3072 + 2 * 1024 + 3072) + 16 * 8);
  // The 1.7B at --tp 4: hidden 2048, its intermediate shard 1536.
  const std::optional<FusedMlpPlan> q = fused_mlp_plan(2, 2048, 1536, kH200Sms, kH200SmemOptin);
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->act_per_block, 12);
  EXPECT_EQ(q->rows_per_block, 16);
  EXPECT_EQ(q->blocks, 128);
}

// Hidden 4096 (the 8B) streams its gate and up rows; only the down rows, x and act are held.
TEST(FusedMlpPlan, StreamsGateUpWhereOnlyTheDownRowsFit) {
  // The 8B at --tp 4: intermediate shard 3072.
  const std::optional<FusedMlpPlan> p = fused_mlp_plan(1, 4096, 3072, kH200Sms, kH200SmemOptin);
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(p->stream_gate_up);
  EXPECT_EQ(p->act_per_block, 24);
  EXPECT_EQ(p->rows_per_block, 32);
  EXPECT_EQ(p->blocks, 128);
  // down rows 32 x 3072, x 4096 and act 3072 (bf16), and 8 mbarriers.
  EXPECT_EQ(p->smem_bytes, 2 * (32 * 3072 + 4096 + 3072) + 8 * 8);
  // At --tp 8 (1536): half the down rows' bytes.
  const std::optional<FusedMlpPlan> q = fused_mlp_plan(1, 4096, 1536, kH200Sms, kH200SmemOptin);
  ASSERT_TRUE(q.has_value());
  EXPECT_TRUE(q->stream_gate_up);
  EXPECT_EQ(q->act_per_block, 12);
  EXPECT_EQ(q->smem_bytes, 2 * (32 * 1536 + 4096 + 1536) + 8 * 8);
  // The held shapes stay held.
  const std::optional<FusedMlpPlan> held = fused_mlp_plan(1, 1024, 3072, kH200Sms, kH200SmemOptin);
  ASSERT_TRUE(held.has_value());
  EXPECT_FALSE(held->stream_gate_up);
}

TEST(FusedMlpPlan, TakesOneOrTwoTokens) {
  for (int m = 1; m <= 2; ++m) {
    const std::optional<FusedMlpPlan> p = fused_mlp_plan(m, 1024, 3072, kH200Sms, kH200SmemOptin);
    ASSERT_TRUE(p.has_value()) << "M=" << m;
    // x, residual and act grow by a token row each.
    EXPECT_EQ(p->smem_bytes, 2 * (2 * 24 * 1024 + 8 * 3072 + m * (2 * 1024 + 3072)) + 16 * 8);
  }
  EXPECT_FALSE(fused_mlp_plan(3, 1024, 3072, kH200Sms, kH200SmemOptin).has_value());
  EXPECT_FALSE(fused_mlp_plan(0, 1024, 3072, kH200Sms, kH200SmemOptin).has_value());
}

TEST(FusedMlpPlan, RefusesShapesWhoseSharesOrLanesDoNotFit) {
  // The 1.7B at tp 1 (a block's shares 385 + 98 KB), the 4B's hidden 2560; the 8B's 4096 at
  // two tokens, and at tp 2 and 1, whose down rows alone pass 227 KB (32 of 6144 and 12288).
  EXPECT_FALSE(fused_mlp_plan(1, 2048, 6144, kH200Sms, kH200SmemOptin).has_value());
  EXPECT_FALSE(fused_mlp_plan(1, 2560, 9728, kH200Sms, kH200SmemOptin).has_value());
  EXPECT_FALSE(fused_mlp_plan(2, 4096, 3072, kH200Sms, kH200SmemOptin).has_value());
  EXPECT_FALSE(fused_mlp_plan(1, 4096, 6144, kH200Sms, kH200SmemOptin).has_value());
  EXPECT_FALSE(fused_mlp_plan(1, 4096, 12288, kH200Sms, kH200SmemOptin).has_value());
  // An intermediate size that is not whole 16-byte chunks.
  EXPECT_FALSE(fused_mlp_plan(1, 1024, 3076, kH200Sms, kH200SmemOptin).has_value());
  // The 0.6B on a GPU of half the SMs: the shares double past 227 KB.
  EXPECT_FALSE(fused_mlp_plan(1, 1024, 3072, 66, kH200SmemOptin).has_value());
  EXPECT_TRUE(fused_mlp_plan(1, 1024, 3072, 114, kH200SmemOptin).has_value());  // an H100 PCIe
}

// The output projection in front: a warp holds one row of it, a lane 4 or 8 chunks of that row.
TEST(FusedMlpPlan, TakesTheOutputProjectionWhereAWarpHoldsOneRow) {
  const std::optional<FusedMlpPlan> p = fused_mlp_plan(1, 1024, 3072, kH200Sms, kH200SmemOptin);
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(kernels::fused_mlp_takes_out_proj(*p, 2048));  // the 0.6B: 16 heads of 128
  EXPECT_TRUE(kernels::fused_mlp_takes_out_proj(*p, 1024));
  EXPECT_FALSE(kernels::fused_mlp_takes_out_proj(*p, 1536));
  EXPECT_FALSE(kernels::fused_mlp_takes_out_proj(*p, 4096));
  // Hidden 2048 over 128 SMs: 16 rows a block, two a warp.
  const std::optional<FusedMlpPlan> wide = fused_mlp_plan(1, 2048, 1536, 128, kH200SmemOptin);
  ASSERT_TRUE(wide.has_value());
  EXPECT_EQ(wide->rows_per_block, 16);
  EXPECT_FALSE(kernels::fused_mlp_takes_out_proj(*wide, 2048));
}

TEST(FusedMlpPlan, EveryColumnAndRowHasOneBlockAndNoBlockIsEmpty) {
  for (int64_t hidden : {1024, 2048}) {
    for (int64_t inter = 8; inter <= 4096; inter += 40) {
      for (int sms : {16, 114, 132}) {
        const std::optional<FusedMlpPlan> p =
            fused_mlp_plan(2, hidden, inter, sms, int64_t{1} << 30);
        ASSERT_TRUE(p.has_value()) << hidden << " " << inter << " " << sms;
        const int64_t b = p->blocks;
        EXPECT_LE(b, sms);
        EXPECT_GE(b * p->act_per_block, inter);
        EXPECT_GE(b * p->rows_per_block, hidden);
        // The last block still has act columns or down rows.
        EXPECT_TRUE((b - 1) * p->act_per_block < inter || (b - 1) * p->rows_per_block < hidden)
            << hidden << " " << inter << " " << sms;
      }
    }
  }
}

}  // namespace
}  // namespace nanovllm::test
