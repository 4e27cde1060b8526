// hopper_gemm (the sm_90a decode GEMM: TMA, wgmma, split-K over a cluster, PDL) against the CPU
// reference kernels::cpu::linear, for every config hopper_gemm_configs offers plus split 1 and
// the largest split of both block heights, on every token tile (16, 32 and 64 tokens); and its
// gate_up form with the activation in the epilogue against the same config's plain GEMM
// followed by silu_and_mul (bit for bit) and against the CPU reference. Every element is
// checked and y's row padding must stay poisoned (tests/kernels/gemm_case.h).
// The GPU tests skip without a device, and where hopper_gemm_supports is false (no sm_90
// device, or a build without sm_90a code: SupportedExactlyOnSm90 fails if an sm_90 one refuses).
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "kernels/activation.h"
#include "kernels/hopper_gemm.h"
#include "kernels/linear.h"
#include "kernels/rms_norm.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/gemm_case.h"

namespace nanovllm::test {
namespace {

using kernels::HopperGemmConfig;

std::string device_arch() {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "unknown device";
  return "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
}

#define SKIP_UNLESS_HOPPER_GEMM()                                                        \
  do {                                                                                   \
    SKIP_WITHOUT_CUDA();                                                                 \
    if (!kernels::hopper_gemm_supports(1, 64, 64))                                       \
      GTEST_SKIP() << "hopper_gemm needs an sm_90 device and an sm_90a build, not this " \
                   << device_arch();                                                     \
  } while (0)

using Problem = GemmProblem;
using Case = GemmCase;
using DeviceCase = GemmDeviceCase;

// One config on a problem's device buffers (x_over: another x of the same shape).
void run(const DeviceCase& d, const HopperGemmConfig& cfg, cudaStream_t stream,
         const TensorView* x_over = nullptr) {
  kernels::cuda::hopper_gemm(d.y(), x_over ? *x_over : d.x(), d.w(), d.bias(), cfg, stream);
  CUDA_CHECK(cudaGetLastError());
}

// The offered configs plus split 1 and the largest split of both block heights.
std::vector<HopperGemmConfig> variants(const Problem& p) {
  std::vector<HopperGemmConfig> out = kernels::hopper_gemm_configs(p.m, p.n, p.k);
  EXPECT_FALSE(out.empty()) << describe_gemm(p, HopperGemmConfig{});
  for (int wg : {1, 2})
    for (int split : {1, kernels::kHopperGemmMaxSplit})
      if (std::find(out.begin(), out.end(), HopperGemmConfig{wg, split}) == out.end())
        out.push_back({wg, split});
  return out;
}

void check_configs(const Problem& p, const std::vector<HopperGemmConfig>& configs) {
  const Case c(p);
  const DeviceCase d(c);
  for (const HopperGemmConfig& cfg : configs) {
    d.poison_y();
    run(d, cfg, nullptr);
    expect_gemm_matches(c, d.dy.host(), describe_gemm(p, cfg));
  }
}

constexpr int64_t kTokens[] = {1, 5, 9, 16, 17, 33, 48, 64};

TEST(HopperGemmConfigs, RefusesSizesOutsideItsRange) {
  // Host-only: false for these whatever the device.
  EXPECT_FALSE(kernels::hopper_gemm_supports(0, 1024, 1024));
  EXPECT_FALSE(kernels::hopper_gemm_supports(65, 1024, 1024));
  EXPECT_FALSE(kernels::hopper_gemm_supports(16, 0, 1024));
  EXPECT_FALSE(kernels::hopper_gemm_supports(16, 1024, 1020));  // K % 8 != 0
  EXPECT_TRUE(kernels::hopper_gemm_configs(65, 1024, 1024).empty());
  EXPECT_TRUE(kernels::hopper_gemm_configs(65, 3072, 1024, true).empty());
}

TEST(HopperGemmConfigs, SupportedExactlyOnSm90WithAnSm90aBuild) {
  SKIP_WITHOUT_CUDA();
#ifdef NANOVLLM_TEST_SM90A
  const bool expected = device_arch() == "sm_90";
#else
  const bool expected = false;
#endif
  EXPECT_EQ(kernels::hopper_gemm_supports(16, 4096, 1024), expected) << "on " << device_arch();
}

TEST(HopperGemmConfigs, SplitKFillsTheGpuOnModelShapesWithTwoStepsPerRank) {
  SKIP_UNLESS_HOPPER_GEMM();
  for (int64_t m : kTokens)
    for (auto [n, k] : {std::pair<int64_t, int64_t>{4096, 1024},
                        {1024, 2048},
                        {6144, 1024},
                        {1024, 3072},
                        {151936, 1024}}) {
      const auto configs = kernels::hopper_gemm_configs(m, n, k);
      ASSERT_FALSE(configs.empty()) << m << " " << n << " " << k;
      for (const HopperGemmConfig& c : configs) {
        EXPECT_TRUE(c.warpgroups == 1 || c.warpgroups == 2) << c.name();
        EXPECT_TRUE(c.split >= 1 && c.split <= kernels::kHopperGemmMaxSplit) << c.name();
        EXPECT_GE((k / 64 + c.split - 1) / c.split, 2) << c.name() << " N=" << n << " K=" << k;
        const int64_t tiles = (n + 64 * c.warpgroups - 1) / (64 * c.warpgroups);
        EXPECT_TRUE(c.split == 1 || tiles * c.split <= 2 * 132) << c.name() << " N=" << n;
      }
      if (n == 1024) {  // 8 or 16 tiles: a split is what fills the GPU
        EXPECT_GT(configs.front().split, 1) << "M=" << m << " N=1024 K=" << k;
      }
    }
}

TEST(HopperGemmCuda, EveryTokenTileSmallWeightN256K512) {
  SKIP_UNLESS_HOPPER_GEMM();
  for (int64_t m : kTokens)
    check_configs({m, 256, 512, false, DType::kBf16, false, 10}, variants({m, 256, 512}));
}

TEST(HopperGemmCuda, EveryTokenTileOProjN1024K2048WithBias) {
  SKIP_UNLESS_HOPPER_GEMM();
  for (int64_t m : kTokens)
    check_configs({m, 1024, 2048, true, DType::kBf16, false, 11}, variants({m, 1024, 2048}));
}

TEST(HopperGemmCuda, EveryTokenTileQkvN4096K1024F32Out) {
  SKIP_UNLESS_HOPPER_GEMM();
  for (int64_t m : kTokens)
    check_configs({m, 4096, 1024, false, DType::kF32, false, 12}, variants({m, 4096, 1024}));
}

TEST(HopperGemmCuda, EveryTokenTileDownProjN1024K3072BiasF32Out) {
  SKIP_UNLESS_HOPPER_GEMM();
  for (int64_t m : kTokens)
    check_configs({m, 1024, 3072, true, DType::kF32, false, 13}, variants({m, 1024, 3072}));
}

TEST(HopperGemmCuda, PartialTilesOfNAndKReadZerosAndRanksWithoutStepsAddNothing) {
  SKIP_UNLESS_HOPPER_GEMM();
  // N = 333: a partial last tile of 64 and of 128 rows; K = 200: a partial last 64-k step, and
  // 4 steps over up to 8 ranks (ranks without a step); K = 8: one step, mostly zero fill.
  std::vector<HopperGemmConfig> all;
  for (int wg : {1, 2})
    for (int split = 1; split <= kernels::kHopperGemmMaxSplit; ++split) all.push_back({wg, split});
  for (int64_t m : {1, 17, 40, 64}) {
    check_configs({m, 333, 200, true, DType::kBf16, false, static_cast<uint32_t>(20 + m)}, all);
    check_configs({m, 70, 8, false, DType::kF32, false, static_cast<uint32_t>(30 + m)}, all);
  }
}

TEST(HopperGemmCuda, DeterministicAcrossRuns) {
  SKIP_UNLESS_HOPPER_GEMM();
  for (int64_t m : {9, 64}) {
    const Problem p{m, 4096, 2048, true, DType::kF32, false, 50};
    const Case c(p);
    const DeviceCase d(c);
    for (const HopperGemmConfig& cfg : variants(p)) {
      run(d, cfg, nullptr);
      const auto first = d.dy.host();
      d.poison_y();
      run(d, cfg, nullptr);
      EXPECT_TRUE(first == d.dy.host()) << describe_gemm(p, cfg) << ": results differ between runs";
    }
  }
}

TEST(HopperGemmCuda, GraphCaptureReplaysWithNewInputs) {
  SKIP_UNLESS_HOPPER_GEMM();
  // Same shapes and weights, different x: one graph, replayed on each x in turn.
  const Problem p1{33, 1024, 3072, true, DType::kBf16, false, 60};
  Problem p2 = p1;
  p2.seed = 61;
  const Case c1(p1);
  const Case c2(p2, &c1);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (HopperGemmConfig cfg : variants(p1))
    for (bool pdl : {false, true}) {
      cfg.pdl = pdl;
      expect_graph_replays_follow_x(c1, c2, describe_gemm(p1, cfg), stream,
                                    [&](const DeviceCase& d, cudaStream_t s) { run(d, cfg, s); });
    }
  CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(HopperGemmCuda, PdlLaunchWaitsForTheRmsNormThatWritesX) {
  SKIP_UNLESS_HOPPER_GEMM();
  // x = rms_norm(h) by the norm kernel (which lets its dependents start at once), then the GEMM
  // launched with PDL right behind it, into a poisoned x each round: reading x before the norm
  // finished shows as NaN or a wrong sum. Eagerly and in a captured graph. The reference is
  // computed from the norm's own output.
  for (int64_t m : {5, 16, 64}) {
    const int64_t n = 4096, k = 1024;
    std::mt19937 rng(70 + m);
    const DevVec<uint16_t> h(random_bf16(m * k, rng, -3.f, 3.f));   // [M, K] bf16
    const DevVec<uint16_t> gamma(random_bf16(k, rng, 0.5f, 1.5f));  // [K] bf16
    DevVec<uint16_t> normed(m * k);                                 // [M, K] bf16: x
    const TensorView xv = normed.view(DType::kBf16, {m, k});
    const auto norm = [&](cudaStream_t s) {
      kernels::cuda::rms_norm(xv, h.view(DType::kBf16, {m, k}), gamma.view(DType::kBf16, {k}),
                              1e-6f, s);
    };
    norm(nullptr);
    const std::vector<uint16_t> x = normed.host();
    const Case c({m, n, k, true, DType::kBf16, false, static_cast<uint32_t>(80 + m)}, nullptr, &x);
    const DeviceCase d(c);
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (HopperGemmConfig cfg : kernels::hopper_gemm_configs(m, n, k)) {
      cfg.pdl = true;
      const auto round = [&] {
        CUDA_CHECK(cudaMemsetAsync(normed.mem.get(), 0xFF, normed.mem.bytes(), stream));
        norm(stream);
        run(d, cfg, stream, &xv);
      };
      d.poison_y();
      round();
      CUDA_CHECK(cudaStreamSynchronize(stream));
      expect_gemm_matches(c, d.dy.host(), describe_gemm(c.p, cfg) + " eager");
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      for (int i = 0; i < 3; ++i) round();
      CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
      CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      d.poison_y();
      CUDA_CHECK(cudaGraphLaunch(exec, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      expect_gemm_matches(c, d.dy.host(), describe_gemm(c.p, cfg) + " graph");
      CUDA_CHECK(cudaGraphExecDestroy(exec));
      CUDA_CHECK(cudaGraphDestroy(graph));
    }
    CUDA_CHECK(cudaStreamDestroy(stream));
  }
}

// --- the gate_up projection with the activation in the epilogue ---

// x [M, K] (pitch K + 8), w [2I, K] = [gate; up]; act rows of pitch I + 3, poisoned first.
void check_gate_up_act(int64_t m, int64_t inter, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t x_pitch = k + 8, act_pitch = inter + 3;
  const std::vector<uint16_t> hx = random_bf16(m * x_pitch, rng, -1.f, 1.f);
  const std::vector<uint16_t> hw = random_bf16(2 * inter * k, rng, -0.1f, 0.1f);
  // The CPU reference: cpu::linear into [M, 2I] bf16, then cpu::silu_and_mul.
  TensorView host_x = host_view(const_cast<uint16_t*>(hx.data()), DType::kBf16, {m, k});
  host_x.stride[0] = x_pitch;
  std::vector<uint16_t> cpu_gate_up(m * 2 * inter), cpu_act(m * inter);
  kernels::cpu::linear(host_view(cpu_gate_up.data(), DType::kBf16, {m, 2 * inter}), host_x,
                       host_view(const_cast<uint16_t*>(hw.data()), DType::kBf16, {2 * inter, k}),
                       TensorView(), reference_threads());
  kernels::cpu::silu_and_mul(host_view(cpu_act.data(), DType::kBf16, {m, inter}),
                             host_view(cpu_gate_up.data(), DType::kBf16, {m, 2 * inter}));
  double ss = 0;
  for (uint16_t v : cpu_act) ss += double{bf16_to_float(v)} * bf16_to_float(v);
  const double rms = std::sqrt(ss / static_cast<double>(cpu_act.size()));

  const DevVec<uint16_t> dx(hx), dw(hw);
  DevVec<uint16_t> gate_up(m * 2 * inter), two_step(m * act_pitch), fused(m * act_pitch);
  TensorView x = dx.view(DType::kBf16, {m, k});
  x.stride[0] = x_pitch;
  const TensorView w = dw.view(DType::kBf16, {2 * inter, k});
  const auto act_view = [&](const DevVec<uint16_t>& v) {
    TensorView a = v.view(DType::kBf16, {m, inter});
    a.stride[0] = act_pitch;
    return a;
  };
  std::vector<HopperGemmConfig> configs = kernels::hopper_gemm_configs(m, inter, k, true);
  EXPECT_FALSE(configs.empty()) << "M=" << m << " I=" << inter << " K=" << k;
  for (int wg : {1, 2})
    for (int split : {1, kernels::kHopperGemmMaxSplit})
      if (std::find(configs.begin(), configs.end(), HopperGemmConfig{wg, split}) == configs.end())
        configs.push_back({wg, split});
  for (HopperGemmConfig cfg : configs)
    for (bool pdl : {false, true}) {
      cfg.pdl = pdl;
      std::ostringstream what;
      what << "M=" << m << " I=" << inter << " K=" << k << " " << cfg.name();
      CUDA_CHECK(cudaMemset(two_step.mem.get(), 0xFF, two_step.mem.bytes()));
      CUDA_CHECK(cudaMemset(fused.mem.get(), 0xFF, fused.mem.bytes()));
      CUDA_CHECK(cudaDeviceSynchronize());
      kernels::cuda::hopper_gemm(gate_up.view(DType::kBf16, {m, 2 * inter}), x, w, TensorView(),
                                 cfg, nullptr);
      kernels::cuda::silu_and_mul(act_view(two_step), gate_up.view(DType::kBf16, {m, 2 * inter}),
                                  nullptr);
      kernels::cuda::hopper_gemm_gate_up_act(act_view(fused), x, w, cfg, nullptr);
      CUDA_CHECK(cudaGetLastError());
      const std::vector<uint16_t> a = two_step.host(), b = fused.host();
      int64_t differ = 0, off_ref = 0, padding = 0;
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < act_pitch; ++j) {
          const uint16_t got = b[r * act_pitch + j];
          if (j >= inter) {
            padding += got != 0xFFFF;
            continue;
          }
          differ += got != a[r * act_pitch + j];
          const double ref = bf16_to_float(cpu_act[r * inter + j]);
          off_ref += !(std::abs(bf16_to_float(got) - ref) <= std::abs(ref) / 64 + rms / 64);
        }
      EXPECT_EQ(differ, 0) << what.str() << ": act differs from the GEMM then silu_and_mul";
      EXPECT_EQ(off_ref, 0) << what.str() << ": act off the CPU reference";
      EXPECT_EQ(padding, 0) << what.str() << ": act written past I in its row padding";
    }
}

TEST(HopperGemmCuda, GateUpActIsTheGemmThenSiluAndMulOnEveryTokenTile) {
  SKIP_UNLESS_HOPPER_GEMM();
  for (int64_t m : {1, 9, 16, 33, 64})
    check_gate_up_act(m, 3072, 1024, static_cast<uint32_t>(90 + m));
}

TEST(HopperGemmCuda, GateUpActPartialTilesOfIAndK) {
  SKIP_UNLESS_HOPPER_GEMM();
  // I = 200: partial last tiles of 32 and 64 act rows, whose gate boxes run into the up rows
  // (never stored); K = 200: a partial last 64-k step.
  for (int64_t m : {5, 40}) check_gate_up_act(m, 200, 200, static_cast<uint32_t>(110 + m));
}

}  // namespace
}  // namespace nanovllm::test
