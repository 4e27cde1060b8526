#include "engine/llm_engine.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <stdexcept>

#include "tests/engine/checking_step_executor.h"

namespace nanovllm {
namespace {

using testing::CheckingStepExecutor;
using testing::reference_completion;

constexpr int kVocab = 40;

EngineConfig config_with(int num_blocks, int block_size) {
  EngineConfig c;
  c.num_kvcache_blocks = num_blocks;
  c.kvcache_block_size = block_size;
  c.max_model_len = 128;
  c.max_num_batched_tokens = 256;
  c.max_num_seqs = 16;
  c.eos_token_ids = {0, 1};
  return c;
}

struct Request {
  std::vector<int32_t> prompt;
  SamplingParams params;
};

// Runs every request to completion; returns outputs by seq id.
std::map<int64_t, RequestOutput> run_all(LLMEngine& engine, const std::vector<Request>& reqs) {
  for (const Request& r : reqs) {
    const AddRequestResult added = engine.add_request(r.prompt, r.params);
    EXPECT_TRUE(added.ok()) << added.error;
  }
  std::map<int64_t, RequestOutput> outputs;
  for (int steps = 0; !engine.is_finished(); ++steps) {
    if (steps > 100000) {
      ADD_FAILURE() << "engine did not finish";
      break;
    }
    for (RequestOutput& out : engine.step()) outputs.emplace(out.seq_id, std::move(out));
  }
  return outputs;
}

void expect_matches_reference(const RequestOutput& out, const Request& req, const EngineConfig& c) {
  const std::vector<int32_t> expected =
      reference_completion(out.seq_id, req.prompt, req.params.max_tokens, req.params.ignore_eos,
                           c.eos_token_ids, c.max_model_len, kVocab);
  EXPECT_EQ(out.completion_token_ids, expected) << "seq " << out.seq_id;
  EXPECT_EQ(out.prompt_token_ids, req.prompt);
  const int32_t last = out.completion_token_ids.back();
  const bool eos = last == 0 || last == 1;
  EXPECT_EQ(out.finish_reason,
            eos && !req.params.ignore_eos ? FinishReason::kStop : FinishReason::kLength);
}

std::vector<Request> shared_prefix_requests(int n, int max_tokens, bool ignore_eos) {
  std::vector<Request> reqs;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.prompt.assign(12, 0);
    std::iota(r.prompt.begin(), r.prompt.end(), 2);  // common 12-token prefix
    for (int j = 0; j <= i % 5; ++j) r.prompt.push_back(2 + (i * 7 + j) % 30);
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = ignore_eos;
    reqs.push_back(r);
  }
  return reqs;
}

TEST(LLMEngine, FinishedSequencesMatchASequentialRunAndFreeEverything) {
  const EngineConfig c = config_with(64, 4);
  CheckingStepExecutor runner(kVocab);
  LLMEngine engine(c, runner);
  runner.attach(engine.block_manager());
  const std::vector<Request> reqs = shared_prefix_requests(10, 20, false);
  const auto outputs = run_all(engine, reqs);
  ASSERT_EQ(outputs.size(), reqs.size());
  for (const auto& [id, out] : outputs) expect_matches_reference(out, reqs[id], c);
  EXPECT_EQ(engine.num_unfinished_requests(), 0);
  EXPECT_EQ(engine.block_manager().num_free_blocks(), c.num_kvcache_blocks);
  EXPECT_EQ(engine.block_manager().num_used_blocks(), 0);
  EXPECT_EQ(engine.stats().num_finished, 10);
  EXPECT_EQ(engine.sampling_slots().num_free(), c.max_num_seqs);
  EXPECT_EQ(runner.num_slot_fills, 10);  // once per sequence: none was preempted
  EXPECT_EQ(engine.stats().num_preemptions, 0);
}

TEST(LLMEngine, PreemptedSequencesAreRecomputedAndFinishWithTheRightTokens) {
  // 12 blocks of 4 tokens for 6 sequences growing to 13..17 + 16 tokens: decode must preempt.
  EngineConfig c = config_with(12, 4);
  CheckingStepExecutor runner(kVocab);
  LLMEngine engine(c, runner);
  runner.attach(engine.block_manager());
  const std::vector<Request> reqs = shared_prefix_requests(6, 16, true);
  const auto outputs = run_all(engine, reqs);
  ASSERT_EQ(outputs.size(), reqs.size());
  int preempted = 0;
  for (const auto& [id, out] : outputs) {
    EXPECT_EQ(out.completion_token_ids.size(), 16u);
    expect_matches_reference(out, reqs[id], c);
    preempted += out.num_preemptions > 0;
  }
  EXPECT_GT(preempted, 0);
  EXPECT_EQ(engine.stats().num_preemptions, engine.scheduler().num_preemptions());
  EXPECT_EQ(engine.block_manager().num_free_blocks(), c.num_kvcache_blocks);
  // A preempted sequence gave its sampling slot back and sent its parameters again at its
  // recompute prefill (the fake model refuses a stale or missing slot).
  EXPECT_EQ(runner.num_slot_fills,
            static_cast<int64_t>(reqs.size()) + engine.stats().num_preemptions);
  EXPECT_EQ(engine.sampling_slots().num_free(), c.max_num_seqs);
}

TEST(LLMEngine, FinishedSequencesHandTheirSamplingSlotsToTheNextOnes) {
  // Two slots for six requests of different lengths: later prefills reuse freed slots, each
  // with its own parameters (seeds differ per sequence, so a stale slot changes the tokens).
  EngineConfig c = config_with(64, 4);
  c.max_num_seqs = 2;
  CheckingStepExecutor runner(kVocab);
  LLMEngine engine(c, runner);
  runner.attach(engine.block_manager());
  std::vector<Request> reqs = shared_prefix_requests(6, 1, true);
  for (size_t i = 0; i < reqs.size(); ++i)
    reqs[i].params.max_tokens = 1 + static_cast<int>(i % 3) * 4;
  const auto outputs = run_all(engine, reqs);
  ASSERT_EQ(outputs.size(), reqs.size());
  for (const auto& [id, out] : outputs) expect_matches_reference(out, reqs[id], c);
  EXPECT_EQ(runner.num_slot_fills, 6);
  EXPECT_EQ(runner.max_slot_filled, 1);
  EXPECT_EQ(engine.sampling_slots().num_free(), 2);
}

TEST(LLMEngine, RejectedRequestGetsAMessageAndOthersProceed) {
  const EngineConfig c = config_with(8, 4);  // 32 tokens of cache
  CheckingStepExecutor runner(kVocab);
  LLMEngine engine(c, runner);
  runner.attach(engine.block_manager());
  SamplingParams p;
  p.max_tokens = 8;
  EXPECT_FALSE(engine.add_request({}, p).ok());
  const AddRequestResult too_big = engine.add_request(std::vector<int32_t>(30, 5), p, "big");
  EXPECT_FALSE(too_big.ok());
  EXPECT_NE(too_big.error.find("num_kvcache_blocks"), std::string::npos) << too_big.error;
  const AddRequestResult fine = engine.add_request({5, 6, 7}, p, "fine");
  ASSERT_TRUE(fine.ok()) << fine.error;
  std::vector<RequestOutput> outs;
  while (!engine.is_finished())
    for (RequestOutput& o : engine.step()) outs.push_back(std::move(o));
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].user_tag, "fine");
  EXPECT_EQ(outs[0].seq_id, *fine.seq_id);
  EXPECT_EQ(engine.stats().num_rejected, 2);
}

