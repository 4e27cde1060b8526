// The benchmark's phase timer on the CPU (host clock): a PhaseScope without a timer in the
// ExecContext records nothing; with one, each scope adds its duration to its phase; nested
// scopes count once, in the outer phase; collect() sums and starts over.
#include "kernels/phase_timer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace nanovllm {
namespace {

using namespace std::chrono_literals;

size_t index(Phase p) {
  return static_cast<size_t>(p);
}

TEST(PhaseTimer, ScopeWithoutATimerRecordsNothing) {
  PhaseTimer timer(Device::kCpu);
  ExecContext ctx;  // phase_timer == nullptr: what every ordinary step runs with
  for (int i = 0; i < 1000; ++i) {
    const PhaseScope scope(ctx, Phase::kGemm);
  }
  EXPECT_EQ(timer.num_pending(), 0u);
  const PhaseTimes times = timer.collect();
  for (const double ms : times) EXPECT_EQ(ms, 0.0);
}

TEST(PhaseTimer, ScopesAddTheirDurationToTheirPhase) {
  PhaseTimer timer(Device::kCpu);
  ExecContext ctx;
  ctx.phase_timer = &timer;
  for (int i = 0; i < 2; ++i) {
    const PhaseScope scope(ctx, Phase::kAttention);
    std::this_thread::sleep_for(5ms);
  }
  {
    const PhaseScope scope(ctx, Phase::kSampling);
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_EQ(timer.num_pending(), 3u);
  const PhaseTimes times = timer.collect();
  EXPECT_GE(times[index(Phase::kAttention)], 10.0);
  EXPECT_GE(times[index(Phase::kSampling)], 2.0);
  EXPECT_LT(times[index(Phase::kSampling)], times[index(Phase::kAttention)]);
  EXPECT_EQ(times[index(Phase::kGemm)], 0.0);
  EXPECT_EQ(times[index(Phase::kElementwise)], 0.0);
  EXPECT_EQ(times[index(Phase::kAllReduce)], 0.0);

  // collect() started over; the intervals are reused.
  EXPECT_EQ(timer.num_pending(), 0u);
  {
    const PhaseScope scope(ctx, Phase::kGemm);
    std::this_thread::sleep_for(1ms);
  }
  const PhaseTimes again = timer.collect();
  EXPECT_GE(again[index(Phase::kGemm)], 1.0);
  EXPECT_EQ(again[index(Phase::kAttention)], 0.0);
}

TEST(PhaseTimer, NestedScopesCountOnceInTheOuterPhase) {
  PhaseTimer timer(Device::kCpu);
  ExecContext ctx;
  ctx.phase_timer = &timer;
  {
    const PhaseScope outer(ctx, Phase::kAllReduce);
    const PhaseScope inner(ctx, Phase::kGemm);  // a no-op: the all-reduce is open
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_EQ(timer.num_pending(), 1u);
  const PhaseTimes times = timer.collect();
  EXPECT_GE(times[index(Phase::kAllReduce)], 2.0);
  EXPECT_EQ(times[index(Phase::kGemm)], 0.0);
}

TEST(PhaseTimer, NamesAreTheBenchmarkJsonKeys) {
  EXPECT_STREQ(phase_name(Phase::kAttention), "attention");
  EXPECT_STREQ(phase_name(Phase::kGemm), "gemm");
  EXPECT_STREQ(phase_name(Phase::kElementwise), "elementwise");
  EXPECT_STREQ(phase_name(Phase::kAllReduce), "all_reduce");
  EXPECT_STREQ(phase_name(Phase::kSampling), "sampling");
  EXPECT_STREQ(phase_name(Phase::kLogitsGather), "logits_gather");
}

}  // namespace
}  // namespace nanovllm
