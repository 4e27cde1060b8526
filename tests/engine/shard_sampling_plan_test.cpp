// Rank 0's per-step choice of sampling from vocabulary shards (engine/shard_sampling_plan.h):
// on only at --tp > 1, and only when no sequence of the step needs its whole row (logprobs,
// penalties, logit_bias, a min_tokens mask still in force, a filter that does not decompose).
#include "engine/shard_sampling_plan.h"

#include <gtest/gtest.h>

#include <vector>

namespace nanovllm {
namespace {

EngineConfig sharded(int ranks) {
  EngineConfig c;
  c.shard_sampling_ranks = ranks;
  c.vocab_size = 151936;
  return c;
}

SamplingParams qwen_defaults() {
  SamplingParams p;
  p.temperature = 0.6f;
  p.top_k = 20;
  p.top_p = 0.95f;
  return p;
}

Sequence seq_with(const SamplingParams& p, int prompt_len = 8) {
  return Sequence(1, std::vector<int32_t>(static_cast<size_t>(prompt_len), 7), p, 16);
}

TEST(ShardSamplingPlan, QwenDefaultsSampleFromShardsAtTpAboveOne) {
  const Sequence s = seq_with(qwen_defaults());
  EXPECT_TRUE(samples_from_shards(s, sharded(2)));
  EXPECT_TRUE(samples_from_shards(s, sharded(4)));
  EXPECT_FALSE(samples_from_shards(s, sharded(1)));  // --tp 1 or --disable-shard-sampling
}

TEST(ShardSamplingPlan, RowsThatNeedTheWholeRowGather) {
  SamplingParams p = qwen_defaults();
  p.logprobs = 0;
  EXPECT_FALSE(samples_from_shards(seq_with(p), sharded(2)));
  p = qwen_defaults();
  p.presence_penalty = 0.5f;
  EXPECT_FALSE(samples_from_shards(seq_with(p), sharded(2)));
  p = qwen_defaults();
  p.logit_bias = {{5, 1.0f}};
  EXPECT_FALSE(samples_from_shards(seq_with(p), sharded(2)));
  p = qwen_defaults();
  p.top_k = 0;  // top-p over the whole row
  EXPECT_FALSE(samples_from_shards(seq_with(p), sharded(2)));
  p.top_p = 1.0f;  // then nothing filters: Gumbel-max over every shard
  EXPECT_TRUE(samples_from_shards(seq_with(p), sharded(2)));
}

TEST(ShardSamplingPlan, MinTokensGathersOnlyWhileItsMaskHolds) {
  SamplingParams p = qwen_defaults();
  p.min_tokens = 2;
  Sequence s = seq_with(p, 8);
  EXPECT_FALSE(samples_from_shards(s, sharded(2)));  // the first token: masked
  s.append_token(100);
  EXPECT_FALSE(samples_from_shards(s, sharded(2)));  // the second: masked
  s.append_token(101);
  EXPECT_TRUE(samples_from_shards(s, sharded(2)));  // the third: free
}

TEST(ShardSamplingPlan, OneSequenceThatGathersMakesTheStepGather) {
  Sequence a = seq_with(qwen_defaults());
  SamplingParams lp = qwen_defaults();
  lp.logprobs = 3;
  Sequence b = seq_with(lp);
  std::vector<Sequence*> both = {&a, &b};
  std::vector<Sequence*> first = {&a};
  EXPECT_FALSE(step_samples_from_shards(both, sharded(4)));
  EXPECT_TRUE(step_samples_from_shards(first, sharded(4)));
  EXPECT_FALSE(step_samples_from_shards(first, sharded(1)));
}

}  // namespace
}  // namespace nanovllm
