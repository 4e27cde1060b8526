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

TEST(GpuProbe, ProbeReturnsANonNegativeCountWithoutCuda) {
  const int n = nvml_device_count();
  EXPECT_GE(n, 0);
  EXPECT_LE(visible_gpu_count(), n);
}

}  // namespace
}  // namespace nanovllm
