// The engine's side of vLLM's request fields, on the checking fake model: n completions that
// compute their prompt once, stop_token_ids, min_tokens's host guard, stop strings (with
// Qwen3's tokenizer: the fake model's ids 0..39 are its printable ASCII tokens "!".."H").
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

#include "engine/llm_engine.h"
#include "tests/engine/checking_step_executor.h"
#include "tests/engine/tokenizer_test_support.h"

namespace nanovllm {
namespace {

using testing::CheckingStepExecutor;
using testing::reference_completion_seeded;

constexpr int kVocab = 40;

EngineConfig small_config(int num_blocks, bool prefix_caching = true) {
  EngineConfig c;
  c.num_kvcache_blocks = num_blocks;
  c.kvcache_block_size = 4;
  c.max_model_len = 128;
  c.max_num_batched_tokens = 256;
  c.max_num_seqs = 16;
  c.eos_token_ids = {0, 1};
  c.enable_prefix_caching = prefix_caching;
  return c;
}

// Runs the engine dry; outputs keyed by (request_id, index).
std::map<std::pair<int64_t, int>, RequestOutput> drain(LLMEngine& engine) {
  std::map<std::pair<int64_t, int>, RequestOutput> outputs;
  for (int steps = 0; !engine.is_finished(); ++steps) {
    if (steps > 100000) {
      ADD_FAILURE() << "engine did not finish";
      break;
    }
    for (RequestOutput& out : engine.step()) {
      const auto key = std::make_pair(out.request_id, out.index);
      EXPECT_TRUE(outputs.emplace(key, std::move(out)).second) << "completion given twice";
    }
  }
  return outputs;
}

std::vector<int32_t> prompt_of(int length) {
  std::vector<int32_t> prompt(static_cast<size_t>(length));
  std::iota(prompt.begin(), prompt.end(), 2);
  return prompt;
}

void expect_no_leaks(const LLMEngine& engine) {
  EXPECT_EQ(engine.block_manager().num_free_blocks(), engine.config().num_kvcache_blocks);
  EXPECT_EQ(engine.num_unfinished_requests(), 0);
  EXPECT_EQ(engine.sampling_slots().num_free(), engine.config().max_num_seqs);
}

class NCompletions : public ::testing::TestWithParam<bool> {};  // prefix caching on / off

TEST_P(NCompletions, ComputeThePromptOnceAndEachSamplesItsOwnSeed) {
  const EngineConfig c = small_config(64, /*prefix_caching=*/GetParam());
  std::vector<std::map<std::pair<int64_t, int>, RequestOutput>> runs;
  for (int run = 0; run < 2; ++run) {
    CheckingStepExecutor runner(kVocab);  // fails on a shared block rewritten or read stale
    LLMEngine engine(c, runner);
    runner.attach(engine.block_manager());
    SamplingParams p;
    p.n = 4;
    p.seed = 7;
    p.max_tokens = 6;
    p.ignore_eos = true;
    const AddRequestResult added = engine.add_request(prompt_of(10), p, "four");
    ASSERT_TRUE(added.ok()) << added.error;
    runs.push_back(drain(engine));
    const auto& outputs = runs.back();
    ASSERT_EQ(outputs.size(), 4u);
    std::set<std::vector<int32_t>> distinct;
    for (int i = 0; i < 4; ++i) {
      const RequestOutput& out = outputs.at({*added.seq_id, i});
      EXPECT_EQ(out.num_completions, 4);
      EXPECT_EQ(out.user_tag, "four");
      EXPECT_EQ(out.completion_token_ids,
                reference_completion_seeded(completion_seed(7, i), prompt_of(10), p,
                                            c.eos_token_ids, c.max_model_len, kVocab))
          << "completion " << i;
      distinct.insert(out.completion_token_ids);
    }
    EXPECT_GE(distinct.size(), 3u);  // own seeds: the completions differ
    // 10 prompt tokens = 2 full blocks + 2: the three forks compute only their last block.
    EXPECT_EQ(engine.stats().num_prefill_tokens, 10 + 3 * 2);
    EXPECT_EQ(engine.stats().num_cached_tokens, 3 * 8);
    EXPECT_EQ(engine.stats().num_prefill_steps, 1);
    expect_no_leaks(engine);
  }
  for (const auto& [key, out] : runs[0])
    EXPECT_EQ(out.completion_token_ids, runs[1].at(key).completion_token_ids);  // reproducible
}

TEST_P(NCompletions, ArePreemptedAndRecomputedToTheSameTokens) {
  // 10 blocks of 4 tokens for 2 requests of n = 3 growing to 9 + 12 tokens: decode preempts.
  const EngineConfig c = small_config(10, /*prefix_caching=*/GetParam());
  CheckingStepExecutor runner(kVocab);
  LLMEngine engine(c, runner);
  runner.attach(engine.block_manager());
  SamplingParams p;
  p.n = 3;
  p.max_tokens = 12;
  p.ignore_eos = true;
  std::vector<int64_t> ids;
  for (const uint64_t seed : {11u, 12u}) {
    p.seed = seed;
    ids.push_back(*engine.add_request(prompt_of(9), p).seq_id);
  }
  const auto outputs = drain(engine);
  ASSERT_EQ(outputs.size(), 6u);
  int preempted = 0;
  for (const auto& [key, out] : outputs) {
    const uint64_t seed = key.first == ids[0] ? 11 : 12;
    EXPECT_EQ(out.completion_token_ids,
              reference_completion_seeded(completion_seed(seed, key.second), prompt_of(9), p,
                                          c.eos_token_ids, c.max_model_len, kVocab));
    preempted += out.num_preemptions > 0;
  }
  EXPECT_GT(preempted, 0);
  expect_no_leaks(engine);
}

INSTANTIATE_TEST_SUITE_P(PrefixCaching, NCompletions, ::testing::Bool());

// Index of the first `token` in `tokens` at or after `from`; -1 when none.
int first_index_of(const std::vector<int32_t>& tokens, int32_t token, int from = 0) {
  for (size_t i = static_cast<size_t>(from); i < tokens.size(); ++i)
    if (tokens[i] == token) return static_cast<int>(i);
  return -1;
}

TEST(StopConditions, AStopTokenIdFinishesWithItsIdAsTheReason) {
  const EngineConfig c = small_config(64);
  CheckingStepExecutor runner(kVocab);
  LLMEngine engine(c, runner);
  runner.attach(engine.block_manager());
  SamplingParams free_run;
  free_run.seed = 3;
  free_run.max_tokens = 40;
  free_run.ignore_eos = true;
  const std::vector<int32_t> full = reference_completion_seeded(
      3, prompt_of(5), free_run, c.eos_token_ids, c.max_model_len, kVocab);
  SamplingParams p = free_run;
  p.stop_token_ids = {full[5]};  // its first occurrence may be earlier than index 5
  const int expected_end = first_index_of(full, full[5]) + 1;
  ASSERT_TRUE(engine.add_request(prompt_of(5), p).ok());
  const auto outputs = drain(engine);
  ASSERT_EQ(outputs.size(), 1u);
  const RequestOutput& out = outputs.begin()->second;
  EXPECT_EQ(out.finish_reason, FinishReason::kStop);
  ASSERT_TRUE(out.stop_token_id.has_value());
  EXPECT_EQ(*out.stop_token_id, full[5]);
  EXPECT_EQ(static_cast<int>(out.completion_token_ids.size()), expected_end);
  EXPECT_EQ(out.completion_token_ids.back(), full[5]);  // the id is in token_ids
  EXPECT_FALSE(out.text.has_value());                   // no tokenizer, no text
}

TEST(StopConditions, EosAndStopIdsBeforeMinTokensDoNotFinish) {
  const EngineConfig c = small_config(64);
  SamplingParams p;
  p.seed = 5;
  p.max_tokens = 60;
  // A seed whose free run meets eos early, so min_tokens has something to hold back.
  std::vector<int32_t> free_run;
  for (uint64_t seed = 5; seed < 200; ++seed) {
    p.seed = seed;
    free_run = reference_completion_seeded(seed, prompt_of(5), p, c.eos_token_ids, c.max_model_len,
                                           kVocab);
    if (free_run.size() < 8) break;
  }
  ASSERT_LT(free_run.size(), 8u) << "no seed stops early";
  p.min_tokens = 12;
  CheckingStepExecutor runner(kVocab);
  LLMEngine engine(c, runner);
  runner.attach(engine.block_manager());
  ASSERT_TRUE(engine.add_request(prompt_of(5), p).ok());
  const RequestOutput out = drain(engine).begin()->second;
  const std::vector<int32_t> expected = reference_completion_seeded(
      *p.seed, prompt_of(5), p, c.eos_token_ids, c.max_model_len, kVocab);
  EXPECT_EQ(out.completion_token_ids, expected);
  EXPECT_GE(out.completion_token_ids.size(), 12u);
}

TEST(StopConditions, StopStringsFinishAndCutTheText) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  const EngineConfig c = small_config(64);
  SamplingParams free_run;
  free_run.seed = 9;
  free_run.max_tokens = 40;
  free_run.ignore_eos = true;
  const std::vector<int32_t> full = reference_completion_seeded(
      9, prompt_of(5), free_run, c.eos_token_ids, c.max_model_len, kVocab);
  const std::string full_text = tok.decode(full, true);
  ASSERT_EQ(full_text.size(), full.size());  // one ASCII character per token
  for (const bool include : {false, true}) {
    SamplingParams p = free_run;
    p.stop = {full_text.substr(6, 3), "not in it at all"};
    p.include_stop_str_in_output = include;
    const size_t at = full_text.find(p.stop[0]);  // may be before 6
    CheckingStepExecutor runner(kVocab);
    LLMEngine engine(c, runner, &tok);
    runner.attach(engine.block_manager());
    ASSERT_TRUE(engine.add_request(prompt_of(5), p).ok());
    const RequestOutput out = drain(engine).begin()->second;
    EXPECT_EQ(out.finish_reason, FinishReason::kStop);
    EXPECT_EQ(out.stop_string, p.stop[0]);
    EXPECT_FALSE(out.stop_token_id.has_value());
    EXPECT_EQ(out.completion_token_ids.size(), at + 3);  // the token completing it is kept
    ASSERT_TRUE(out.text.has_value());
    EXPECT_EQ(*out.text, full_text.substr(0, include ? at + 3 : at));
    expect_no_leaks(engine);
  }
}

TEST(StopConditions, WithATokenizerEveryOutputCarriesItsText) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  const EngineConfig c = small_config(64);
  CheckingStepExecutor runner(kVocab);
  LLMEngine engine(c, runner, &tok);
  runner.attach(engine.block_manager());
  SamplingParams p;
  p.n = 2;
  p.max_tokens = 7;
  ASSERT_TRUE(engine.add_request(prompt_of(6), p).ok());
  for (const auto& [key, out] : drain(engine)) {
    ASSERT_TRUE(out.text.has_value());
    // eos ids 0 and 1 ("!" and "\"") are not special: their text stays.
    EXPECT_EQ(*out.text, tok.decode(out.completion_token_ids, true));
  }
}

TEST(StopConditions, StopStringsWithoutATokenizerAreRejected) {
  const EngineConfig c = small_config(64);
  CheckingStepExecutor runner(kVocab);
  LLMEngine engine(c, runner);
  SamplingParams p;
  p.stop = {"x"};
  const AddRequestResult added = engine.add_request(prompt_of(4), p);
  EXPECT_FALSE(added.ok());
  EXPECT_NE(added.error.find("tokenizer"), std::string::npos) << added.error;
}

}  // namespace
}  // namespace nanovllm
