// Rank 0's broadcasting executor: every command reaches the ring and then the local runner,
// and while rank 0 profiles its steps (a phase timer) the commands travel marked eager, so the
// workers run the same ungraphed rows as rank 0 instead of a padded CUDA graph (whose
// collectives would not match rank 0's: tp 2 hung at decode batch 12).
#include "ipc/broadcast_step_executor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "ipc/step_command_serialization.h"
#include "tests/ipc/local_command_ring.h"

namespace nanovllm {
namespace {

// Records what it ran; takes a phase timer only when told to.
class RecordingExecutor final : public StepExecutor {
 public:
  explicit RecordingExecutor(bool times_phases) : times_phases_(times_phases) {}
  StepResult execute(const StepCommand& cmd) override {
    ran.push_back(cmd);
    return {};
  }
  int num_kv_blocks() const override { return 1; }
  bool set_phase_timer(PhaseTimer* timer) override { return times_phases_ || timer == nullptr; }
  std::vector<StepCommand> ran;

 private:
  bool times_phases_;
};

// The command the worker reads next.
StepCommand next_command(test::LocalCommandRing& ring) {
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(ring.reader->read(bytes));
  return decode_step_command(bytes);
}

StepCommand decode_step(uint64_t id) {
  StepCommand c;
  c.kind = StepKind::kDecode;
  c.step_id = id;
  c.input_ids = {5, 6, 7};
  c.positions = {10, 20, 30};
  c.slot_mapping = {10, 20, 30};
  c.context_lens = {11, 21, 31};
  c.block_table_width = 1;
  c.block_tables = {0, 1, 2};
  c.logits_indices = {0, 1, 2};
  c.sample_slots = {0, 1, 2};
  return c;
}

// Any non-null timer will do: the executors under test only pass it on.
PhaseTimer* some_timer() {
  static int anything = 0;
  return reinterpret_cast<PhaseTimer*>(&anything);
}

TEST(BroadcastStepExecutor, CommandsTravelEagerExactlyWhileAPhaseTimerIsSet) {
  test::LocalCommandRing ring;
  auto local = std::make_unique<RecordingExecutor>(true);
  RecordingExecutor* ran = local.get();
  BroadcastStepExecutor exec(std::move(local), *ring.writer);

  exec.execute(decode_step(1));
  ASSERT_TRUE(exec.set_phase_timer(some_timer()));
  exec.execute(decode_step(2));
  ASSERT_TRUE(exec.set_phase_timer(nullptr));
  exec.execute(decode_step(3));

  const bool expected[] = {false, true, false};
  ASSERT_EQ(ran->ran.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const StepCommand sent = next_command(ring);
    EXPECT_EQ(sent.step_id, static_cast<uint64_t>(i + 1));
    EXPECT_EQ(sent.eager, expected[i]) << "step " << i + 1 << " on the ring";
    EXPECT_EQ(sent.input_ids, decode_step(1).input_ids);
    EXPECT_EQ(ran->ran[i].eager, expected[i]) << "step " << i + 1 << " run locally";
  }
  EXPECT_EQ(exec.commands_sent(), 3u);
}

TEST(BroadcastStepExecutor, ARunnerThatCannotTimePhasesLeavesTheCommandsGraphed) {
  test::LocalCommandRing ring;
  BroadcastStepExecutor exec(std::make_unique<RecordingExecutor>(false), *ring.writer);
  EXPECT_FALSE(exec.set_phase_timer(some_timer()));
  exec.execute(decode_step(1));
  EXPECT_FALSE(next_command(ring).eager);
}

}  // namespace
}  // namespace nanovllm
