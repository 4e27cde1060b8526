// cpu::qk_norm_rope against a double-precision reference: per-head RMSNorm, then the neox pair
// (x[i], x[i + D/2]) rotated as one complex number by e^{j angle}, times attention_scaling.
// The angle is the one thing the reference takes in f32: float(pos) * inv_freq[i] is the
// kernel contract (kernels/rotary.h; transformers forms it the same way), and at 1e5 rad
// a double angle would differ by up to an f32 ulp of it (~0.008 rad), far above bf16 noise.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>

#include "kernels/rotary.h"
#include "tests/kernels/cpu_test_util.h"

namespace nanovllm {
namespace {

using test::bf;

// inv_freq[i] = theta^(-2i/D) as f32: plain RoPE's table.
std::vector<float> theta_table(double theta, int64_t d) {
  std::vector<float> t(d / 2);  // [D/2]
  for (int64_t i = 0; i < d / 2; ++i)
    t[i] = static_cast<float>(std::pow(theta, -2.0 * static_cast<double>(i) / d));
  return t;
}

struct Table {
  std::vector<float> inv_freq;  // [D/2]
  float scaling = 1.0f;
  kernels::RopeFrequencies view() {
    return {test::view(inv_freq, {static_cast<int64_t>(inv_freq.size())}), scaling};
  }
};

std::vector<double> reference_head(const uint16_t* x, int64_t d, const uint16_t* norm_w, double eps,
                                   int pos, const Table& table) {
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
    const double angle = static_cast<double>(static_cast<float>(pos) * table.inv_freq[i]);
    const std::complex<double> z = std::complex<double>(h[i], h[i + d / 2]) *
                                   std::polar(static_cast<double>(table.scaling), angle);
    out[i] = z.real();
    out[i + d / 2] = z.imag();
  }
  return out;
}

// Tolerance: one bf16 rounding of the output (half a step: 2^-9 relative) plus f32 noise.
void run_case(int64_t d, int64_t hq, int64_t hkv, bool with_norm, Table table,
              const std::vector<int32_t>& pos_values) {
  SCOPED_TRACE(::testing::Message() << "d " << d << " hq " << hq << " hkv " << hkv << " norm "
                                    << with_norm << " scaling " << table.scaling);
  std::mt19937 rng(static_cast<unsigned>(d * 131 + hq * 7 + hkv + with_norm));
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
  kernels::cpu::qk_norm_rope(q, k, qn, kn, test::view(positions, {t}), eps, table.view());
  for (int64_t i = 0; i < t; ++i)
    for (int64_t h = 0; h < hq + hkv; ++h) {
      const bool is_q = h < hq;
      const int64_t off = i * stride + h * d;
      const auto want =
          reference_head(orig.data() + off, d, with_norm ? (is_q ? qw.data() : kw.data()) : nullptr,
                         eps, positions[i], table);
      for (int64_t e = 0; e < d; ++e)
        ASSERT_TRUE(test::close(bf(qkv[off + e]), want[e], 1e-3, 4e-3))
            << "pos=" << positions[i] << " head " << h << " elem " << e << ": " << bf(qkv[off + e])
            << " vs " << want[e];
    }
  // The v part of qkv is untouched.
  for (int64_t i = 0; i < t; ++i)
    for (int64_t e = (hq + hkv) * d; e < stride; ++e)
      ASSERT_EQ(qkv[i * stride + e], orig[i * stride + e]);
}

const std::vector<int32_t> kPositions{0, 1, 7, 100, 4095, 40000, 131071};

TEST(RotaryCpu, QkNormAndRopeMatchComplexRotationForHeadDim64) {
  run_case(64, 4, 2, true, {theta_table(1e6, 64)}, kPositions);
}
TEST(RotaryCpu, QkNormAndRopeMatchComplexRotationForHeadDim128) {
  run_case(128, 8, 2, true, {theta_table(1e6, 128)}, kPositions);
}
TEST(RotaryCpu, RopeWithoutNormMatchesComplexRotation) {
  run_case(64, 3, 3, false, {theta_table(10000.0, 64)}, kPositions);
}

// The kernel rotates by whatever table it is given (YaRN's is no theta power) and scales cos
// and sin: random frequencies over [1e-7, 2] rad/position, not monotone, scaling 1.25.
TEST(RotaryCpu, ArbitraryTableAndAttentionScalingMatchReferenceUpTo128kPositions) {
  std::mt19937 rng(21);
  std::uniform_real_distribution<double> log10_freq(-7.0, std::log10(2.0));
  std::uniform_int_distribution<int32_t> pick(0, 131071);
  for (const int64_t d : {64, 128}) {
    Table table;
    for (int64_t i = 0; i < d / 2; ++i)
      table.inv_freq.push_back(static_cast<float>(std::pow(10.0, log10_freq(rng))));
    table.scaling = 1.25f;
    std::vector<int32_t> pos{0, 1, 131071, 131070, 65536, 32768};
    for (int i = 0; i < 10; ++i) pos.push_back(pick(rng));
    run_case(d, 4, 2, true, table, pos);
    run_case(d, 2, 1, false, table, pos);
  }
}

TEST(RotaryCpu, PositionZeroLeavesVectorUnrotated) {
  std::mt19937 rng(5);
  std::vector<uint16_t> q = test::random_bf16(64, rng);
  const auto orig = q;
  std::vector<uint16_t> k = q;
  std::vector<int32_t> pos{0};
  Table table{theta_table(1e6, 64)};
  kernels::cpu::qk_norm_rope(test::view(q, {1, 1, 64}), test::view(k, {1, 1, 64}), TensorView(),
                             TensorView(), test::view(pos, {1}), 1e-6f, table.view());
  EXPECT_EQ(q, orig);
  EXPECT_EQ(k, orig);
}

// At angle 0, cos = attention_scaling and sin = 0: every element is multiplied by it.
TEST(RotaryCpu, PositionZeroMultipliesByAttentionScaling) {
  std::vector<uint16_t> q(64), k(64);
  for (int i = 0; i < 64; ++i) q[i] = k[i] = float_to_bf16(static_cast<float>(i - 32) / 16.0f);
  std::vector<int32_t> pos{0};
  Table table{theta_table(1e6, 64), 1.25f};
  const auto orig = q;
  kernels::cpu::qk_norm_rope(test::view(q, {1, 1, 64}), test::view(k, {1, 1, 64}), TensorView(),
                             TensorView(), test::view(pos, {1}), 1e-6f, table.view());
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(q[i], float_to_bf16(bf16_to_float(orig[i]) * 1.25f)) << i;
    EXPECT_EQ(k[i], q[i]) << i;
  }
}

TEST(RotaryCpu, RejectsTableOfWrongLength) {
  std::vector<uint16_t> q(64), k(64);
  std::vector<int32_t> pos{3};
  Table table{theta_table(1e6, 128)};  // [64] for D = 64: twice too long
  EXPECT_THROW(
      kernels::cpu::qk_norm_rope(test::view(q, {1, 1, 64}), test::view(k, {1, 1, 64}), TensorView(),
                                 TensorView(), test::view(pos, {1}), 1e-6f, table.view()),
      CheckError);
}

}  // namespace
}  // namespace nanovllm
