// skinny_gemm (the decode-size GEMM) against the CPU reference kernels::cpu::linear, for every
// config skinny_gemm_configs offers and every kernel variant (rows x warps x cluster), every
// element checked and y's row padding left poisoned (tests/kernels/gemm_case.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "kernels/activation.h"
#include "kernels/linear.h"
#include "kernels/skinny_gemm.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/gemm_case.h"

namespace nanovllm::test {
namespace {

using kernels::SkinnyGemmConfig;

using Problem = GemmProblem;
using Case = GemmCase;
using DeviceCase = GemmDeviceCase;

// One config on a problem's device buffers: the activation fused into the input where the
// problem says so.
void run(const DeviceCase& d, const SkinnyGemmConfig& cfg, cudaStream_t stream) {
  if (d.c.p.silu_mul)
    kernels::cuda::skinny_gemm_silu_mul(d.y(), d.x(), d.w(), d.bias(), cfg, stream);
  else
    kernels::cuda::skinny_gemm(d.y(), d.x(), d.w(), d.bias(), cfg, stream);
  CUDA_CHECK(cudaGetLastError());
}

// Runs each config on one problem and checks it (y poisoned before each run).
void check_configs(const Problem& p, const std::vector<SkinnyGemmConfig>& configs) {
  ASSERT_FALSE(configs.empty()) << describe_gemm(p, SkinnyGemmConfig{});
  const Case c(p);
  const DeviceCase d(c);
  for (const SkinnyGemmConfig& cfg : configs) {
    d.poison_y();
    run(d, cfg, nullptr);
    expect_gemm_matches(c, d.dy.host(), describe_gemm(p, cfg));
  }
}

void check_offered_configs(const Problem& p) {
  check_configs(p, kernels::skinny_gemm_configs(p.m, p.n, p.k, p.silu_mul));
}

// Every kernel variant, whether or not the heuristic would offer it (launched with PDL too,
// for one row count: the launch differs, the kernel does not).
std::vector<SkinnyGemmConfig> every_variant() {
  std::vector<SkinnyGemmConfig> out;
  for (int rows : {16, 32, 64})
    for (int warps : {4, 8})
      for (int cluster : {1, 2, 4, 8}) {
        out.push_back({rows, warps, cluster});
        if (rows == 32) out.push_back({rows, warps, cluster, true});
      }
  return out;
}

constexpr int64_t kTokens[] = {1, 2, 3, 7, 8, 9, 16, 17, 33, 64};

TEST(SkinnyGemmConfigs, OfferedForDecodeSizesOnly) {
  // Host-only: runs without a GPU.
  for (int64_t m : kTokens)
    for (auto [n, k] : {std::pair<int64_t, int64_t>{4096, 1024},
                        {1024, 2048},
                        {6144, 1024},
                        {1024, 3072},
                        {151936, 1024},
                        {1000, 1024},
                        {4097, 12288},
                        {8, 8}}) {
      ASSERT_TRUE(kernels::skinny_gemm_supports(m, n, k)) << m << " " << n << " " << k;
      const auto configs = kernels::skinny_gemm_configs(m, n, k);
      EXPECT_FALSE(configs.empty()) << m << " " << n << " " << k;
      for (const SkinnyGemmConfig& c : configs) {
        EXPECT_TRUE(c.rows == 16 || c.rows == 32 || c.rows == 64) << c.name();
        EXPECT_TRUE(c.warps == 4 || c.warps == 8) << c.name();
        EXPECT_TRUE(c.cluster == 1 || c.cluster == 2 || c.cluster == 4 || c.cluster == 8)
            << c.name();
      }
    }
  EXPECT_FALSE(kernels::skinny_gemm_supports(65, 1024, 1024));
  EXPECT_FALSE(kernels::skinny_gemm_supports(0, 1024, 1024));
  EXPECT_FALSE(kernels::skinny_gemm_supports(1, 1024, 1020));  // K % 8 != 0
  EXPECT_TRUE(kernels::skinny_gemm_configs(65, 1024, 1024).empty());
}

TEST(SkinnyGemmConfigs, SplitKWhereTheWeightIsSmall) {
  // o_proj of Qwen3-0.6B: 32 blocks of 32 rows would leave most SMs idle.
  bool clustered = false;
  for (const SkinnyGemmConfig& c : kernels::skinny_gemm_configs(1, 1024, 2048))
    clustered |= c.cluster > 1;
  EXPECT_TRUE(clustered);
}

TEST(SkinnyGemmCuda, EveryTokenCountOddNAndK1024) {
  SKIP_WITHOUT_CUDA();
  for (int64_t m : kTokens) check_offered_configs({m, 1000, 1024, false, DType::kBf16, false, 10});
}

TEST(SkinnyGemmCuda, EveryTokenCountNPastATileWithBiasK2048) {
  SKIP_WITHOUT_CUDA();
  for (int64_t m : kTokens) check_offered_configs({m, 4097, 2048, true, DType::kBf16, false, 11});
}

TEST(SkinnyGemmCuda, EveryTokenCountF32OutK3072) {
  SKIP_WITHOUT_CUDA();
  for (int64_t m : kTokens) check_offered_configs({m, 1024, 3072, false, DType::kF32, false, 12});
}

TEST(SkinnyGemmCuda, LongKDownProjection) {
  SKIP_WITHOUT_CUDA();
  for (int64_t m : {1, 9, 33, 64}) {
    check_offered_configs({m, 520, 12288, false, DType::kBf16, false, 13});
    check_offered_configs({m, 130, 12288, true, DType::kF32, false, 14});
  }
}

TEST(SkinnyGemmCuda, ModelShapes) {
  SKIP_WITHOUT_CUDA();
  // Qwen3-0.6B qkv / gate_up and an 8B-sized o_proj, and a slice of the LM head (f32 logits).
  check_offered_configs({4, 4096, 1024, false, DType::kBf16, false, 15});
  check_offered_configs({2, 6144, 1024, false, DType::kBf16, false, 16});
  check_offered_configs({16, 4096, 4096, false, DType::kBf16, false, 17});
  check_offered_configs({8, 15194, 1024, false, DType::kF32, false, 18});
}

TEST(SkinnyGemmCuda, EveryVariantOnTailsOfNAndK) {
  SKIP_WITHOUT_CUDA();
  // K = 200: a partial last chunk (64 k a chunk) and ranks with no chunk at all (cluster 8).
  for (int64_t m : {1, 5, 16, 40, 64})
    for (bool bias : {false, true})
      check_configs({m, 333, 200, bias, bias ? DType::kF32 : DType::kBf16, false,
                     static_cast<uint32_t>(20 + m)},
                    every_variant());
  check_configs({3, 77, 8, true, DType::kBf16, false, 30}, every_variant());     // K = 8
  check_configs({64, 1, 4096, false, DType::kF32, false, 31}, every_variant());  // N = 1
}

TEST(SkinnyGemmCuda, FusedSiluMulInputEqualsSiluAndMulThenLinear) {
  SKIP_WITHOUT_CUDA();
  for (int64_t m : {1, 3, 16, 33, 64}) {
    check_offered_configs({m, 1024, 3072, false, DType::kBf16, true, 40});
    check_offered_configs({m, 1000, 1000, true, DType::kF32, true, 41});
  }
  check_configs({7, 100, 136, false, DType::kBf16, true, 42}, every_variant());
}

TEST(SkinnyGemmCuda, DeterministicAcrossRuns) {
  SKIP_WITHOUT_CUDA();
  const Problem p{9, 4096, 2048, true, DType::kF32, false, 50};
  const Case c(p);
  const DeviceCase d(c);
  for (const SkinnyGemmConfig& cfg : kernels::skinny_gemm_configs(p.m, p.n, p.k)) {
    run(d, cfg, nullptr);
    const auto first = d.dy.host();
    d.poison_y();
    run(d, cfg, nullptr);
    EXPECT_TRUE(first == d.dy.host()) << cfg.name() << ": results differ between two runs";
  }
}

TEST(SkinnyGemmCuda, PdlLaunchWaitsForTheKernelThatWritesX) {
  SKIP_WITHOUT_CUDA();
  // x = silu_and_mul(gate_up) by the activation kernel, then the GEMM launched with PDL right
  // behind it, into a poisoned x each round: reading x before the producer finished would
  // show as NaN or a wrong sum. Eagerly and in a captured graph.
  const Problem p{33, 4097, 3072, true, DType::kBf16, true, 70};
  const Case c(p);  // its reference is silu_and_mul then linear
  const DeviceCase d(c);
  DevVec<uint16_t> act(p.m * p.k);  // [M, K] bf16
  TensorView none;
  none.device = Device::kCuda;
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (SkinnyGemmConfig cfg : kernels::skinny_gemm_configs(p.m, p.n, p.k)) {
    cfg.pdl = true;
    const auto round = [&] {
      CUDA_CHECK(cudaMemsetAsync(act.mem.get(), 0xFF, act.mem.bytes(), stream));
      kernels::cuda::silu_and_mul(act.view(DType::kBf16, {p.m, p.k}), d.x(), stream);
      kernels::cuda::skinny_gemm(d.y(), act.view(DType::kBf16, {p.m, p.k}),
                                 d.dw.view(DType::kBf16, {p.n, p.k}),
                                 d.db.view(DType::kBf16, {p.n}), cfg, stream);
      CUDA_CHECK(cudaGetLastError());
    };
    d.poison_y();
    round();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    expect_gemm_matches(c, d.dy.host(), describe_gemm(p, cfg) + " eager");
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < 3; ++i) round();
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    d.poison_y();
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    expect_gemm_matches(c, d.dy.host(), describe_gemm(p, cfg) + " graph");
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(SkinnyGemmCuda, GraphCaptureReplaysWithNewInputs) {
  SKIP_WITHOUT_CUDA();
  // Two problems with the same shapes and weights but different x: one graph, replayed on
  // each x in turn, must give each one's result.
  const Problem p1{5, 4097, 2048, true, DType::kBf16, false, 60};
  Problem p2 = p1;
  p2.seed = 61;
  const Case c1(p1);
  const Case c2(p2, &c1);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const SkinnyGemmConfig& cfg : kernels::skinny_gemm_configs(p1.m, p1.n, p1.k))
    expect_graph_replays_follow_x(c1, c2, describe_gemm(p1, cfg), stream,
                                  [&](const DeviceCase& d, cudaStream_t s) { run(d, cfg, s); });
  CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace nanovllm::test
