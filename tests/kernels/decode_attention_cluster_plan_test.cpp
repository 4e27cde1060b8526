// The cluster rule of the small-batch decode attention
// (kernels/cuda/decode_attention_cluster_plan.h): which batches form clusters of 16 or 8 CTAs a
// (sequence, kv head) on a GPU of 132 SMs (H100 and H200 SXM), and the context bound each gets (a
// few 32-token tiles a CTA: 8 on a grid of one CTA an SM, 12 at 4 or more query heads a kv head, 5
// on a grid of two).
#include "kernels/cuda/decode_attention_cluster_plan.h"

#include <gtest/gtest.h>

namespace nanovllm::kernels::cuda::decode {
namespace {

constexpr int64_t kSms = 132, kCells = 1056;  // scratch for every plan (2 x 132 x 4)
constexpr int kTile = 32;                     // tokens a tile at head dim 128

int bound(int64_t batch, int64_t hq, int64_t hkv, int64_t cells = kCells) {
  return cluster_context_bound(
      cluster_plan(DecodeMerge::kAuto, ClusterChoice::kAuto, batch, hkv, cells, kSms), hq / hkv,
      kTile);
}

TEST(DecodeAttentionClusterPlan, SixteenOnOneCtaAnSmElseEightOnUpToTwo) {
  const auto plan = [](int64_t batch, int64_t hkv) {
    return cluster_plan(DecodeMerge::kAuto, ClusterChoice::kAuto, batch, hkv, kCells, kSms);
  };
  EXPECT_EQ(plan(1, 8).size, 16);  // 128 CTAs
  EXPECT_EQ(plan(1, 8).per_sm, 1);
  EXPECT_EQ(plan(2, 8).size, 8);  // 16 x 16 = 256 > 132: 8 x 16 = 128
  EXPECT_EQ(plan(2, 8).per_sm, 1);
  EXPECT_EQ(plan(4, 8).size, 8);  // 256 CTAs: two an SM
  EXPECT_EQ(plan(4, 8).per_sm, 2);
  EXPECT_EQ(plan(5, 8).size, 0);  // 320 CTAs
  EXPECT_EQ(plan(8, 4).size, 8);  // a tp-2 rank of the 8B shape: 256 CTAs
  EXPECT_EQ(plan(16, 4).size, 0);
}

TEST(DecodeAttentionClusterPlan, ContextBoundIsAFewTilesACta) {
  // 0.6B (16 q / 8 kv heads).
  EXPECT_EQ(bound(1, 16, 8), 16 * 8 * kTile);  // 4,096
  EXPECT_EQ(bound(2, 16, 8), 8 * 8 * kTile);   // 2,048
  EXPECT_EQ(bound(4, 16, 8), 8 * 5 * kTile);   // 1,280: two CTAs an SM
  EXPECT_EQ(bound(5, 16, 8), 0);
  // 8B at tp 2 (16 q / 4 kv heads a rank): 12 tiles at one CTA an SM.
  EXPECT_EQ(bound(2, 16, 4), 16 * 12 * kTile);
  EXPECT_EQ(bound(4, 16, 4), 8 * 12 * kTile);
  EXPECT_EQ(bound(8, 16, 4), 8 * 5 * kTile);
  EXPECT_EQ(bound(16, 16, 4), 0);
  // Too little scratch for the partials: no cluster.
  EXPECT_EQ(bound(1, 16, 8, 32), 0);
  EXPECT_EQ(bound(1, 16, 8, 64), 8 * 8 * kTile);  // 8 CTAs of 8 fit 64 cells
}

TEST(DecodeAttentionClusterPlan, ChoicesForceOrRefuseAndDealtTakesNone) {
  const auto size = [](DecodeMerge merge, ClusterChoice choice, int64_t batch) {
    return cluster_plan(merge, choice, batch, 8, kCells, kSms).size;
  };
  EXPECT_EQ(size(DecodeMerge::kAuto, ClusterChoice::kOff, 1), 0);
  EXPECT_EQ(size(DecodeMerge::kCluster, ClusterChoice::kOff, 1), 16);  // off binds kAuto only
  EXPECT_EQ(size(DecodeMerge::kDealt, ClusterChoice::kAuto, 1), 0);
  EXPECT_EQ(size(DecodeMerge::kAuto, ClusterChoice::kForce8, 1), 8);
  EXPECT_EQ(size(DecodeMerge::kAuto, ClusterChoice::kForce16, 1), 16);
  EXPECT_EQ(size(DecodeMerge::kAuto, ClusterChoice::kForce16, 2), 0);  // 16 only one an SM
  EXPECT_EQ(size(DecodeMerge::kAuto, ClusterChoice::kForce8, 4), 8);
  EXPECT_EQ(size(DecodeMerge::kAuto, ClusterChoice::kAuto, 70000), 0);  // past gridDim.z
}

}  // namespace
}  // namespace nanovllm::kernels::cuda::decode
