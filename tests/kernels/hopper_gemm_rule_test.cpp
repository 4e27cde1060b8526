// Where the Hopper decode GEMM's rule (kernels::hopper_gemm_wins) sends the Qwen3 shapes' decode
// GEMMs, and with which config (kernels::hopper_gemm_decode_config): the 0.6B's projections at
// the token counts and tensor-parallel sizes the decode step was measured at
// (bench/results/h200-2026-11-28-issue33_hopper_gemm.txt, ..._hopper_row_split.txt), and none of
// the larger shapes, whose GEMMs lost or were not measured. Host code: runs without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/hopper_gemm.h"

namespace nanovllm::test {
namespace {

using kernels::hopper_gemm_wins;

// The 0.6B: hidden 1024, 16 q / 8 kv heads of 128, intermediate 3072.
constexpr int64_t kQkvN = 4096, kHidden = 1024, kQDim = 2048, kGateUpN = 6144, kInter = 3072;

TEST(HopperGemmRule, TakesTheWideningProjectionsBehindANormFromNineToThirtyTwoTokens) {
  for (int64_t m : {9, 16, 24, 32}) {
    EXPECT_TRUE(hopper_gemm_wins(m, kQkvN, kHidden, true)) << "qkv_proj M=" << m;
    EXPECT_TRUE(hopper_gemm_wins(m, kGateUpN, kHidden, true)) << "gate_up_proj M=" << m;
  }
  for (int64_t m : {1, 8, 33, 64}) {  // the skinny GEMM below, cuBLAS above
    EXPECT_FALSE(hopper_gemm_wins(m, kQkvN, kHidden, true)) << "qkv_proj M=" << m;
    EXPECT_FALSE(hopper_gemm_wins(m, kGateUpN, kHidden, true)) << "gate_up_proj M=" << m;
  }
  // The same shapes when the caller does not say a norm comes first.
  EXPECT_FALSE(hopper_gemm_wins(16, kQkvN, kHidden, false));
  EXPECT_FALSE(hopper_gemm_wins(16, kGateUpN, kHidden, false));
}

TEST(HopperGemmRule, TakesOProjAndDownProjFromSeventeenToSixtyFourTokensAtTpOne) {
  for (int64_t m : {17, 24, 32, 33, 48, 64}) {
    EXPECT_TRUE(hopper_gemm_wins(m, kHidden, kQDim, false)) << "o_proj M=" << m;
    EXPECT_TRUE(hopper_gemm_wins(m, kHidden, kInter, false)) << "down_proj M=" << m;
  }
  // The skinny GEMM (launched early) up to 16 tokens, cuBLAS above 64.
  for (int64_t m : {1, 9, 16, 65, 256}) {
    EXPECT_FALSE(hopper_gemm_wins(m, kHidden, kQDim, false)) << "o_proj M=" << m;
    EXPECT_FALSE(hopper_gemm_wins(m, kHidden, kInter, false)) << "down_proj M=" << m;
  }
  // Their --tp 2 shards (K halved) were within the spread: cuBLAS.
  EXPECT_FALSE(hopper_gemm_wins(24, kHidden, kQDim / 2, false));
  EXPECT_FALSE(hopper_gemm_wins(24, kHidden, kInter / 2, false));
}

TEST(HopperGemmRule, OProjAndDownProjRunInClustersOfFourOthersTakeTheFirstGuess) {
  using kernels::HopperGemmConfig;
  for (int64_t m : {17, 40, 64})
    for (int64_t k : {kQDim, kInter}) {
      const std::optional<HopperGemmConfig> c =
          kernels::hopper_gemm_decode_config(m, kHidden, k, false, false);
      if (!kernels::hopper_gemm_supports(m, kHidden, k)) {  // no sm_90a build or no sm_90 GPU
        EXPECT_FALSE(c.has_value());
        continue;
      }
      ASSERT_TRUE(c.has_value()) << "M=" << m << " K=" << k;
      EXPECT_EQ(*c, (HopperGemmConfig{1, 4, true})) << "M=" << m << " K=" << k << ": " << c->name();
    }
  // Behind a norm (qkv_proj, gate_up_proj with its activation): hopper_gemm_configs' first
  // guess, launched early.
  for (bool act : {false, true}) {
    const int64_t n = act ? kInter : kQkvN;
    const std::optional<HopperGemmConfig> c =
        kernels::hopper_gemm_decode_config(16, n, kHidden, act, true);
    const std::vector<HopperGemmConfig> guesses = kernels::hopper_gemm_configs(16, n, kHidden, act);
    ASSERT_EQ(c.has_value(), !guesses.empty());
    if (!c) continue;
    HopperGemmConfig first = guesses.front();
    first.pdl = true;
    EXPECT_EQ(*c, first) << c->name();
  }
}

TEST(HopperGemmRule, QkvRopeTakesBlocksOfOneHeadAndHalfTheSplitAbove16Tokens) {
  using kernels::HopperGemmConfig;
  // The 0.6B's 32 heads of 128 rows: 4 ranks fill the GPU (128 blocks), as measured up to 16
  // tokens; 2 above. Without an sm_90 GPU the configs offer nothing and the split stays 1.
  const bool hopper = kernels::hopper_gemm_supports(16, kQkvN, kHidden);
  for (int64_t m : {9, 16, 17, 32}) {
    const HopperGemmConfig c = kernels::hopper_gemm_qkv_rope_config(m, kQkvN, kHidden);
    const int split = !hopper ? 1 : m <= 16 ? 4 : 2;
    EXPECT_EQ(c, (HopperGemmConfig{2, split, true})) << "M=" << m << ": " << c.name();
  }
}

TEST(HopperGemmRule, TakesTheShardsOfTheWideningProjectionsAtTpTwoAndFour) {
  for (int64_t tp : {2, 4}) {
    EXPECT_TRUE(hopper_gemm_wins(16, kGateUpN / tp, kHidden, true)) << "gate_up_proj tp " << tp;
  }
  EXPECT_TRUE(hopper_gemm_wins(16, kQkvN / 2, kHidden, true));   // 2048 x 1024 at tp 2
  EXPECT_FALSE(hopper_gemm_wins(16, kQkvN / 4, kHidden, true));  // 1024 x 1024: not widening
}

TEST(HopperGemmRule, LeavesTheLargerShapesAndTheLmHeadAlone) {
  // 1.7B qkv_proj (K 2048: lost 1.01-1.05x), 8B qkv_proj and gate_up_proj, the 8B's tp-4 o_proj
  // shard (4096 x 1024: widening but behind the attention), the 0.6B's LM head.
  EXPECT_FALSE(hopper_gemm_wins(16, 4096, 2048, true));
  EXPECT_FALSE(hopper_gemm_wins(16, 6144, 4096, true));
  EXPECT_FALSE(hopper_gemm_wins(16, 24576, 4096, true));
  EXPECT_FALSE(hopper_gemm_wins(24, 4096, 1024, false));
  EXPECT_FALSE(hopper_gemm_wins(16, 151936, 1024, false));
  EXPECT_FALSE(hopper_gemm_wins(16, 151936, 1024, true));
}

}  // namespace
}  // namespace nanovllm::test
