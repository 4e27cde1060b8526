// plan_gpu_memory: the KV-cache budget arithmetic, checked against sums worked out by hand.
#include "rank/gpu_memory_budget.h"

#include <gtest/gtest.h>

namespace nanovllm {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kMiB = uint64_t{1} << 20;

// An 80 GiB GPU; we hold weights 16 + activations 4 + cuBLAS 32 MiB; someone else 2 GiB
// (context included), so free = 80 - 2 - 16 - 4 - 1/32 GiB.
GpuMemoryMeasurements typical() {
  GpuMemoryMeasurements m;
  m.total_bytes = 80 * kGiB;
  m.weights_bytes = 16 * kGiB;
  m.activation_held_bytes = 4 * kGiB;
  m.activation_transient_bytes = 1 * kGiB;
  m.cublas_workspace_bytes = 32 * kMiB;
  m.cuda_graph_bytes = 256 * kMiB;
  m.free_bytes = m.total_bytes - 2 * kGiB - m.weights_bytes - m.activation_held_bytes -
                 m.cublas_workspace_bytes;
  m.kv_block_bytes = 28 * kMiB;
  m.gpu_memory_utilization = 0.9;
  return m;
}

TEST(GpuMemoryBudget, KvCacheGetsUtilizationMinusOthersAndOwnPeak) {
  const GpuMemoryMeasurements m = typical();
  const GpuMemoryBudget b = plan_gpu_memory(m);
  ASSERT_TRUE(b.ok()) << b.error;
  // 72 GiB budget - 2 other - (16 + 4 + 1 + 1/32 + 1/4) own = 48.71875 GiB.
  EXPECT_EQ(b.budget_bytes, 72 * kGiB);
  EXPECT_EQ(b.other_bytes, 2 * kGiB);
  EXPECT_EQ(b.own_peak_bytes, 21 * kGiB + 288 * kMiB);
  EXPECT_EQ(b.kv_cache_bytes, static_cast<int64_t>(49 * kGiB - 288 * kMiB));
  // 49888 MiB / 28 MiB = 1781.7 -> 1781 whole blocks.
  EXPECT_EQ(b.num_blocks, 1781);
}

TEST(GpuMemoryBudget, OtherProcessesShrinkTheCacheByWhatTheyHold) {
  GpuMemoryMeasurements m = typical();
  const int64_t before = plan_gpu_memory(m).kv_cache_bytes;
  m.free_bytes -= 10 * kGiB;  // another process took 10 GiB
  const GpuMemoryBudget b = plan_gpu_memory(m);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.other_bytes, 12 * kGiB);
  EXPECT_EQ(b.kv_cache_bytes, before - static_cast<int64_t>(10 * kGiB));
}

TEST(GpuMemoryBudget, HeldTermsAboveTheMeasuredUseCountNoOtherProcess) {
  GpuMemoryMeasurements m = typical();
  m.free_bytes = m.total_bytes - 10 * kGiB;  // less used than we claim to hold (skew)
  const GpuMemoryBudget b = plan_gpu_memory(m);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.other_bytes, 0u);
}

TEST(GpuMemoryBudget, NoRoomIsAnErrorNamingEveryTerm) {
  GpuMemoryMeasurements m = typical();
  m.gpu_memory_utilization = 0.25;  // 20 GiB < 2 other + 21.28 own
  const GpuMemoryBudget b = plan_gpu_memory(m);
  EXPECT_FALSE(b.ok());
  EXPECT_EQ(b.num_blocks, 0);
  EXPECT_LT(b.kv_cache_bytes, 0);
  EXPECT_NE(b.error.find("20.00 GiB budget"), std::string::npos) << b.error;
  EXPECT_NE(b.error.find("other processes + CUDA context 2.00 GiB"), std::string::npos) << b.error;
  EXPECT_NE(b.error.find("weights 16.00 GiB"), std::string::npos) << b.error;
  EXPECT_NE(b.error.find("cuBLAS workspace 0.03 GiB"), std::string::npos) << b.error;
  EXPECT_NE(b.error.find("CUDA graphs 0.25 GiB"), std::string::npos) << b.error;
}

TEST(GpuMemoryBudget, LessThanOneBlockLeftIsAnError) {
  GpuMemoryMeasurements m = typical();
  const GpuMemoryBudget fits = plan_gpu_memory(m);
  ASSERT_TRUE(fits.ok());
  m.kv_block_bytes = static_cast<uint64_t>(fits.kv_cache_bytes) + 1;  // one byte too large
  EXPECT_FALSE(plan_gpu_memory(m).ok());
  m.kv_block_bytes = static_cast<uint64_t>(fits.kv_cache_bytes);  // exactly one block
  const GpuMemoryBudget one = plan_gpu_memory(m);
  ASSERT_TRUE(one.ok()) << one.error;
  EXPECT_EQ(one.num_blocks, 1);
}

TEST(GpuMemoryBudget, UtilizationOutsideZeroToOneIsRejected) {
  for (double u : {0.0, -0.5, 1.01}) {
    GpuMemoryMeasurements m = typical();
    m.gpu_memory_utilization = u;
    const GpuMemoryBudget b = plan_gpu_memory(m);
    EXPECT_FALSE(b.ok()) << u;
    EXPECT_NE(b.error.find("gpu_memory_utilization"), std::string::npos);
  }
}

TEST(GpuMemoryBudget, ImplausibleFiguresAreRejected) {
  GpuMemoryMeasurements m = typical();
  m.free_bytes = m.total_bytes + 1;
  EXPECT_FALSE(plan_gpu_memory(m).ok());
  m = typical();
  m.kv_block_bytes = 0;
  EXPECT_FALSE(plan_gpu_memory(m).ok());
}

TEST(GpuMemoryBudget, FormatsGibWithTwoDecimals) {
  EXPECT_EQ(format_gib(1.5 * kGiB), "1.50 GiB");
  EXPECT_EQ(format_gib(-0.25 * kGiB), "-0.25 GiB");
  EXPECT_EQ(format_gib(0), "0.00 GiB");
}

}  // namespace
}  // namespace nanovllm
