// kernels/graph_launch_order.h: in a captured graph, the kernel of ours behind a cuBLAS GEMM
// gets the GEMM's launch-order port, and still reads the GEMM's output only once it is complete.
// The GEMM is slow on purpose (K = 8192, ~10 us) and its output zeroed before it in the graph,
// so a norm reading y early would normalise zeros (or a part of the product) and miss the CPU
// reference by far more than rounding.
#include <cublas_v2.h>
#include <gtest/gtest.h>

#include "kernels/graph_launch_order.h"
#include "kernels/linear.h"
#include "kernels/rms_norm.h"
#include "tests/kernels/cuda_test_util.h"

namespace nanovllm::test {
namespace {

constexpr int64_t kTokens = 256;  // cuBLAS's size (linear.cu's decode kernels stop at 64)
constexpr int64_t kHidden = 2048, kIn = 8192;
constexpr float kEps = 1e-6f;

struct Rig {
  Rig() {
    CUBLAS_CHECK(cublasCreate(&cublas));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasSetStream(cublas, stream));
    ctx.stream = stream;
    ctx.cublas = cublas;
  }
  ~Rig() {
    cublasDestroy(cublas);
    cudaStreamDestroy(stream);
  }
  cublasHandle_t cublas = nullptr;
  cudaStream_t stream = nullptr;
  ExecContext ctx;
};

// y = x w^T zeroed first, then the GEMM, then out1 = rms_norm(y), out2 = rms_norm(out1): one
// edge from cuBLAS into our kernel, one between two of ours.
void step(const Rig& rig, const DevVec<uint16_t>& x, const DevVec<uint16_t>& w,
          const DevVec<uint16_t>& g, const DevVec<uint16_t>& y, const DevVec<uint16_t>& out1,
          const DevVec<uint16_t>& out2) {
  TensorView none;
  none.device = Device::kCuda;
  CUDA_CHECK(cudaMemsetAsync(y.mem.get(), 0, y.mem.bytes(), rig.stream));
  const TensorView vy = y.view(DType::kBf16, {kTokens, kHidden});
  const TensorView vg = g.view(DType::kBf16, {kHidden});
  const TensorView v1 = out1.view(DType::kBf16, {kTokens, kHidden});
  kernels::cuda::linear(vy, x.view(DType::kBf16, {kTokens, kIn}),
                        w.view(DType::kBf16, {kHidden, kIn}), none, rig.ctx);
  kernels::cuda::rms_norm(v1, vy, vg, kEps, rig.stream);
  kernels::cuda::rms_norm(out2.view(DType::kBf16, {kTokens, kHidden}), v1, vg, kEps, rig.stream);
}

TEST(GraphLaunchOrder, TheNormBehindCublasLaunchesAtItsStartAndStillReadsTheWholeProduct) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(7);
  auto hx = random_bf16(kTokens * kIn, rng);
  auto hw = random_bf16(kHidden * kIn, rng, -0.05f, 0.05f);
  auto hg = random_bf16(kHidden, rng, 0.5f, 1.5f);
  // The CPU reference of both norms, from the CPU GEMM.
  std::vector<uint16_t> ry(kTokens * kHidden), r1(ry.size()), r2(ry.size());
  const TensorView none;
  kernels::cpu::linear(host_view(ry.data(), DType::kBf16, {kTokens, kHidden}),
                       host_view(hx.data(), DType::kBf16, {kTokens, kIn}),
                       host_view(hw.data(), DType::kBf16, {kHidden, kIn}), none, 4);
  const TensorView rg = host_view(hg.data(), DType::kBf16, {kHidden});
  kernels::cpu::rms_norm(host_view(r1.data(), DType::kBf16, {kTokens, kHidden}),
                         host_view(ry.data(), DType::kBf16, {kTokens, kHidden}), rg, kEps);
  kernels::cpu::rms_norm(host_view(r2.data(), DType::kBf16, {kTokens, kHidden}),
                         host_view(r1.data(), DType::kBf16, {kTokens, kHidden}), rg, kEps);

  Rig rig;
  DevVec<uint16_t> x(hx), w(hw), g(hg), y(ry.size()), out1(ry.size()), out2(ry.size());
  step(rig, x, w, g, y, out1, out2);  // eager first: cuBLAS's first call may set itself up
  CUDA_CHECK(cudaStreamSynchronize(rig.stream));

  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(rig.stream, cudaStreamCaptureModeThreadLocal));
  step(rig, x, w, g, y, out1, out2);
  CUDA_CHECK(cudaStreamEndCapture(rig.stream, &graph));
  // cuBLAS -> the first norm moves; memset -> cuBLAS (plain) and norm -> norm (ours) stay.
  EXPECT_EQ(kernels::launch_dependents_at_library_kernel_start(graph), 1);
  EXPECT_EQ(kernels::launch_dependents_at_library_kernel_start(graph), 0);  // nothing left
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphDestroy(graph));
  for (int launch = 0; launch < 20; ++launch) {
    out1.mem.poison();
    out2.mem.poison();
    CUDA_CHECK(cudaGraphLaunch(exec, rig.stream));
    CUDA_CHECK(cudaStreamSynchronize(rig.stream));
    const ErrorStats e1 = compare_bf16(out1.host(), r1), e2 = compare_bf16(out2.host(), r2);
    EXPECT_TRUE(e1.finite && e2.finite) << "launch " << launch;
    EXPECT_LT(e1.rel_l2, 1e-2) << "launch " << launch;
    EXPECT_LT(e2.rel_l2, 1e-2) << "launch " << launch;
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
}

}  // namespace
}  // namespace nanovllm::test
