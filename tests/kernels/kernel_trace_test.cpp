// kernels/kernel_trace.h: the window of decode replays a kernel timeline covers, read from the
// environment (the stamps themselves need a GPU and a build with NANOVLLM_KERNEL_TRACE).
#include "kernels/kernel_trace.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace nanovllm::test {
namespace {

constexpr const char* kSteps = "NANOVLLM_KERNEL_TRACE_STEPS";
constexpr const char* kBatch = "NANOVLLM_KERNEL_TRACE_BATCH";

TEST(KernelTraceWindow, UnsetCoversReplaysEightToElevenOfAnyBatch) {
  unsetenv(kSteps);
  unsetenv(kBatch);
  const kernels::KernelTraceWindow w = kernels::kernel_trace_window();
  EXPECT_EQ(w.first, 8);
  EXPECT_EQ(w.last, 11);
  EXPECT_EQ(w.batch, 0);
}

TEST(KernelTraceWindow, StepsAndBatchAreTakenAsGiven) {
  setenv(kSteps, "4:7", 1);
  setenv(kBatch, "16", 1);
  kernels::KernelTraceWindow w = kernels::kernel_trace_window();
  EXPECT_EQ(w.first, 4);
  EXPECT_EQ(w.last, 7);
  EXPECT_EQ(w.batch, 16);
  setenv(kSteps, "5:5", 1);  // one replay
  w = kernels::kernel_trace_window();
  EXPECT_EQ(w.first, 5);
  EXPECT_EQ(w.last, 5);
  unsetenv(kSteps);
  unsetenv(kBatch);
}

TEST(KernelTraceWindow, AWindowThatIsNoRangeOrABatchThatIsNoCountFailsNamingTheVariable) {
  const auto fails_naming = [](const char* var, const char* value) {
    setenv(var, value, 1);
    try {
      kernels::kernel_trace_window();
      ADD_FAILURE() << var << "=" << value << " was taken";
    } catch (const std::invalid_argument& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::string(var) + "=" + value), std::string::npos) << m;
    }
    unsetenv(var);
  };
  fails_naming(kSteps, "7:4");  // last before first
  fails_naming(kSteps, "8");    // no range
  fails_naming(kSteps, "-1:3");
  fails_naming(kBatch, "16a");
  fails_naming(kBatch, "-2");
}

}  // namespace
}  // namespace nanovllm::test
