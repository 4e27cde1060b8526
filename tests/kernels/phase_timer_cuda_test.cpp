// The benchmark's phase timer on CUDA when the context fails under it: a PhaseScope's end runs
// in a destructor, so a failed event record must not throw there (std::terminate would kill
// the rank before it could report); collect() reports it instead and the timer starts over.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>

#include "kernels/check.h"
#include "kernels/phase_timer.h"
#include "tests/kernels/cuda_test_util.h"

namespace nanovllm::test {
namespace {

static_assert(noexcept(std::declval<PhaseTimer&>().end(cudaStream_t{})),
              "PhaseScope's destructor calls end: it must not throw");

// While it lives, a blocking stream captures in global mode, so work on the legacy stream, which
// would depend on it implicitly, is refused (cudaErrorStreamCaptureImplicit, not sticky).
class LegacyStreamRefused {
 public:
  LegacyStreamRefused() {
    CUDA_CHECK(cudaStreamCreate(&capturing_));  // blocking: the legacy stream syncs with it
    CUDA_CHECK(cudaStreamBeginCapture(capturing_, cudaStreamCaptureModeGlobal));
  }
  ~LegacyStreamRefused() {
    cudaGraph_t graph = nullptr;
    (void)cudaStreamEndCapture(capturing_, &graph);  // invalidated by the refusal
    if (graph != nullptr) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    cudaStreamDestroy(capturing_);
  }
  LegacyStreamRefused(const LegacyStreamRefused&) = delete;
  LegacyStreamRefused& operator=(const LegacyStreamRefused&) = delete;

 private:
  cudaStream_t capturing_ = nullptr;
};

TEST(PhaseTimerCuda, AFailedClosingRecordIsReportedByCollectNotThrownByTheScope) {
  SKIP_WITHOUT_CUDA();
  cudaEvent_t probe = nullptr;
  CUDA_CHECK(cudaEventCreate(&probe));
  cudaError_t probed = cudaSuccess;
  {
    const LegacyStreamRefused refused;
    probed = cudaEventRecord(probe, nullptr);
  }
  CUDA_CHECK(cudaEventDestroy(probe));
  if (probed == cudaSuccess) GTEST_SKIP() << "this driver accepted the legacy-stream record";

  PhaseTimer timer(Device::kCuda);
  ExecContext ctx;
  ctx.phase_timer = &timer;
  ctx.stream = nullptr;                                               // the legacy stream
  std::optional<PhaseScope> scope(std::in_place, ctx, Phase::kGemm);  // its start: recorded
  {
    const LegacyStreamRefused refused;
    scope.reset();  // its end is refused here, and must not throw
  }
  try {
    timer.collect();
    ADD_FAILURE() << "collect() did not report the failed record";
  } catch (const CheckError& e) {
    EXPECT_NE(std::string(e.what()).find("closing cudaEventRecord failed"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(timer.num_pending(), 0u);
  // The context is healthy (the refusal was not sticky): the timer works again.
  scope.emplace(ctx, Phase::kAttention);
  scope.reset();
  PhaseTimes times{};
  EXPECT_NO_THROW(times = timer.collect());
  EXPECT_EQ(times[static_cast<size_t>(Phase::kGemm)], 0.0);  // the dropped interval's phase
  EXPECT_EQ(timer.num_pending(), 0u);
}

}  // namespace
}  // namespace nanovllm::test
