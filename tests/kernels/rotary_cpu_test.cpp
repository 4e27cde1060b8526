#include <gtest/gtest.h>

#include <cmath>
#include <complex>

#include "kernels/rotary.h"
#include "tests/kernels/cpu_test_util.h"

namespace nanovllm {
namespace {

using test::bf;

// Neox RoPE as a complex rotation: (x[i] + j x[i + D/2]) * e^{j pos theta^(-2i/D)}, after an
// optional per-head RMSNorm, all in double.
std::vector<double> reference_head(const uint16_t* x, int64_t d, const uint16_t* norm_w, double eps,
                                   int pos, double theta) {
  std::vector<double> h(d);
  for (int64_t i = 0; i < d; ++i) h[i] = bf(x[i]);
  if (norm_w != nullptr) {
    double ms = 0.0;
    for (double v : h) ms += v * v;
    ms /= static_cast<double>(d);
    for (int64_t i = 0; i < d; ++i) h[i] = h[i] / std::sqrt(ms + eps) * bf(norm_w[i]);
  }
  std::vector<double> out(d);
  for (int64_t i = 0; i < d / 2; ++i) {
    const double angle = pos * std::pow(theta, -2.0 * static_cast<double>(i) / d);
    const std::complex<double> z =
        std::complex<double>(h[i], h[i + d / 2]) * std::polar(1.0, angle);
    out[i] = z.real();
    out[i + d / 2] = z.imag();
  }
  return out;
}

void run_case(int64_t d, int64_t hq, int64_t hkv, bool with_norm, float theta) {
  std::mt19937 rng(static_cast<unsigned>(d * 131 + hq * 7 + hkv + with_norm));
  const std::vector<int32_t> pos_values{0, 1, 7, 100, 4095, 40000};
  const int64_t t = static_cast<int64_t>(pos_values.size());
  const int64_t stride = (hq + 2 * hkv) * d;  // q and k are views into a qkv buffer
  auto qkv = test::random_bf16(t * stride, rng, -2.0f, 2.0f);
  const auto orig = qkv;
  auto qw = test::random_bf16(d, rng, 0.5f, 1.5f);
  auto kw = test::random_bf16(d, rng, 0.5f, 1.5f);
  std::vector<int32_t> positions = pos_values;
  TensorView q = test::view(qkv, {t, hq, d});
  q.stride[0] = stride;
  TensorView k(qkv.data() + hq * d, DType::kBf16, {t, hkv, d});
  k.stride[0] = stride;
  const TensorView qn = with_norm ? test::view(qw, {d}) : TensorView();
  const TensorView kn = with_norm ? test::view(kw, {d}) : TensorView();
  const float eps = 1e-6f;
  kernels::cpu::qk_norm_rope(q, k, qn, kn, test::view(positions, {t}), eps, theta);
  for (int64_t i = 0; i < t; ++i)
    for (int64_t h = 0; h < hq + hkv; ++h) {
      const bool is_q = h < hq;
      const int64_t off = i * stride + h * d;
      const auto want =
          reference_head(orig.data() + off, d, with_norm ? (is_q ? qw.data() : kw.data()) : nullptr,
                         eps, positions[i], theta);
      for (int64_t e = 0; e < d; ++e)
        ASSERT_TRUE(test::close(bf(qkv[off + e]), want[e], 2e-2, 1e-2))
            << "d=" << d << " pos=" << positions[i] << " head " << h << " elem " << e << ": "
            << bf(qkv[off + e]) << " vs " << want[e];
    }
  // The v part of qkv is untouched.
  for (int64_t i = 0; i < t; ++i)
    for (int64_t e = (hq + hkv) * d; e < stride; ++e)
      ASSERT_EQ(qkv[i * stride + e], orig[i * stride + e]);
}

TEST(RotaryCpu, QkNormAndRopeMatchComplexRotationForHeadDim64) {
  run_case(64, 4, 2, true, 1e6f);
}
TEST(RotaryCpu, QkNormAndRopeMatchComplexRotationForHeadDim128) {
  run_case(128, 8, 2, true, 1e6f);
}
TEST(RotaryCpu, RopeWithoutNormMatchesComplexRotation) {
  run_case(64, 3, 3, false, 10000.0f);
}

TEST(RotaryCpu, PositionZeroLeavesVectorUnrotated) {
  std::mt19937 rng(5);
  std::vector<uint16_t> q = test::random_bf16(64, rng);
  const auto orig = q;
  std::vector<uint16_t> k = q;
  std::vector<int32_t> pos{0};
  kernels::cpu::qk_norm_rope(test::view(q, {1, 1, 64}), test::view(k, {1, 1, 64}), TensorView(),
                             TensorView(), test::view(pos, {1}), 1e-6f, 1e6f);
  EXPECT_EQ(q, orig);
  EXPECT_EQ(k, orig);
}

}  // namespace
}  // namespace nanovllm
