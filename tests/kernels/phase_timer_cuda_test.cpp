// The benchmark's phase timer on CUDA when the context fails under it: a PhaseScope's end runs
// in a destructor, so a failed event record must not throw there (std::terminate would kill
// the rank before it could report); collect() reports it instead and the timer starts over.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "kernels/check.h"
#include "kernels/phase_timer.h"
#include "tests/kernels/cuda_test_util.h"

namespace nanovllm::test {
namespace {

static_assert(noexcept(std::declval<PhaseTimer&>().end(cudaStream_t{})),
              "PhaseScope's destructor calls end: it must not throw");

// While a blocking stream captures in global mode, work on the legacy stream would depend on
// it implicitly and is refused (cudaErrorStreamCaptureImplicit, not a sticky error).
cudaError_t record_on_legacy_while_capturing(cudaEvent_t event) {
  cudaStream_t capturing = nullptr;
  CUDA_CHECK(cudaStreamCreate(&capturing));  // blocking: the legacy stream syncs with it
  CUDA_CHECK(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeGlobal));
  const cudaError_t refused = cudaEventRecord(event, nullptr);
  cudaGraph_t graph = nullptr;
  (void)cudaStreamEndCapture(capturing, &graph);  // the capture was invalidated
  if (graph != nullptr) cudaGraphDestroy(graph);
  (void)cudaGetLastError();
  CUDA_CHECK(cudaStreamDestroy(capturing));
  return refused;
}

TEST(PhaseTimerCuda, AFailedClosingRecordIsReportedByCollectNotThrownByTheScope) {
  SKIP_WITHOUT_CUDA();
  cudaEvent_t probe = nullptr;
  CUDA_CHECK(cudaEventCreate(&probe));
  const cudaError_t probed = record_on_legacy_while_capturing(probe);
  CUDA_CHECK(cudaEventDestroy(probe));
  if (probed == cudaSuccess) GTEST_SKIP() << "this driver accepted the legacy-stream record";

  PhaseTimer timer(Device::kCuda);
  ExecContext ctx;
  ctx.phase_timer = &timer;
  ctx.stream = nullptr;  // the legacy stream
  cudaStream_t capturing = nullptr;
  CUDA_CHECK(cudaStreamCreate(&capturing));
  {
    const PhaseScope scope(ctx, Phase::kGemm);  // its start is recorded before the capture
    CUDA_CHECK(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeGlobal));
  }  // its end is refused here, and must not throw
  cudaGraph_t graph = nullptr;
  (void)cudaStreamEndCapture(capturing, &graph);
  if (graph != nullptr) cudaGraphDestroy(graph);
  (void)cudaGetLastError();
  CUDA_CHECK(cudaStreamDestroy(capturing));

  try {
    timer.collect();
    ADD_FAILURE() << "collect() did not report the failed record";
  } catch (const CheckError& e) {
    EXPECT_NE(std::string(e.what()).find("closing cudaEventRecord failed"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(timer.num_pending(), 0u);
  // The context is healthy (the refusal was not sticky): the timer works again.
  { const PhaseScope scope(ctx, Phase::kAttention); }
  PhaseTimes times{};
  EXPECT_NO_THROW(times = timer.collect());
  EXPECT_EQ(times[static_cast<size_t>(Phase::kGemm)], 0.0);  // the dropped interval's phase
  EXPECT_EQ(timer.num_pending(), 0u);
}

}  // namespace
}  // namespace nanovllm::test
