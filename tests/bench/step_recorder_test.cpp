// The benchmark's recording executor: each command the engine's step builder makes becomes
// the limit model's Step (new tokens and context per sequence, logits rows), the command is
// forwarded unchanged, and the instrumentation queries reach the wrapped executor.
#include "bench/step_recorder.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/sequence.h"
#include "engine/step_builder.h"

namespace nanovllm::bench {
namespace {

constexpr int kBlockSize = 4;

// Answers every logits row with token 7 and reports a fixed timing when asked to time.
class FakeExecutor final : public StepExecutor {
 public:
  StepResult execute(const StepCommand& cmd) override {
    kinds.push_back(cmd.kind);
    if (cmd.kind == StepKind::kExit) return {};
    return StepResult{std::vector<int32_t>(cmd.logits_indices.size(), 7)};
  }
  int num_kv_blocks() const override { return 12; }
  bool set_step_timing(bool on) override {
    timing_on = on;
    return true;
  }
  std::optional<StepTiming> last_step_timing() const override {
    if (!timing_on) return std::nullopt;
    return StepTiming{2.5, 0.5};
  }
  std::vector<StepKind> kinds;
  bool timing_on = false;
};

// Sequence with `cached` leading tokens already in the cache and blocks 0.. assigned.
std::unique_ptr<Sequence> seq_of(int64_t id, int prompt_len, int cached) {
  std::vector<int32_t> prompt(static_cast<size_t>(prompt_len), 5);
  SamplingParams params;
  params.seed = 1;  // the engine resolves every seed before a command is built
  auto s = std::make_unique<Sequence>(id, prompt, params, kBlockSize);
  s->num_cached_tokens = s->num_computed_tokens = cached;
  for (int b = 0; b < s->num_blocks(); ++b)
    s->block_table.push_back(static_cast<int32_t>(10 * id + b));
  return s;
}

TEST(BenchStepRecorder, PrefillStepCountsNewTokensAndWholeContext) {
  auto a = seq_of(0, 10, 0), b = seq_of(1, 9, 8);  // b: two cached blocks, one new token
  const std::vector<Sequence*> seqs{a.get(), b.get()};
  SamplingSlots slots(2);
  const Step step = step_of(build_prefill_command(seqs, kBlockSize, slots, {}));
  ASSERT_EQ(step.seqs.size(), 2u);
  EXPECT_EQ(step.seqs[0].new_tokens, 10);
  EXPECT_EQ(step.seqs[0].context_len, 10);
  EXPECT_EQ(step.seqs[1].new_tokens, 1);
  EXPECT_EQ(step.seqs[1].context_len, 9);
  EXPECT_EQ(step.num_tokens(), 11);
  EXPECT_EQ(step.num_logits, 2);
}

TEST(BenchStepRecorder, DecodeStepIsOneTokenPerSequenceAtItsContext) {
  auto a = seq_of(0, 6, 0), b = seq_of(1, 13, 0), c = seq_of(2, 1, 0);
  const std::vector<Sequence*> seqs{a.get(), b.get(), c.get()};
  for (int i = 0; i < 3; ++i) seqs[i]->sampling_slot = i;  // taken at their prefill
  const Step step = step_of(build_decode_command(seqs, kBlockSize));
  ASSERT_EQ(step.seqs.size(), 3u);
  const int64_t contexts[] = {6, 13, 1};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(step.seqs[i].new_tokens, 1);
    EXPECT_EQ(step.seqs[i].context_len, contexts[i]);
  }
  EXPECT_EQ(step.num_logits, 3);
}

TEST(BenchStepRecorder, ForwardsCommandsAndRecordsEachStep) {
  auto owned = std::make_unique<FakeExecutor>();
  FakeExecutor& fake = *owned;
  StepRecorder recorder(std::move(owned));
  EXPECT_EQ(recorder.num_kv_blocks(), 12);
  EXPECT_FALSE(recorder.last_step_timing().has_value());

  auto a = seq_of(0, 5, 0);
  const std::vector<Sequence*> seqs{a.get()};
  SamplingSlots slots(1);
  EXPECT_EQ(recorder.execute(build_prefill_command(seqs, kBlockSize, slots, {})).sampled_token_ids,
            std::vector<int32_t>{7});
  ASSERT_TRUE(recorder.set_step_timing(true));
  a->append_token(7);
  recorder.execute(build_decode_command(seqs, kBlockSize));
  recorder.execute(StepCommand{});  // EXIT goes through but is no step

  ASSERT_EQ(fake.kinds.size(), 3u);
  EXPECT_EQ(fake.kinds[2], StepKind::kExit);
  const std::vector<RecordedStep> steps = recorder.take_steps();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_TRUE(steps[0].prefill);
  EXPECT_FALSE(steps[0].timing.has_value());  // timing was still off
  EXPECT_EQ(steps[0].step.seqs[0].new_tokens, 5);
  EXPECT_FALSE(steps[1].prefill);
  ASSERT_TRUE(steps[1].timing.has_value());
  EXPECT_DOUBLE_EQ(steps[1].timing->gpu_ms, 2.5);
  EXPECT_EQ(steps[1].step.seqs[0].context_len, 6);
  EXPECT_GE(steps[1].host_s, 0.0);
  EXPECT_TRUE(recorder.take_steps().empty());  // taken
}

// Async scheduling: two steps launched before the first is collected. Each is recorded at its
// launch in launch order; its timing is the executor's at its collect, and last_collected()
// names the one collected last, not the one launched last.
TEST(BenchStepRecorder, LaunchedStepsGetTheirTimingWhenCollected) {
  auto owned = std::make_unique<FakeExecutor>();
  FakeExecutor& fake = *owned;
  StepRecorder recorder(std::move(owned));
  ASSERT_TRUE(recorder.set_step_timing(true));
  auto a = seq_of(0, 5, 0);
  a->sampling_slot = 0;
  const std::vector<Sequence*> seqs{a.get()};
  recorder.launch(build_decode_command(seqs, kBlockSize));
  a->append_token(7);
  recorder.launch(build_decode_command(seqs, kBlockSize));
  ASSERT_EQ(recorder.steps().size(), 2u);
  EXPECT_FALSE(recorder.steps()[0].timing.has_value());  // not collected yet
  EXPECT_EQ(recorder.collect().sampled_token_ids, std::vector<int32_t>{7});
  EXPECT_EQ(recorder.last_collected().step.seqs[0].context_len, 5);
  ASSERT_TRUE(recorder.steps()[0].timing.has_value());
  EXPECT_FALSE(recorder.steps()[1].timing.has_value());
  recorder.collect();
  EXPECT_EQ(recorder.last_collected().step.seqs[0].context_len, 6);
  EXPECT_DOUBLE_EQ(recorder.steps()[1].timing->gpu_ms, 2.5);
  EXPECT_EQ(fake.kinds.size(), 2u);
  EXPECT_EQ(recorder.take_steps().size(), 2u);
}

TEST(BenchStepRecorder, DefaultInstrumentationIsOffAndSaysSo) {
  // An executor that implements none of the optional queries (the port's defaults).
  class Bare final : public StepExecutor {
   public:
    StepResult execute(const StepCommand&) override { return {}; }
    int num_kv_blocks() const override { return 1; }
  };
  StepRecorder recorder(std::make_unique<Bare>());
  EXPECT_FALSE(recorder.set_step_timing(true));
  EXPECT_TRUE(recorder.set_step_timing(false));
  EXPECT_FALSE(recorder.set_phase_timer(reinterpret_cast<PhaseTimer*>(&recorder)));
  EXPECT_TRUE(recorder.set_phase_timer(nullptr));
  EXPECT_FALSE(recorder.startup_timing().has_value());
  EXPECT_FALSE(recorder.last_step_timing().has_value());
}

}  // namespace
}  // namespace nanovllm::bench
