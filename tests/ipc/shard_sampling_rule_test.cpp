// Which sampling rules decompose over vocabulary shards (ipc/shard_sampling_rule.h): the exact
// boundaries of top_k, the filters that need a whole row, the shard widths the LM head uses.
#include "ipc/shard_sampling_rule.h"

#include <gtest/gtest.h>

namespace nanovllm {
namespace {

constexpr int64_t kQwenVocab = 151936;

TEST(ShardSamplingRule, ShardColumnsFollowTheLmHeadsCeilSplit) {
  EXPECT_EQ(shard_vocab_columns(kQwenVocab, 4, 0), 37984);
  EXPECT_EQ(shard_vocab_columns(kQwenVocab, 4, 3), 37984);
  EXPECT_EQ(shard_vocab_columns(1000, 3, 0), 334);
  EXPECT_EQ(shard_vocab_columns(1000, 3, 2), 332);  // the last shard short
  EXPECT_LE(shard_vocab_columns(9, 4, 3), 0);       // 3 + 3 + 3 + nothing
}

TEST(ShardSamplingRule, GreedyUnfilteredAndSmallTopKDecompose) {
  EXPECT_TRUE(sampling_rule_decomposes(0.0f, 0, 1.0f, 0.0f, kQwenVocab, 2));
  EXPECT_TRUE(sampling_rule_decomposes(0.0f, 500, 0.5f, 0.3f, kQwenVocab, 2));  // greedy: any
  EXPECT_TRUE(sampling_rule_decomposes(0.7f, 0, 1.0f, 0.0f, kQwenVocab, 4));
  EXPECT_TRUE(sampling_rule_decomposes(0.7f, -1, 1.0f, 0.0f, kQwenVocab, 4));
  EXPECT_TRUE(sampling_rule_decomposes(0.6f, 20, 0.95f, 0.0f, kQwenVocab, 4));  // Qwen3's
  EXPECT_TRUE(sampling_rule_decomposes(0.6f, 64, 0.95f, 0.05f, kQwenVocab, 8));
  // top_k >= V is no cut: unfiltered when nothing else filters
  EXPECT_TRUE(
      sampling_rule_decomposes(1.0f, static_cast<int32_t>(kQwenVocab), 1.0f, 0.0f, kQwenVocab, 2));
}

TEST(ShardSamplingRule, WholeRowFiltersAndLargeTopKDoNot) {
  EXPECT_FALSE(sampling_rule_decomposes(0.6f, 65, 0.95f, 0.0f, kQwenVocab, 4));  // > limit
  EXPECT_FALSE(sampling_rule_decomposes(0.6f, 0, 0.95f, 0.0f, kQwenVocab, 4));   // top-p alone
  EXPECT_FALSE(sampling_rule_decomposes(0.6f, -1, 1.0f, 0.05f, kQwenVocab, 4));  // min-p alone
  EXPECT_FALSE(
      sampling_rule_decomposes(1.0f, static_cast<int32_t>(kQwenVocab), 0.9f, 0.0f, kQwenVocab, 2));
  // top_k must be below every shard's width: 1000 over 8 ranks gives 125 columns each
  EXPECT_TRUE(sampling_rule_decomposes(1.0f, 64, 1.0f, 0.0f, 1000, 8));
  EXPECT_FALSE(sampling_rule_decomposes(1.0f, 40, 1.0f, 0.0f, 100, 4));  // 25 columns a shard
  EXPECT_FALSE(sampling_rule_decomposes(1.0f, 25, 1.0f, 0.0f, 100, 4));
  EXPECT_TRUE(sampling_rule_decomposes(1.0f, 24, 1.0f, 0.0f, 100, 4));
}

TEST(ShardSamplingRule, OneRankTooManyRanksOrAnEmptyShardNever) {
  EXPECT_FALSE(sampling_rule_decomposes(0.0f, 0, 1.0f, 0.0f, kQwenVocab, 1));
  EXPECT_FALSE(
      sampling_rule_decomposes(0.0f, 0, 1.0f, 0.0f, kQwenVocab, kShardSamplingMaxRanks + 1));
  EXPECT_TRUE(sampling_rule_decomposes(0.0f, 0, 1.0f, 0.0f, kQwenVocab, kShardSamplingMaxRanks));
  EXPECT_FALSE(sampling_rule_decomposes(0.0f, 0, 1.0f, 0.0f, 9, 4));
}

}  // namespace
}  // namespace nanovllm
