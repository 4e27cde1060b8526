// The MLP's gate_up projection with its activation in the skinny GEMM's epilogue
// (kernels::cuda::skinny_gemm_gate_up_act, linear_gate_up_act): bit-identical to the same
// config's gate_up GEMM followed by silu_and_mul on the GPU, for every config the shape is
// offered and 1-8 tokens, and within bf16 rounding of the CPU reference (cpu::linear then
// cpu::silu_and_mul). act rows are strided and poisoned first: the padding must stay NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "kernels/exec_context.h"
#include "kernels/hopper_gemm.h"
#include "kernels/linear.h"
#include "kernels/skinny_gemm.h"
#include "tests/kernels/cuda_test_util.h"

namespace nanovllm::test {
namespace {

// One problem: x [M, K] (pitch K + 8), w [2I, K] = [gate; up], act [M, I] (pitch I + 3).
struct GateUp {
  GateUp(int64_t m, int64_t inter, int64_t k, uint32_t seed) : m(m), inter(inter), k(k) {
    std::mt19937 rng(seed);
    x = random_bf16(m * (k + 8), rng, -1.f, 1.f);
    w = random_bf16(2 * inter * k, rng, -0.1f, 0.1f);
  }
  TensorView host_x() {
    TensorView v = host_view(x.data(), DType::kBf16, {m, k});
    v.stride[0] = k + 8;
    return v;
  }
  // cpu::linear into [M, 2I] bf16, then cpu::silu_and_mul: [M, I] bf16.
  std::vector<uint16_t> cpu_reference() {
    std::vector<uint16_t> gate_up(m * 2 * inter), act(m * inter);
    kernels::cpu::linear(host_view(gate_up.data(), DType::kBf16, {m, 2 * inter}), host_x(),
                         host_view(w.data(), DType::kBf16, {2 * inter, k}), TensorView(),
                         reference_threads());
    kernels::cpu::silu_and_mul(host_view(act.data(), DType::kBf16, {m, inter}),
                               host_view(gate_up.data(), DType::kBf16, {m, 2 * inter}));
    return act;
  }
  int64_t m, inter, k;
  std::vector<uint16_t> x, w;
};

std::string describe(const GateUp& p, const kernels::SkinnyGemmConfig& cfg) {
  std::ostringstream os;
  os << "M=" << p.m << " I=" << p.inter << " K=" << p.k << " " << cfg.name();
  return os.str();
}

void check_gate_up_act(int64_t m, int64_t inter, int64_t k, uint32_t seed) {
  GateUp p(m, inter, k, seed);
  const std::vector<uint16_t> ref = p.cpu_reference();
  DevVec<uint16_t> dx(p.x), dw(p.w);
  TensorView x = dx.view(DType::kBf16, {m, k});
  x.stride[0] = k + 8;
  const TensorView w = dw.view(DType::kBf16, {2 * inter, k});
  const int64_t pitch = inter + 3;
  DevVec<uint16_t> fused(m * pitch), two_step(m * pitch), gate_up(m * 2 * inter);
  const auto act_view = [&](const DevVec<uint16_t>& d) {
    TensorView v = d.view(DType::kBf16, {m, inter});
    v.stride[0] = pitch;
    return v;
  };
  TensorView none;
  none.device = Device::kCuda;
  const std::vector<kernels::SkinnyGemmConfig> configs =
      kernels::skinny_gemm_configs(m, 2 * inter, k);
  ASSERT_FALSE(configs.empty()) << "M=" << m << " I=" << inter << " K=" << k;
  for (kernels::SkinnyGemmConfig cfg : configs) {
    for (const bool pdl : {false, true}) {
      cfg.pdl = pdl;
      const std::string what = describe(p, cfg);
      fused.mem.poison();
      two_step.mem.poison();
      kernels::cuda::skinny_gemm_gate_up_act(act_view(fused), x, w, cfg, nullptr);
      kernels::cuda::skinny_gemm(gate_up.view(DType::kBf16, {m, 2 * inter}), x, w, none, cfg,
                                 nullptr);
      kernels::cuda::silu_and_mul(act_view(two_step), gate_up.view(DType::kBf16, {m, 2 * inter}),
                                  nullptr);
      CUDA_CHECK(cudaGetLastError());
      const std::vector<uint16_t> got = fused.host(), want = two_step.host();
      int64_t differ = 0, unpoisoned = 0;
      std::vector<uint16_t> rows(m * inter);
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t j = 0; j < inter; ++j) {
          differ += got[r * pitch + j] != want[r * pitch + j];
          rows[r * inter + j] = got[r * pitch + j];
        }
        for (int64_t j = inter; j < pitch; ++j)
          unpoisoned += !std::isnan(bf16_to_float(got[r * pitch + j]));
      }
      EXPECT_EQ(differ, 0) << what << ": elements that differ from gate_up GEMM + silu_and_mul";
      EXPECT_EQ(unpoisoned, 0) << what << ": row padding written";
      const ErrorStats e = compare_bf16(rows, ref);
      EXPECT_TRUE(e.finite) << what << ": unwritten or NaN output";
      EXPECT_LT(e.rel_l2, 1e-2) << what << " against the CPU reference";
    }
  }
}

