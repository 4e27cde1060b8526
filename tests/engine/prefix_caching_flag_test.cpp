// EngineConfig::enable_prefix_caching (vLLM's --no-enable-prefix-caching): with it off, a
// prompt identical to an earlier one gets no cached tokens and every block is fresh; with it
// on (the default) the same run hits the cache. The checking executor verifies the KV reads
// either way, so turning caching off must not change the generated tokens.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "engine/block_manager.h"
#include "engine/llm_engine.h"
#include "tests/engine/checking_step_executor.h"

namespace nanovllm {
namespace {

using testing::CheckingStepExecutor;

constexpr int kVocab = 40;

EngineConfig config(bool prefix_caching) {
  EngineConfig c;
  c.num_kvcache_blocks = 32;
  c.kvcache_block_size = 4;
  c.max_model_len = 128;
  c.max_num_batched_tokens = 256;
  c.max_num_seqs = 16;
  c.eos_token_ids = {0};
  c.enable_prefix_caching = prefix_caching;
  return c;
}

struct TwoRuns {
  RequestOutput first, second;
  EngineStats stats;
};

// The same 10-token prompt twice, one after the other, each to completion.
TwoRuns run_same_prompt_twice(bool prefix_caching) {
  CheckingStepExecutor executor(kVocab);
  LLMEngine engine(config(prefix_caching), executor);
  executor.attach(engine.block_manager());
  std::vector<int32_t> prompt(10);
  std::iota(prompt.begin(), prompt.end(), 5);
  SamplingParams p;
  p.max_tokens = 3;
  p.ignore_eos = true;
  p.seed = 7;
  TwoRuns runs;
  for (RequestOutput* out : {&runs.first, &runs.second}) {
    EXPECT_TRUE(engine.add_request(prompt, p).ok());
    while (!engine.is_finished())
      for (RequestOutput& o : engine.step()) *out = std::move(o);
  }
  runs.stats = engine.stats();
  EXPECT_EQ(engine.block_manager().num_free_blocks(), engine.block_manager().num_blocks());
  return runs;
}

TEST(PrefixCachingFlag, OffGivesASecondIdenticalPromptNoCachedTokens) {
  const TwoRuns off = run_same_prompt_twice(false);
  EXPECT_EQ(off.first.num_cached_tokens, 0);
  EXPECT_EQ(off.second.num_cached_tokens, 0);
  EXPECT_EQ(off.stats.num_cached_tokens, 0);
  EXPECT_EQ(off.stats.num_prefill_tokens, 2 * 10);
}

TEST(PrefixCachingFlag, OnGivesTheSecondPromptItsFullBlocks) {
  const TwoRuns on = run_same_prompt_twice(true);
  EXPECT_EQ(on.first.num_cached_tokens, 0);
  EXPECT_EQ(on.second.num_cached_tokens, 8);  // two full blocks of 4; the partial one is new
  EXPECT_GT(on.stats.num_cached_tokens, 0);
}

TEST(PrefixCachingFlag, OffDoesNotChangeTheTokens) {
  const TwoRuns off = run_same_prompt_twice(false), on = run_same_prompt_twice(true);
  EXPECT_EQ(off.second.completion_token_ids, on.second.completion_token_ids);
  EXPECT_EQ(off.first.completion_token_ids, off.second.completion_token_ids);
}

TEST(PrefixCachingFlag, BlockManagerOffNeverHashesNorFindsABlock) {
  int hash_calls = 0;
  const BlockHashFn counting = [&](std::optional<uint64_t> prefix, std::span<const int32_t> t) {
    ++hash_calls;
    return compute_block_hash(prefix, t);
  };
  BlockManager bm(8, 4, counting, /*enable_prefix_caching=*/false);
  EXPECT_FALSE(bm.prefix_caching());
  SamplingParams p;
  for (int round = 0; round < 2; ++round) {
    Sequence seq(round, {1, 2, 3, 4, 5, 6, 7, 8, 9}, p, 4);
    const PrefixMatch match = bm.match_prefix(seq);
    EXPECT_TRUE(match.hashes.empty());
    EXPECT_TRUE(match.cached_block_ids.empty());
    EXPECT_EQ(match.num_blocks_needed, 3);
    bm.allocate(seq);
    EXPECT_EQ(seq.num_cached_tokens, 0);
    for (int t = 0; t < 4; ++t) {  // decode across a block boundary
      seq.append_token(10 + t);
      ASSERT_TRUE(bm.can_append(seq));
      bm.may_append(seq);
    }
    for (const Block& b : bm.blocks()) EXPECT_FALSE(b.hash.has_value());
    bm.deallocate(seq);
  }
  EXPECT_EQ(hash_calls, 0);
  EXPECT_EQ(bm.num_free_blocks(), 8);
}

}  // namespace
}  // namespace nanovllm