TEST(LLMEngine, ReportsPrefixCacheHitsOfTheFirstPrefill) {
  const EngineConfig c = config_with(32, 4);
  CheckingStepExecutor runner(kVocab);
  LLMEngine engine(c, runner);
  runner.attach(engine.block_manager());
  SamplingParams p;
  p.max_tokens = 3;
  p.ignore_eos = true;
  std::vector<int32_t> prompt(9);
  std::iota(prompt.begin(), prompt.end(), 10);
  ASSERT_TRUE(engine.add_request(prompt, p).ok());
  while (!engine.is_finished()) engine.step();
  prompt.back() = 33;  // same first two blocks
  ASSERT_TRUE(engine.add_request(prompt, p).ok());
  std::vector<RequestOutput> outs;
  while (!engine.is_finished())
    for (RequestOutput& o : engine.step()) outs.push_back(std::move(o));
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].num_cached_tokens, 8);
  EXPECT_EQ(engine.stats().num_cached_tokens, 8);
  EXPECT_EQ(engine.stats().num_prefill_tokens, 9 + 1);
}

TEST(LLMEngine, StatsCountPrefillAndDecodeTokens) {
  const EngineConfig c = config_with(128, 4);
  CheckingStepExecutor runner(kVocab);
  LLMEngine engine(c, runner);
  runner.attach(engine.block_manager());
  const std::vector<Request> reqs = shared_prefix_requests(8, 10, false);
  const auto outputs = run_all(engine, reqs);
  int64_t prompt_tokens = 0, completion_tokens = 0;
  for (const auto& [id, out] : outputs) {
    prompt_tokens += static_cast<int64_t>(out.prompt_token_ids.size());
    completion_tokens += static_cast<int64_t>(out.completion_token_ids.size());
  }
  const EngineStats& s = engine.stats();
  EXPECT_EQ(s.num_preemptions, 0);
  EXPECT_EQ(s.num_prefill_tokens + s.num_cached_tokens, prompt_tokens);
  EXPECT_GT(s.num_cached_tokens, 0);
  // Each sequence's first token comes from its prefill, the rest from decode steps.
  EXPECT_EQ(s.num_decode_tokens, completion_tokens - static_cast<int64_t>(reqs.size()));
  EXPECT_EQ(s.num_steps, s.num_prefill_steps + s.num_decode_steps);
  EXPECT_EQ(s.num_steps, runner.num_runs);
}

TEST(LLMEngine, RefusesAConfigWithoutKvCacheBlocks) {
  EngineConfig c = config_with(8, 4);
  c.num_kvcache_blocks = -1;
  CheckingStepExecutor runner(kVocab);
  EXPECT_THROW(LLMEngine(c, runner), std::invalid_argument);
}

}  // namespace
}  // namespace nanovllm
