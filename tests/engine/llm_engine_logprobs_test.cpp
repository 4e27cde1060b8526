// The engine's side of logprobs and prompt_logprobs, on the checking fake model (whose
// logprobs name the token and position of each row): every completion token gets its row's
// entry, in order, through chunked prefill and preemption; every prompt token after the first
// gets one, and such a prompt is computed in full, never from the prefix cache.
#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include "engine/llm_engine.h"
#include "tests/engine/checking_step_executor.h"

namespace nanovllm {
namespace {

using testing::CheckingStepExecutor;

constexpr int kVocab = 40;

EngineConfig small_config(int num_blocks, int budget = 256) {
  EngineConfig c;
  c.num_kvcache_blocks = num_blocks;
  c.kvcache_block_size = 4;
  c.max_model_len = 128;
  c.max_num_batched_tokens = budget;
  c.long_prefill_token_threshold = std::min(budget, c.long_prefill_token_threshold);
  c.max_num_seqs = 16;
  c.eos_token_ids = {0, 1};
  return c;
}

std::vector<int32_t> prompt_of(int length, int first = 2) {
  std::vector<int32_t> prompt(static_cast<size_t>(length));
  std::iota(prompt.begin(), prompt.end(), first);
  return prompt;
}

std::vector<RequestOutput> drain(LLMEngine& engine) {
  std::vector<RequestOutput> outputs;
  for (int steps = 0; !engine.is_finished() && steps < 100000; ++steps)
    for (RequestOutput& out : engine.step()) outputs.push_back(std::move(out));
  EXPECT_TRUE(engine.is_finished());
  return outputs;
}

// Entry k of a completion's logprobs: the fake model's row for completion token k, which
// landed at position num_prompt + k.
void expect_completion_logprobs(const RequestOutput& out, int num_top) {
  ASSERT_TRUE(out.logprobs.has_value());
  ASSERT_EQ(out.logprobs->size(), out.completion_token_ids.size());
  const int prompt = static_cast<int>(out.prompt_token_ids.size());
  double sum = 0;
  for (size_t k = 0; k < out.logprobs->size(); ++k) {
    const PositionLogprobs& e = (*out.logprobs)[k];
    const int32_t token = out.completion_token_ids[k];
    EXPECT_EQ(e.token_id, token) << "entry " << k;
    EXPECT_EQ(e.logprob, CheckingStepExecutor::fake_logprob(token)) << "entry " << k;
    EXPECT_EQ(e.rank, CheckingStepExecutor::fake_rank(prompt + static_cast<int>(k)))
        << "entry " << k;
    ASSERT_EQ(e.top.size(), static_cast<size_t>(num_top));
    for (int j = 0; j < num_top; ++j)
      EXPECT_EQ(e.top[j], std::make_pair(token + j, -static_cast<float>(j)));
    sum += e.logprob;
  }
  ASSERT_TRUE(out.cumulative_logprob.has_value());
  EXPECT_DOUBLE_EQ(*out.cumulative_logprob, sum);
}

// Entry i of prompt_logprobs: prompt token i + 1 at position i + 1.
void expect_prompt_logprobs(const RequestOutput& out, int num_top) {
  ASSERT_TRUE(out.prompt_logprobs.has_value());
  ASSERT_EQ(out.prompt_logprobs->size() + 1, out.prompt_token_ids.size());
  for (size_t i = 0; i < out.prompt_logprobs->size(); ++i) {
    const PositionLogprobs& e = (*out.prompt_logprobs)[i];
    const int32_t token = out.prompt_token_ids[i + 1];
    EXPECT_EQ(e.token_id, token) << "entry " << i;
    EXPECT_EQ(e.logprob, CheckingStepExecutor::fake_logprob(token)) << "entry " << i;
    EXPECT_EQ(e.rank, CheckingStepExecutor::fake_rank(static_cast<int>(i) + 1)) << "entry " << i;
    EXPECT_EQ(e.top.size(), static_cast<size_t>(num_top));
  }
}

TEST(LLMEngineLogprobs, EachCompletionTokenGetsItsRowAndTheSum) {
  CheckingStepExecutor runner(kVocab);
  LLMEngine engine(small_config(64), runner);
  runner.attach(engine.block_manager());
  SamplingParams p;
  p.n = 2;
  p.max_tokens = 9;
  p.ignore_eos = true;
  p.logprobs = 3;
  ASSERT_TRUE(engine.add_request(prompt_of(10), p).ok());
  SamplingParams plain = p;
  plain.logprobs.reset();
  plain.n = 1;
  ASSERT_TRUE(engine.add_request(prompt_of(7, 5), plain).ok());
  const std::vector<RequestOutput> outputs = drain(engine);
  ASSERT_EQ(outputs.size(), 3u);
  for (const RequestOutput& out : outputs) {
    if (out.prompt_token_ids.size() == 10) {
      expect_completion_logprobs(out, 3);
    } else {  // asked for none: none, and no cumulative figure
      EXPECT_FALSE(out.logprobs.has_value());
      EXPECT_FALSE(out.cumulative_logprob.has_value());
    }
    EXPECT_FALSE(out.prompt_logprobs.has_value());
  }
}

TEST(LLMEngineLogprobs, PreemptedSequencesKeepOneEntryPerToken) {
  // 8 blocks of 4 tokens for 3 sequences growing to 9 + 14 tokens: decode preempts, and the
  // recompute prefill samples the next token with its own row.
  CheckingStepExecutor runner(kVocab);
  LLMEngine engine(small_config(8), runner);
  runner.attach(engine.block_manager());
  SamplingParams p;
  p.max_tokens = 14;
  p.ignore_eos = true;
  p.logprobs = 0;
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(engine.add_request(prompt_of(9, 2 + r), p).ok());
  int preempted = 0;
  for (const RequestOutput& out : drain(engine)) {
    expect_completion_logprobs(out, 0);
    preempted += out.num_preemptions > 0;
  }
  EXPECT_GT(preempted, 0);
}

TEST(LLMEngineLogprobs, PromptLogprobsCoverEveryPromptTokenAfterTheFirstAcrossChunks) {
  // A 50-token prompt in chunks of at most 16 tokens: entries come chunk by chunk.
  CheckingStepExecutor runner(kVocab);
  LLMEngine engine(small_config(64, /*budget=*/16), runner);
  runner.attach(engine.block_manager());
  SamplingParams p;
  p.max_tokens = 3;
  p.ignore_eos = true;
  p.prompt_logprobs = 5;
  p.n = 2;
  ASSERT_TRUE(engine.add_request(prompt_of(50, 3), p).ok());
  const std::vector<RequestOutput> outputs = drain(engine);
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_GE(engine.stats().num_prefill_steps, 4);
  for (const RequestOutput& out : outputs) {
    if (out.index == 0)
      expect_prompt_logprobs(out, 5);
    else  // the request's prompt_logprobs travel once, with completion 0
      EXPECT_FALSE(out.prompt_logprobs.has_value());
  }
}

TEST(LLMEngineLogprobs, PromptLogprobsPromptIsComputedInFullButCachedForOthers) {
  CheckingStepExecutor runner(kVocab);
  LLMEngine engine(small_config(64), runner);
  runner.attach(engine.block_manager());
  SamplingParams p;
  p.max_tokens = 2;
  p.ignore_eos = true;
  const std::vector<int32_t> prompt = prompt_of(21);
  ASSERT_TRUE(engine.add_request(prompt, p).ok());
  ASSERT_EQ(drain(engine).at(0).num_cached_tokens, 0);
  SamplingParams with = p;
  with.prompt_logprobs = 1;
  ASSERT_TRUE(engine.add_request(prompt, with).ok());
  const RequestOutput full = drain(engine).at(0);
  EXPECT_EQ(full.num_cached_tokens, 0);  // 5 cached blocks were there to take
  expect_prompt_logprobs(full, 1);
  ASSERT_TRUE(engine.add_request(prompt, p).ok());
  EXPECT_EQ(drain(engine).at(0).num_cached_tokens, 20);
}

}  // namespace
}  // namespace nanovllm
