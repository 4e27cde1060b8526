// Rank 0's broadcasting executor: every command reaches the ring and then the local runner,
// and while rank 0 profiles its steps (a phase timer) the commands travel marked eager, so the
// workers run the same ungraphed rows as rank 0 instead of a padded CUDA graph (whose
// collectives would not match rank 0's: tp 2 hung at decode batch 12).
#include "ipc/broadcast_step_executor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "ipc/broadcast_ring.h"
#include "ipc/step_command_serialization.h"

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

// A one-reader ring in this process's memory, with rank 0's writer and a worker's reader.
struct LocalRing {
  static constexpr RingConfig kConfig{.num_readers = 1,
                                      .slot_count = 4,
                                      .slot_bytes = 64 * 1024,
                                      .payload_schema = kStepCommandSchemaVersion};
  LocalRing() : region(ring_region_bytes(kConfig) + 64) {
    base = region.data() + (64 - reinterpret_cast<uintptr_t>(region.data()) % 64) % 64;
    ring_init(base, ring_region_bytes(kConfig), kConfig);
    writer =
        std::make_unique<RingWriter>(base, ring_region_bytes(kConfig), kStepCommandSchemaVersion);
    reader = std::make_unique<RingReader>(base, ring_region_bytes(kConfig),
                                          kStepCommandSchemaVersion, 0);
  }
  StepCommand next() {
    std::vector<uint8_t> bytes;
    EXPECT_TRUE(reader->read(bytes));
    return decode_step_command(bytes);
  }
  std::vector<uint8_t> region;
  void* base = nullptr;
  std::unique_ptr<RingWriter> writer;
  std::unique_ptr<RingReader> reader;
};

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
  LocalRing ring;
  auto local = std::make_unique<RecordingExecutor>(true);
  RecordingExecutor* ran = local.get();
  BroadcastStepExecutor exec(std::move(local), *ring.writer);

  exec.execute(decode_step(1));
  ASSERT_TRUE(exec.set_phase_timer(some_timer()));
  exec.execute(decode_step(2));
  ASSERT_TRUE(exec.set_phase_timer(nullptr));
  exec.execute(decode_step(3));

  const bool expected[] = {false, true, false};
  for (int i = 0; i < 3; ++i) {
    const StepCommand sent = ring.next();
    EXPECT_EQ(sent.step_id, static_cast<uint64_t>(i + 1));
    EXPECT_EQ(sent.eager, expected[i]) << "step " << i + 1 << " on the ring";
    EXPECT_EQ(sent.input_ids, decode_step(1).input_ids);
    ASSERT_EQ(ran->ran.size(), 3u);
    EXPECT_EQ(ran->ran[i].eager, expected[i]) << "step " << i + 1 << " run locally";
  }
  EXPECT_EQ(exec.commands_sent(), 3u);
}

TEST(BroadcastStepExecutor, ARunnerThatCannotTimePhasesLeavesTheCommandsGraphed) {
  LocalRing ring;
  BroadcastStepExecutor exec(std::make_unique<RecordingExecutor>(false), *ring.writer);
  EXPECT_FALSE(exec.set_phase_timer(some_timer()));
  exec.execute(decode_step(1));
  EXPECT_FALSE(ring.next().eager);
}

}  // namespace
}  // namespace nanovllm
