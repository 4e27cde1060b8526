// Chunked prefill scheduling: a step is a token budget, decodes first, then chunks; a long
// prompt takes several steps and samples only at its end; the threshold caps one sequence's
// chunk; a block is findable in the prefix cache only once a step computes it; a prompt
// preempted between chunks restarts cleanly.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>

#include "engine/scheduler.h"

namespace nanovllm {
namespace {

EngineConfig chunked_config(int budget, int num_blocks = 64) {
  EngineConfig c;
  c.num_kvcache_blocks = num_blocks;
  c.kvcache_block_size = 4;
  c.max_model_len = 256;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = 8;
  c.eos_token_ids = {0};
  return c;  // chunked prefill and mixed steps are the defaults
}

struct Harness {
  explicit Harness(const EngineConfig& c)
      : config(c), bm(c.num_kvcache_blocks, c.kvcache_block_size), scheduler(config, bm) {}
  Sequence* add(int prompt_len, int32_t first = 10) {
    std::vector<int32_t> prompt(static_cast<size_t>(prompt_len));
    std::iota(prompt.begin(), prompt.end(), first);
    SamplingParams p;
    p.max_tokens = 8;
    p.ignore_eos = true;
    seqs.push_back(std::make_unique<Sequence>(static_cast<int64_t>(seqs.size()), std::move(prompt),
                                              p, config.kvcache_block_size));
    scheduler.add(seqs.back().get());
    return seqs.back().get();
  }
  // Runs a batch as the engine does; rows that reach their end sample token 5 (with a slot).
  std::vector<Sequence*> run(const ScheduledBatch& batch) {
    std::vector<Sequence*> sampled;
    for (size_t b = 0; b < batch.seqs.size(); ++b) {
      Sequence* s = batch.seqs[b];
      s->num_computed_tokens += batch.num_scheduled_tokens[b];
      if (s->num_computed_tokens == s->num_tokens()) {
        if (s->sampling_slot < 0) s->sampling_slot = static_cast<int>(s->seq_id);
        sampled.push_back(s);
      }
    }
    scheduler.postprocess(sampled, std::vector<int32_t>(sampled.size(), 5));
    return sampled;
  }
  EngineConfig config;
  BlockManager bm;
  Scheduler scheduler;
  std::vector<std::unique_ptr<Sequence>> seqs;
};

TEST(ChunkedScheduler, APromptLongerThanTheBudgetTakesSeveralStepsAndSamplesAtItsEnd) {
  Harness h(chunked_config(16));
  Sequence* s = h.add(40);
  for (int step = 0; step < 3; ++step) {
    const ScheduledBatch batch = h.scheduler.schedule();
    ASSERT_EQ(batch.seqs.size(), 1u);
    EXPECT_TRUE(batch.is_prefill);
    EXPECT_EQ(batch.num_scheduled_tokens[0], step < 2 ? 16 : 8);
    // Blocks only for what this step computes.
    EXPECT_EQ(static_cast<int>(s->block_table.size()),
              (s->num_computed_tokens + batch.num_scheduled_tokens[0] + 3) / 4);
    EXPECT_EQ(h.run(batch).size(), step < 2 ? 0u : 1u);
  }
  EXPECT_EQ(s->num_completion_tokens(), 1);
  const ScheduledBatch decode = h.scheduler.schedule();
  EXPECT_FALSE(decode.is_prefill);
  EXPECT_EQ(decode.num_decode_tokens, 1);
}

TEST(ChunkedScheduler, DecodesComeFirstAndChunksFillTheRest) {
  Harness h(chunked_config(16));
  Sequence* a = h.add(3, 100);
  Sequence* b = h.add(3, 200);
  h.run(h.scheduler.schedule());  // both prompts in one step
  Sequence* c = h.add(50, 300);
  const ScheduledBatch batch = h.scheduler.schedule();
  ASSERT_EQ(batch.seqs.size(), 3u);
  EXPECT_EQ(batch.seqs[0], a);
  EXPECT_EQ(batch.seqs[1], b);
  EXPECT_EQ(batch.seqs[2], c);
  EXPECT_EQ(batch.num_scheduled_tokens[2], 14);  // 16 less the two decode tokens
  EXPECT_EQ(batch.num_decode_tokens, 2);
  EXPECT_TRUE(batch.is_prefill);  // one mixed command
}

TEST(ChunkedScheduler, TheLongPrefillThresholdCapsOneSequencesChunk) {
  EngineConfig c = chunked_config(32);
  c.long_prefill_token_threshold = 6;
  Harness h(c);
  h.add(20, 100);
  h.add(20, 200);
  const ScheduledBatch batch = h.scheduler.schedule();
  ASSERT_EQ(batch.seqs.size(), 2u);
  EXPECT_EQ(batch.num_scheduled_tokens[0], 6);
  EXPECT_EQ(batch.num_scheduled_tokens[1], 6);
}

TEST(ChunkedScheduler, ALonePromptTakesTheWholeBudgetUntilASecondSequenceArrives) {
  EngineConfig c = chunked_config(16);
  c.long_prefill_token_threshold = 6;
  Harness h(c);
  Sequence* lone = h.add(40, 100);
  ScheduledBatch batch = h.scheduler.schedule();
  ASSERT_EQ(batch.seqs.size(), 1u);
  EXPECT_EQ(batch.num_scheduled_tokens[0], 16);  // nobody to hold: no threshold
  h.run(batch);
  Sequence* other = h.add(3, 200);
  batch = h.scheduler.schedule();
  ASSERT_EQ(batch.seqs.size(), 2u);
  EXPECT_EQ(batch.seqs[0], lone);
  EXPECT_EQ(batch.num_scheduled_tokens[0], 6);  // the threshold again, for the newcomer
  EXPECT_EQ(batch.seqs[1], other);
  EXPECT_EQ(batch.num_scheduled_tokens[1], 3);
}

TEST(ChunkedScheduler, ALonePromptOverTheThresholdButWithinTheBudgetIsPrefilledWhole) {
  EngineConfig c = chunked_config(16);
  c.long_prefill_token_threshold = 6;
  Harness h(c);
  h.add(12, 100);
  const ScheduledBatch batch = h.scheduler.schedule();
  ASSERT_EQ(batch.seqs.size(), 1u);
  EXPECT_EQ(batch.num_scheduled_tokens[0], 12);
  EXPECT_EQ(h.run(batch).size(), 1u);  // its whole prompt in one step: it samples
}

TEST(ChunkedScheduler, AlternatingStepsTakeTurnsWhileBothArePending) {
  EngineConfig c = chunked_config(16);
  c.mixed_chunked_steps = false;
  Harness h(c);
  h.add(3, 100);
  h.run(h.scheduler.schedule());
  h.add(50, 300);
  bool previous_prefill = true;  // the first prompt's step above was a prefill
  for (int step = 0; step < 4; ++step) {
    const ScheduledBatch batch = h.scheduler.schedule();
    EXPECT_EQ(batch.is_prefill, step % 2 == 1) << step;
    EXPECT_NE(batch.is_prefill, previous_prefill) << step;
    previous_prefill = batch.is_prefill;
    h.run(batch);
  }
}

TEST(ChunkedScheduler, ABlockIsFoundInThePrefixCacheOnlyOnceAStepComputesIt) {
  Harness h(chunked_config(10));
  h.add(24, 100);  // chunk 1 computes tokens 0..9: blocks 0 and 1 are full
  h.run(h.scheduler.schedule());
  Sequence* twin = h.add(24, 100);  // the same prompt
  const PrefixMatch match = h.bm.match_prefix(*twin);
  EXPECT_EQ(match.num_cached_tokens, 8);  // block 2 (tokens 8..11) is not computed yet
}

TEST(ChunkedScheduler, APromptPreemptedBetweenChunksRestartsAndFreesItsBlocks) {
  // 6 blocks of 4: a 3-token prompt decoding, then a 14-token prompt in chunks: 11 + 22
  // tokens at most need 9 blocks, so one of them is preempted on the way.
  Harness h(chunked_config(9, 6));
  Sequence* a = h.add(3, 100);
  h.run(h.scheduler.schedule());
  Sequence* big = h.add(14, 200);
  int preempted = 0;
  for (int step = 0; step < 40 && !h.scheduler.is_finished(); ++step) {
    const ScheduledBatch batch = h.scheduler.schedule();
    for (const Sequence* p : batch.preempted) {
      EXPECT_TRUE(p->block_table.empty());
      EXPECT_EQ(p->num_computed_tokens, 0);
      preempted += p == big ? 1 : 0;
    }
    h.run(batch);
  }
  EXPECT_TRUE(h.scheduler.is_finished());
  EXPECT_GT(preempted + a->num_preemptions, 0);
  EXPECT_EQ(h.bm.num_free_blocks(), 6);
}

}  // namespace
}  // namespace nanovllm
