// cuBLAS linear against the CPU reference. Both accumulate in f32, only in a different
// order: f32 outputs agree to ~1e-6 relative (K <= 3072 terms of size <= 1), so 1e-4 is
// loose; bf16 outputs additionally differ by one rounding, so relative L2 < 1e-2.
#include <cublas_v2.h>
#include <gtest/gtest.h>

#include "kernels/activation.h"
#include "kernels/linear.h"
#include "tests/kernels/cuda_test_util.h"

namespace nanovllm::test {
namespace {

struct Cublas {
  Cublas() { CUBLAS_CHECK(cublasCreate(&h)); }
  ~Cublas() { cublasDestroy(h); }
  cublasHandle_t h = nullptr;
};

// behind_norm: linear's hint that x is an RMSNorm's output (the Hopper decode GEMM's rule).
void check_linear(int64_t m, int64_t n, int64_t k, bool bias, DType out, uint32_t seed,
                  bool behind_norm = false) {
  std::mt19937 rng(seed);
  const int64_t pitch = k + 16;  // x rows strided, as a view into a wider buffer
  auto x = random_bf16(m * pitch, rng);
  auto w = random_bf16(n * k, rng, -0.1f, 0.1f);
  auto b = random_bf16(n, rng);
  TensorView hx = host_view(x.data(), DType::kBf16, {m, k});
  hx.stride[0] = pitch;
  const TensorView none;
  const size_t esz = out == DType::kF32 ? 4 : 2;
  std::vector<uint8_t> ref(m * n * esz);
  kernels::cpu::linear(host_view(ref.data(), out, {m, n}), hx,
                       host_view(w.data(), DType::kBf16, {n, k}),
                       bias ? host_view(b.data(), DType::kBf16, {n}) : none, 4);
  DevVec<uint16_t> dx(x), dw(w), db(b);
  DevVec<uint8_t> dy(m * n * esz);
  Cublas cublas;
  ExecContext ctx;
  ctx.cublas = cublas.h;
  TensorView vx = dx.view(DType::kBf16, {m, k});
  vx.stride[0] = pitch;
  TensorView none_dev;
  none_dev.device = Device::kCuda;
  kernels::cuda::linear(dy.view(out, {m, n}), vx, dw.view(DType::kBf16, {n, k}),
                        bias ? db.view(DType::kBf16, {n}) : none_dev, ctx, behind_norm);
  const auto got = dy.host();
  if (out == DType::kF32) {
    std::vector<float> g(m * n), r(m * n);
    std::memcpy(g.data(), got.data(), got.size());
    std::memcpy(r.data(), ref.data(), ref.size());
    const ErrorStats e = compare_f32(g, r);
    EXPECT_TRUE(e.finite);
    EXPECT_LT(e.rel_l2, 1e-4) << m << "x" << n << "x" << k;
  } else {
    std::vector<uint16_t> g(m * n), r(m * n);
    std::memcpy(g.data(), got.data(), got.size());
    std::memcpy(r.data(), ref.data(), ref.size());
    const ErrorStats e = compare_bf16(g, r);
    EXPECT_TRUE(e.finite);
    EXPECT_LT(e.rel_l2, 1e-2) << m << "x" << n << "x" << k;
  }
}

TEST(LinearCuda, DecodeShapesBf16Out) {
  SKIP_WITHOUT_CUDA();
  for (int64_t m : {1, 2, 17, 512}) check_linear(m, 4096, 1024, false, DType::kBf16, 1);
}

// The sizes where linear's rules pick each path on an H100/H200 (kernels/hopper_gemm.h's
// hopper_gemm_wins): the 0.6B's qkv_proj behind its norm at 9-32 tokens, o_proj and down_proj
// (with a bias, which the checkpoints lack but linear takes) at 17-64, and the sizes around them
// on the skinny GEMM or cuBLAS; elsewhere every size runs cuBLAS or the skinny GEMM.
TEST(LinearCuda, TheDecodeRulesPathsMatchTheCpu) {
  SKIP_WITHOUT_CUDA();
  for (int64_t m : {8, 9, 16, 32, 33}) check_linear(m, 4096, 1024, false, DType::kBf16, 5, true);
  for (int64_t m : {16, 17, 24, 32, 48, 64, 65}) {
    check_linear(m, 1024, 2048, false, DType::kBf16, 6);
    check_linear(m, 1024, 3072, true, DType::kBf16, 7);
  }
}

TEST(LinearCuda, PrefillShapeAndOddSizes) {
  SKIP_WITHOUT_CUDA();
  check_linear(1000, 1024, 3072, false, DType::kBf16, 2);
  check_linear(3, 37, 50, false, DType::kBf16, 3);
  check_linear(33, 100, 64, true, DType::kBf16, 4);
}

TEST(LinearCuda, F32LogitsWithAndWithoutBias) {
  SKIP_WITHOUT_CUDA();
  check_linear(7, 151936, 1024, false, DType::kF32, 5);
  check_linear(5, 999, 256, true, DType::kF32, 6);
}

// The MLP's down projection with its activation against the CPU's silu_and_mul + linear, on
// both sides of the fused path's token limit (fused up to 8 tokens, silu_and_mul + the skinny
// GEMM at 9-16, + cuBLAS above), at the 0.6B shape's down_proj and an odd one. The fused
// activation may round an element one bf16 step apart (skinny_gemm.h), hence rel L2 < 1e-2.
void check_linear_silu_mul(int64_t m, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  auto gate_up = random_bf16(m * 2 * k, rng, -4.f, 4.f);
  auto w = random_bf16(n * k, rng, -0.1f, 0.1f);
  std::vector<uint16_t> act(m * k), ref(m * n);
  kernels::cpu::silu_and_mul(host_view(act.data(), DType::kBf16, {m, k}),
                             host_view(gate_up.data(), DType::kBf16, {m, 2 * k}));
  kernels::cpu::linear(host_view(ref.data(), DType::kBf16, {m, n}),
                       host_view(act.data(), DType::kBf16, {m, k}),
                       host_view(w.data(), DType::kBf16, {n, k}), TensorView(), 4);
  DevVec<uint16_t> dg(gate_up), dw(w), dact(m * k), dy(m * n);
  Cublas cublas;
  ExecContext ctx;
  ctx.cublas = cublas.h;
  TensorView none_dev;
  none_dev.device = Device::kCuda;
  kernels::cuda::linear_silu_mul(dy.view(DType::kBf16, {m, n}), dg.view(DType::kBf16, {m, 2 * k}),
                                 dact.view(DType::kBf16, {m, k}), dw.view(DType::kBf16, {n, k}),
                                 none_dev, ctx);
  const ErrorStats e = compare_bf16(dy.host(), ref);
  EXPECT_TRUE(e.finite);
  EXPECT_LT(e.rel_l2, 1e-2) << m << "x" << n << "x" << k;
}

TEST(LinearCuda, DownProjectionWithItsActivationFusedOrNotMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  for (int64_t m : {1, 8, 9, 16, 17, 40}) {
    check_linear_silu_mul(m, 1024, 3072, 7 + static_cast<uint32_t>(m));
    check_linear_silu_mul(m, 136, 520, 50 + static_cast<uint32_t>(m));
  }
}

}  // namespace
}  // namespace nanovllm::test
