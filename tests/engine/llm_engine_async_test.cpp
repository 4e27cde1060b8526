// Async scheduling (EngineConfig::async_scheduling): LLMEngine launches the next decode step
// before it collects the current one, the next step's inputs pending on the executor. The
// checking fake model (checking_step_executor.h) resolves pending inputs as the device does
// and checks every command's KV reads, so these pin when the engine launches ahead, that its
// outputs are the sequential reference's, and what is left after a row past a sequence's end.
#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include "engine/llm_engine.h"
#include "engine/step_builder.h"
#include "tests/engine/checking_step_executor.h"

namespace nanovllm {
namespace {

using testing::CheckingStepExecutor;
using testing::reference_completion;

constexpr int kVocab = 40;

EngineConfig small_config() {
  EngineConfig c;
  c.num_kvcache_blocks = 128;  // 6 sequences of 40 tokens fit without preemption
  c.kvcache_block_size = 4;
  c.max_model_len = 128;
  c.max_num_batched_tokens = 256;
  c.max_num_seqs = 16;
  c.eos_token_ids = {0, 1};
  return c;
}

std::vector<int32_t> prompt_of(int i) {
  std::vector<int32_t> p(static_cast<size_t>(5 + i % 7));
  std::iota(p.begin(), p.end(), 2 + i);
  return p;
}

struct EngineRun {
  std::map<int64_t, RequestOutput> outputs;  // by seq id
  EngineStats stats;
  int64_t pending_inputs = 0;
  int free_blocks = 0;
};

// `n` requests of max_tokens each (eos ends them unless ignore_eos), run to the end.
EngineRun run(int n, int max_tokens, bool ignore_eos, bool accept_pending,
              bool async_scheduling = true, bool logprobs = false) {
  EngineConfig c = small_config();
  c.async_scheduling = async_scheduling;
  CheckingStepExecutor runner(kVocab);
  runner.accept_pending = accept_pending;
  runner.limits = step_limits(c);  // what the model runner enforces on every command
  LLMEngine engine(c, runner);
  runner.attach(engine.block_manager());
  for (int i = 0; i < n; ++i) {
    SamplingParams p;
    p.max_tokens = max_tokens;
    p.ignore_eos = ignore_eos;
    if (logprobs) p.logprobs = 2;
    EXPECT_TRUE(engine.add_request(prompt_of(i), p).ok());
  }
  EngineRun r;
  for (int steps = 0; !engine.is_finished() && steps < 10000; ++steps)
    for (RequestOutput& out : engine.step()) r.outputs.emplace(out.seq_id, std::move(out));
  EXPECT_TRUE(engine.is_finished());
  r.stats = engine.stats();
  r.pending_inputs = runner.num_pending_inputs;
  r.free_blocks = engine.block_manager().num_free_blocks();
  EXPECT_EQ(engine.sampling_slots().num_free(), c.max_num_seqs);
  return r;
}

void expect_reference_outputs(const EngineRun& r, int n, int max_tokens, bool ignore_eos) {
  const EngineConfig c = small_config();
  ASSERT_EQ(static_cast<int>(r.outputs.size()), n);
  for (const auto& [id, out] : r.outputs) {
    EXPECT_EQ(out.completion_token_ids,
              reference_completion(id, prompt_of(static_cast<int>(id)), max_tokens, ignore_eos,
                                   c.eos_token_ids, c.max_model_len, kVocab))
        << "seq " << id;
  }
  EXPECT_EQ(r.free_blocks, c.num_kvcache_blocks);
}

TEST(LLMEngineAsync, DecodesLaunchAheadAndGiveTheSequentialOutputs) {
  const EngineRun r = run(/*n=*/6, /*max_tokens=*/40, /*ignore_eos=*/true, /*accept_pending=*/true);
  expect_reference_outputs(r, 6, 40, true);
  // One prefill, then 39 decodes, each launched before the step before it (the prefill
  // included) is collected, every row's input pending. The step that samples a sequence's
  // 40th token is its last: nothing is launched past max_tokens.
  EXPECT_EQ(r.stats.num_prefill_steps, 1);
  EXPECT_EQ(r.stats.num_decode_steps, 39);
  EXPECT_EQ(r.stats.num_steps_ahead, 39);
  EXPECT_EQ(r.pending_inputs, 39 * 6);
  EXPECT_EQ(r.stats.num_decode_tokens, 39 * 6);
}

TEST(LLMEngineAsync, ARowPastAnEosIsDroppedAndItsBlocksComeBack) {
  // eos (ids 0 and 1 of a 40-token vocabulary) ends some sequences early: the step launched
  // ahead computed a row for each of them, which leaves no token in its output.
  const EngineRun async = run(/*n=*/16, /*max_tokens=*/100, /*ignore_eos=*/false, true);
  const EngineRun sync = run(16, 100, false, /*accept_pending=*/false);
  expect_reference_outputs(async, 16, 100, false);
  expect_reference_outputs(sync, 16, 100, false);
  int eos_finishes = 0;
  for (const auto& [id, out] : async.outputs)
    eos_finishes += out.finish_reason == FinishReason::kStop;
  ASSERT_GT(eos_finishes, 4);
  EXPECT_GT(async.stats.num_steps_ahead, 0);
  // The dropped rows are decode tokens computed and thrown away: more than the sync run's.
  EXPECT_GT(async.stats.num_decode_tokens, sync.stats.num_decode_tokens);
  EXPECT_EQ(sync.stats.num_steps_ahead, 0);
}

TEST(LLMEngineAsync, NothingGoesAheadWhenTheExecutorTakesNoPendingInputs) {
  const EngineRun r = run(4, 20, true, /*accept_pending=*/false);
  expect_reference_outputs(r, 4, 20, true);
  EXPECT_EQ(r.stats.num_steps_ahead, 0);
  EXPECT_EQ(r.pending_inputs, 0);
}

TEST(LLMEngineAsync, NothingGoesAheadWhenTurnedOff) {
  const EngineRun r = run(4, 20, true, true, /*async_scheduling=*/false);
  expect_reference_outputs(r, 4, 20, true);
  EXPECT_EQ(r.stats.num_steps_ahead, 0);
}

TEST(LLMEngineAsync, LogprobsRequestsAreNotLaunchedAhead) {
  const EngineRun r = run(3, 12, true, true, true, /*logprobs=*/true);
  expect_reference_outputs(r, 3, 12, true);
  EXPECT_EQ(r.stats.num_steps_ahead, 0);
  for (const auto& [id, out] : r.outputs) {
    ASSERT_TRUE(out.logprobs.has_value());
    EXPECT_EQ(out.logprobs->size(), out.completion_token_ids.size()) << "seq " << id;
  }
}

TEST(LLMEngineAsync, ALateRequestWaitsOnlyForTheStepInFlight) {
  EngineConfig c = small_config();
  CheckingStepExecutor runner(kVocab);
  runner.accept_pending = true;
  LLMEngine engine(c, runner);
  runner.attach(engine.block_manager());
  SamplingParams p;
  p.max_tokens = 30;
  p.ignore_eos = true;
  ASSERT_TRUE(engine.add_request(prompt_of(0), p).ok());
  for (int i = 0; i < 5; ++i) engine.step();  // prefill, then decodes going ahead
  ASSERT_GT(engine.stats().num_steps_ahead, 0);
  ASSERT_TRUE(engine.add_request(prompt_of(1), p).ok());
  // The step in flight is collected, nothing else goes ahead (a prompt waits), and the next
  // step admits the late prompt.
  const int64_t ahead = engine.stats().num_steps_ahead;
  engine.step();
  EXPECT_EQ(engine.stats().num_steps_ahead, ahead);
  EXPECT_EQ(engine.scheduler().waiting().size(), 1u);
  const int64_t prefills = engine.stats().num_prefill_steps;
  engine.step();
  EXPECT_EQ(engine.stats().num_prefill_steps, prefills + 1);
  EXPECT_TRUE(engine.scheduler().waiting().empty());
  std::map<int64_t, RequestOutput> outputs;
  while (!engine.is_finished())
    for (RequestOutput& out : engine.step()) outputs.emplace(out.seq_id, std::move(out));
  ASSERT_EQ(outputs.size(), 2u);
  for (const auto& [id, out] : outputs)
    EXPECT_EQ(out.completion_token_ids,
              reference_completion(id, prompt_of(static_cast<int>(id)), 30, true, c.eos_token_ids,
                                   c.max_model_len, kVocab));
  EXPECT_EQ(engine.block_manager().num_free_blocks(), c.num_kvcache_blocks);
}

}  // namespace
}  // namespace nanovllm
