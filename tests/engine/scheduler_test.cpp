#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <stdexcept>

namespace nanovllm {
namespace {

EngineConfig small_config(int num_blocks, int block_size, int max_model_len = 64) {
  EngineConfig c;
  c.num_kvcache_blocks = num_blocks;
  c.kvcache_block_size = block_size;
  c.max_model_len = max_model_len;
  c.max_num_batched_tokens = max_model_len;
  c.max_num_seqs = 8;
  c.eos_token_ids = {0, 1};
  c.enable_chunked_prefill = false;  // nano-vllm's scheduling (scheduler_chunked_test: the other)
  return c;
}

// Owns the sequences a test schedules.
struct Harness {
  explicit Harness(const EngineConfig& c)
      : config(c), bm(c.num_kvcache_blocks, c.kvcache_block_size), scheduler(config, bm) {}
  Sequence* add(std::vector<int32_t> prompt, SamplingParams params = {}) {
    seqs.push_back(std::make_unique<Sequence>(static_cast<int64_t>(seqs.size()), std::move(prompt),
                                              params, config.kvcache_block_size));
    scheduler.add(seqs.back().get());
    return seqs.back().get();
  }
  // Runs a batch as the engine does: its tokens are computed, and every sequence that
  // reached its end samples `t`.
  std::vector<Sequence*> feed(const ScheduledBatch& batch, int32_t t) {
    std::vector<Sequence*> sampled;
    for (size_t b = 0; b < batch.seqs.size(); ++b) {
      batch.seqs[b]->num_computed_tokens += batch.num_scheduled_tokens[b];
      if (batch.seqs[b]->num_computed_tokens == batch.seqs[b]->num_tokens())
        sampled.push_back(batch.seqs[b]);
    }
    const std::vector<int32_t> tokens(sampled.size(), t);
    return scheduler.postprocess(sampled, tokens);
  }
  EngineConfig config;
  BlockManager bm;
  Scheduler scheduler;
  std::vector<std::unique_ptr<Sequence>> seqs;
};

std::vector<int32_t> tokens(int n, int32_t start) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(Scheduler, PrefillBatchIsBoundedByMaxNumSeqs) {
  EngineConfig c = small_config(32, 4);
  c.max_num_seqs = 2;
  Harness h(c);
  for (int i = 0; i < 3; ++i) h.add(tokens(3, 10 * i + 10));
  const ScheduledBatch batch = h.scheduler.schedule();
  EXPECT_TRUE(batch.is_prefill);
  EXPECT_EQ(batch.seqs.size(), 2u);
  EXPECT_EQ(h.scheduler.waiting().size(), 1u);
  // The running pair fills max_num_seqs: the third waits through the decode steps.
  h.feed(batch, 5);
  const ScheduledBatch next = h.scheduler.schedule();
  EXPECT_FALSE(next.is_prefill);
  EXPECT_EQ(next.seqs.size(), 2u);
}

TEST(Scheduler, PrefillBudgetChargesOnlyUncachedTokens) {
  Harness h(small_config(32, 4, 16));  // max_num_batched_tokens = 16
  std::vector<int32_t> prefix = tokens(8, 100);
  auto with = [&](int32_t last) {
    std::vector<int32_t> p = prefix;
    p.push_back(last);
    return p;
  };
  h.add(with(50));
  ScheduledBatch first = h.scheduler.schedule();
  ASSERT_EQ(first.seqs.size(), 1u);
  EXPECT_EQ(first.num_scheduled_tokens, (std::vector<int>{9}));
  // 9 + 9 tokens exceed the budget of 16; with the shared prefix cached they cost 1 + 1.
  h.add(with(51));
  h.add(with(52));
  ScheduledBatch second = h.scheduler.schedule();
  EXPECT_TRUE(second.is_prefill);
  ASSERT_EQ(second.seqs.size(), 2u);
  EXPECT_EQ(second.num_scheduled_tokens, (std::vector<int>{1, 1}));
  EXPECT_EQ(second.seqs[0]->num_cached_tokens, 8);
}

TEST(Scheduler, PrefillStopsAtTheTokenBudget) {
  Harness h(small_config(32, 4, 16));
  h.add(tokens(10, 100));
  h.add(tokens(10, 200));  // 10 + 10 > 16 uncached tokens
  const ScheduledBatch batch = h.scheduler.schedule();
  EXPECT_EQ(batch.seqs.size(), 1u);
  EXPECT_LE(batch.num_tokens(), 16);
}

TEST(Scheduler, DecodePreemptsTheRunningTail) {
  // 4 blocks of 2 tokens; three 2-token prompts fill three blocks; each decode then needs
  // a new block and there is one left.
  Harness h(small_config(4, 2, 16));
  SamplingParams p;
  p.max_tokens = 4;  // admissible: at most 6 tokens = 3 blocks each
  Sequence* a = h.add({10, 11}, p);
  Sequence* b = h.add({20, 21}, p);
  Sequence* c = h.add({30, 31}, p);
  ScheduledBatch prefill = h.scheduler.schedule();
  ASSERT_EQ(prefill.seqs.size(), 3u);
  h.feed(prefill, 5);
  ScheduledBatch decode = h.scheduler.schedule();
  EXPECT_FALSE(decode.is_prefill);
  EXPECT_EQ(decode.seqs, (std::vector<Sequence*>{a, b}));
  EXPECT_EQ(c->status, SequenceStatus::kWaiting);
  EXPECT_TRUE(c->block_table.empty());
  EXPECT_EQ(c->num_preemptions, 1);
  EXPECT_EQ(h.scheduler.waiting().front(), c);
  EXPECT_EQ(h.scheduler.num_preemptions(), 1);
  EXPECT_EQ(h.bm.num_free_blocks(), 0);
}

TEST(Scheduler, DecodePreemptsItselfWhenNothingIsLeftToEvict) {
  Harness h(small_config(3, 2, 16));
  SamplingParams p;
  p.max_tokens = 4;
  Sequence* a = h.add({10, 11}, p);
  Sequence* b = h.add({20, 21}, p);
  h.feed(h.scheduler.schedule(), 5);
  // a takes the last free block; b finds running empty and steps back itself.
  ScheduledBatch decode = h.scheduler.schedule();
  EXPECT_EQ(decode.seqs, (std::vector<Sequence*>{a}));
  EXPECT_EQ(b->status, SequenceStatus::kWaiting);
  EXPECT_EQ(h.scheduler.waiting().front(), b);
  EXPECT_EQ(h.scheduler.running().size(), 1u);
}

TEST(Scheduler, PostprocessFinishesOnAnyEosUnlessIgnored) {
  Harness h(small_config(16, 4));
  Sequence* a = h.add({5, 6});
  SamplingParams ignore;
  ignore.ignore_eos = true;
  Sequence* b = h.add({5, 7}, ignore);
  const ScheduledBatch batch = h.scheduler.schedule();
  const std::vector<Sequence*> done = h.feed(batch, 1);  // second eos id
  EXPECT_EQ(done, (std::vector<Sequence*>{a}));
  EXPECT_EQ(a->finish_reason, FinishReason::kStop);
  EXPECT_TRUE(a->is_finished());
  EXPECT_TRUE(a->block_table.empty());
  EXPECT_EQ(b->finish_reason, FinishReason::kNone);
  EXPECT_EQ(h.scheduler.running().size(), 1u);
}

TEST(Scheduler, PostprocessFinishesAtMaxTokensAndAtMaxModelLen) {
  EngineConfig config = small_config(16, 4, 6);
  config.max_num_batched_tokens = 64;  // all three prompts in one prefill
  Harness h(config);
  SamplingParams two;
  two.max_tokens = 2;
  Sequence* a = h.add({5, 6}, two);
  Sequence* b = h.add({5, 6, 7, 8});  // max_model_len 6 ends it after two tokens too
  Sequence* c = h.add({9});           // three tokens so far when a and b stop
  h.feed(h.scheduler.schedule(), 9);
  const std::vector<Sequence*> done = h.feed(h.scheduler.schedule(), 9);
  EXPECT_EQ(done, (std::vector<Sequence*>{a, b}));
  EXPECT_EQ(a->num_completion_tokens(), 2);
  EXPECT_EQ(a->finish_reason, FinishReason::kLength);
  EXPECT_EQ(b->num_tokens(), 6);
  EXPECT_EQ(b->finish_reason, FinishReason::kLength);
  EXPECT_FALSE(c->is_finished());
  EXPECT_EQ(h.bm.num_free_blocks(), 16 - 1);  // only c's block remains
}

TEST(Scheduler, RejectsRequestsThatCouldNeverRun) {
  Harness h(small_config(4, 4, 32));  // cache: 16 tokens; max_model_len 32
  SamplingParams p;
  p.max_tokens = 4;
  EXPECT_NE(h.scheduler.rejection_reason(0, p), "");
  EXPECT_NE(h.scheduler.rejection_reason(33, p).find("max_model_len"), std::string::npos);
  // The boundary: a prompt of max_model_len tokens leaves no room for one generated token.
  Harness big(small_config(64, 4, 32));
  EXPECT_NE(big.scheduler.rejection_reason(32, p).find("no room to generate"), std::string::npos);
  EXPECT_EQ(big.scheduler.rejection_reason(31, p), "");
  EXPECT_EQ(h.scheduler.rejection_reason(12, p), "");  // 16 tokens: exactly 4 blocks
  EXPECT_NE(h.scheduler.rejection_reason(13, p).find("num_kvcache_blocks"), std::string::npos);
  p.max_tokens = 0;
  EXPECT_NE(h.scheduler.rejection_reason(1, p).find("max_tokens"), std::string::npos);
  // max_model_len caps the need: a long max_tokens is fine when max_model_len fits.
  Harness roomy(small_config(8, 4, 32));
  p.max_tokens = 1000;
  EXPECT_EQ(roomy.scheduler.rejection_reason(20, p), "");
}

TEST(EngineConfig, RefusesBatchBudgetBelowMaxNumSeqsNamingBothValues) {
  // --max-model-len 64 --max-num-batched-tokens 64 --max-num-seqs 128: sequences beyond the
  // 64-token decode budget would hold their KV and starve.
  EngineConfig c;
  c.max_model_len = 64;
  c.max_num_batched_tokens = 64;
  c.max_num_seqs = 128;
  try {
    c.validate();
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("max_num_batched_tokens (64) must be >= max_num_seqs (128)"),
              std::string::npos)
        << what;
  }
  c.max_num_seqs = 64;
  EXPECT_NO_THROW(c.validate());
}

TEST(EngineConfig, BudgetBelowMaxModelLenIsFineWithChunkedPrefill) {
  EngineConfig c;
  c.max_num_seqs = 256;
  c.max_num_batched_tokens = 1000;
  c.max_model_len = 2048;
  EXPECT_NO_THROW(c.validate());
  c.long_prefill_token_threshold = -1;
  EXPECT_THROW(c.validate(), std::invalid_argument);
}

TEST(EngineConfig, RefusesBatchBudgetBelowMaxModelLenWithoutChunkingNamingBothValues) {
  EngineConfig c;
  c.max_num_seqs = 256;
  c.max_num_batched_tokens = 1000;
  c.max_model_len = 2048;
  c.enable_chunked_prefill = false;
  try {
    c.validate();
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("max_num_batched_tokens"), std::string::npos) << what;
    EXPECT_NE(what.find("1000"), std::string::npos) << what;
    EXPECT_NE(what.find("2048"), std::string::npos) << what;
  }
}

TEST(EngineConfig, RefusesNonPositiveSizes) {
  EngineConfig c;
  c.kvcache_block_size = 0;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c = EngineConfig{};
  c.max_num_seqs = -1;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c = EngineConfig{};
  c.num_kvcache_blocks = 0;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  EXPECT_NO_THROW(EngineConfig{}.validate());
}

TEST(EngineConfig, MaxModelLenIsCappedByMaxPositionEmbeddings) {
  EngineConfig c;
  c.cap_max_model_len(2048);
  EXPECT_EQ(c.max_model_len, 2048);
  c.cap_max_model_len(40960);
  EXPECT_EQ(c.max_model_len, 2048);
}

}  // namespace
}  // namespace nanovllm