// 0.6B's shape (I 3072, K 1024), its tensor-parallel shard at tp 4 (I 768), and an I that no
// block size divides (136: the last block's act rows past I read and write nothing) with a K
// of a partial last chunk (520).
TEST(SkinnyGateUpActCuda, BitIdenticalToGemmThenSiluAndMulAndMatchesTheCpu) {
  SKIP_WITHOUT_CUDA();
  for (int64_t m : {1, 2, 3, 5, 8}) {
    check_gate_up_act(m, 3072, 1024, 11 + static_cast<uint32_t>(m));
    check_gate_up_act(m, 136, 520, 31 + static_cast<uint32_t>(m));
  }
  check_gate_up_act(4, 768, 1024, 41);
}

// linear_gate_up_act takes the decode sizes the skinny GEMM serves (up to 8 tokens) and, where
// the Hopper decode GEMM runs (an sm_90 device and build), 9-32 tokens of this shape (linear.cu's
// hopper_wins); it leaves the rest, and a bias, to the two-step path: false and act untouched.
TEST(SkinnyGateUpActCuda, LinearTakesTheDecodeSizesWithoutBias) {
  SKIP_WITHOUT_CUDA();
  const int64_t inter = 3072, k = 1024, most = 40;
  std::mt19937 rng(5);
  DevVec<uint16_t> dx(random_bf16(most * k, rng, -1.f, 1.f)),
      dw(random_bf16(2 * inter * k, rng, -0.1f, 0.1f)), db(random_bf16(2 * inter, rng)),
      act(most * inter);
  const TensorView w = dw.view(DType::kBf16, {2 * inter, k});
  ExecContext ctx;
  for (int64_t m : {1, 8, 9, 16, 32, 33, 40}) {
    act.mem.poison();
    const bool took = kernels::cuda::linear_gate_up_act(
        act.view(DType::kBf16, {m, inter}), dx.view(DType::kBf16, {m, k}), w, TensorView(), ctx);
    const bool hopper = m <= 32 && kernels::hopper_gemm_supports(m, 2 * inter, k);
    EXPECT_EQ(took, m <= 8 || hopper) << "M=" << m;
    const std::vector<uint16_t> got = act.host();
    EXPECT_EQ(std::isnan(bf16_to_float(got[0])), !took) << "M=" << m;
  }
  act.mem.poison();
  EXPECT_FALSE(kernels::cuda::linear_gate_up_act(act.view(DType::kBf16, {1, inter}),
                                                 dx.view(DType::kBf16, {1, k}), w,
                                                 db.view(DType::kBf16, {2 * inter}), ctx));
  EXPECT_TRUE(std::isnan(bf16_to_float(act.host()[0])));
}

}  // namespace
}  // namespace nanovllm::test
