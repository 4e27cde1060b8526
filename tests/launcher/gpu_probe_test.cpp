// GPU detection: CUDA_VISIBLE_DEVICES filtering of NVML's count, and the probe itself never
// fails (0 without a driver).
#include "launcher/gpu_probe.h"

#include <gtest/gtest.h>

namespace nanovllm {
namespace {

TEST(GpuProbe, CudaVisibleDevicesFiltersTheNvmlCount) {
  EXPECT_EQ(visible_gpu_count(4, std::nullopt), 4);
  EXPECT_EQ(visible_gpu_count(4, std::string("0,1")), 2);
  EXPECT_EQ(visible_gpu_count(4, std::string("3")), 1);
  EXPECT_EQ(visible_gpu_count(4, std::string("")), 0);
  EXPECT_EQ(visible_gpu_count(4, std::string("-1")), 0);
  EXPECT_EQ(visible_gpu_count(2, std::string("0,1,2")), 2);  // more entries than devices
  EXPECT_EQ(visible_gpu_count(0, std::string("0")), 0);
}

// Replica d of --tp t gets visible GPUs d*t ... d*t+t-1, written as CUDA_VISIBLE_DEVICES had
// them (indexes or UUIDs), so inside the replica its ranks bind GPU 0 ... t-1 as with one.
TEST(GpuProbe, ReplicaVisibleDevicesPicksEachReplicasSliceOfTheVisibleOnes) {
  EXPECT_EQ(replica_visible_devices(4, std::nullopt, 0, 1), "0");
  EXPECT_EQ(replica_visible_devices(4, std::nullopt, 3, 1), "3");
  EXPECT_EQ(replica_visible_devices(4, std::nullopt, 1, 2), "2,3");
  EXPECT_EQ(replica_visible_devices(8, std::string("4,5,6,7"), 1, 2), "6,7");
  EXPECT_EQ(replica_visible_devices(2, std::string("GPU-aa,GPU-bb"), 1, 1), "GPU-bb");
  // Past the visible GPUs: nothing (the launcher refuses the run naming the numbers).
  EXPECT_EQ(replica_visible_devices(4, std::nullopt, 2, 2), "");
  EXPECT_EQ(replica_visible_devices(3, std::string("0,1,2,3"), 1, 2), "");
}

TEST(GpuProbe, ProbeReturnsANonNegativeCountWithoutCuda) {
  const int n = nvml_device_count();
  EXPECT_GE(n, 0);
  EXPECT_LE(visible_gpu_count(), n);
}

}  // namespace
}  // namespace nanovllm
