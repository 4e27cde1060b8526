// cuBLAS linear against the CPU reference. Both accumulate in f32, only in a different
// order: f32 outputs agree to ~1e-6 relative (K <= 3072 terms of size <= 1), so 1e-4 is
// loose; bf16 outputs additionally differ by one rounding, so relative L2 < 1e-2.
#include <cublas_v2.h>
#include <gtest/gtest.h>

#include "kernels/linear.h"
#include "tests/kernels/cuda_test_util.h"

namespace nanovllm::test {
namespace {

struct Cublas {
  Cublas() { CUBLAS_CHECK(cublasCreate(&h)); }
  ~Cublas() { cublasDestroy(h); }
  cublasHandle_t h = nullptr;
};

void check_linear(int64_t m, int64_t n, int64_t k, bool bias, DType out, uint32_t seed) {
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
                        bias ? db.view(DType::kBf16, {n}) : none_dev, ctx);
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

}  // namespace
}  // namespace nanovllm::test
