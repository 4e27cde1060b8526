// rope_table: plain RoPE's theta powers, and YaRN's blend checked against its defining
// properties (extrapolated below the correction range, interpolated by the factor above it,
// a monotone blend inside) with the range recomputed here in double from the formula.
#include "layers/rope_frequencies.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace nanovllm {
namespace {

ModelConfig config(float theta, int64_t head_dim) {
  ModelConfig c;
  c.rope_theta = theta;
  c.head_dim = head_dim;
  return c;
}

// c with YaRN scaling: `factor` over `original` positions, beta_fast / beta_slow.
ModelConfig with_yarn(ModelConfig c, double factor, int64_t original, double beta_fast,
                      double beta_slow) {
  RopeScaling s;
  s.factor = factor;
  s.original_max_position_embeddings = original;
  s.beta_fast = beta_fast;
  s.beta_slow = beta_slow;
  c.rope_scaling = s;
  return c;
}

// Qwen3's 128k setting: theta 1e6, D 128, YaRN factor 4 over 32768 positions, beta 32 / 1.
ModelConfig qwen3_yarn() {
  return with_yarn(config(1e6f, 128), 4.0, 32768, 32.0, 1.0);
}

double ulp(float x) {
  return static_cast<double>(std::nextafter(std::abs(x), INFINITY) - std::abs(x));
}

// The correction range as the formula defines it, in double: the pair index whose wavelength
// makes r turns over O positions, for r = beta_fast (low) and beta_slow (high).
struct Range {
  double low, high;
};
Range correction_range(const ModelConfig& c) {
  const RopeScaling& s = *c.rope_scaling;
  const double d = static_cast<double>(c.head_dim);
  auto dim = [&](double r) {
    return d *
           std::log(static_cast<double>(s.original_max_position_embeddings) /
                    (r * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(static_cast<double>(c.rope_theta)));
  };
  Range r{dim(s.beta_fast), dim(s.beta_slow)};
  if (s.truncate) r = {std::floor(r.low), std::ceil(r.high)};
  return {std::max(r.low, 0.0), std::min(r.high, d - 1)};
}

// Below low: exactly the plain frequency; at or above high: exactly plain / factor (a power
// of two factor divides exactly); strictly between: strictly between the two, and the
// blend's weight (table / plain) falls monotonically from 1 to 1 / factor.
void expect_yarn_shape(const ModelConfig& c) {
  const Range r = correction_range(c);
  const double factor = c.rope_scaling->factor;
  const std::vector<float> plain = rope_table(config(c.rope_theta, c.head_dim)).inv_freq;
  const std::vector<float> yarn = rope_table(c).inv_freq;
  ASSERT_EQ(yarn.size(), static_cast<size_t>(c.head_dim / 2));
  double prev_weight = 1.0;
  int inside = 0;
  for (size_t j = 0; j < yarn.size(); ++j) {
    const double x = static_cast<double>(j), p = plain[j], y = yarn[j];
    SCOPED_TRACE(::testing::Message() << "pair " << j << " low " << r.low << " high " << r.high);
    if (x <= r.low) {
      EXPECT_EQ(yarn[j], plain[j]);
    } else if (x >= r.high) {
      EXPECT_EQ(yarn[j], static_cast<float>(p / factor));
    } else {
      ++inside;
      EXPECT_LT(y, p);
      EXPECT_GT(y, p / factor);
      const double ramp = (x - r.low) / (r.high - r.low);
      EXPECT_NEAR(y, p / factor * ramp + p * (1.0 - ramp), 4 * ulp(yarn[j]));
      EXPECT_LT(y / p, prev_weight);
      prev_weight = y / p;
    }
  }
  EXPECT_EQ(inside, static_cast<int>(std::ceil(r.high) - std::floor(r.low)) - 1);
}

TEST(RopeFrequencies, PlainTableIsThetaToTheMinus2iOverD) {
  for (const auto& [theta, d] : {std::pair{1e6f, 128}, std::pair{1e4f, 64}, std::pair{1e6f, 64}}) {
    const RopeTable t = rope_table(config(theta, d));
    ASSERT_EQ(t.inv_freq.size(), static_cast<size_t>(d / 2));
    EXPECT_EQ(t.attention_scaling, 1.0f);
    EXPECT_EQ(t.inv_freq[0], 1.0f);
    for (int64_t i = 0; i < d / 2; ++i) {
      const double want = std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / d);
      // powf and the division each round once (D a power of two: the exponent is exact).
      EXPECT_NEAR(t.inv_freq[i], want, 2 * ulp(t.inv_freq[i])) << "theta " << theta << " i " << i;
    }
  }
}

TEST(RopeFrequencies, YarnQwen3CorrectionRangeIsPairs23To40) {
  // By hand: 128 ln(32768 / 64 pi) / (2 ln 1e6) = 23.59 -> 23; 128 ln(32768 / 2 pi) / ... =
  // 39.65 -> 40.
  const Range r = correction_range(qwen3_yarn());
  EXPECT_EQ(r.low, 23.0);
  EXPECT_EQ(r.high, 40.0);
  const std::vector<float> plain = rope_table(config(1e6f, 128)).inv_freq;
  const std::vector<float> yarn = rope_table(qwen3_yarn()).inv_freq;
  EXPECT_EQ(yarn[23], plain[23]);      // last extrapolated pair
  EXPECT_NE(yarn[24], plain[24]);      // first blended pair
  EXPECT_NE(yarn[39], plain[39] / 4);  // last blended pair
  EXPECT_EQ(yarn[40], plain[40] / 4);  // first interpolated pair
}

TEST(RopeFrequencies, YarnExtrapolatesHighFrequenciesInterpolatesLowOnesBlendsBetween) {
  expect_yarn_shape(qwen3_yarn());
  // Other numbers move the range with the formula: theta 1e4, D 64, factor 8, beta 16 / 2.
  expect_yarn_shape(with_yarn(config(1e4f, 64), 8.0, 4096, 16.0, 2.0));
}

TEST(RopeFrequencies, YarnWithoutTruncateUsesTheFractionalRange) {
  ModelConfig c = qwen3_yarn();
  c.rope_scaling->truncate = false;
  const Range r = correction_range(c);
  EXPECT_GT(r.low, 23.0);
  EXPECT_LT(r.high, 40.0);
  expect_yarn_shape(c);
  EXPECT_NE(rope_table(c).inv_freq[24], rope_table(qwen3_yarn()).inv_freq[24]);
}

TEST(RopeFrequencies, YarnAttentionScalingIsPointOneLnFactorPlusOne) {
  EXPECT_FLOAT_EQ(rope_table(qwen3_yarn()).attention_scaling,
                  static_cast<float>(0.1 * std::log(4.0) + 1.0));
  EXPECT_NEAR(rope_table(qwen3_yarn()).attention_scaling, 1.1386, 1e-4);
}

TEST(RopeFrequencies, ExplicitAttentionFactorWins) {
  ModelConfig c = qwen3_yarn();
  c.rope_scaling->attention_factor = 0.75;
  const RopeTable t = rope_table(c);
  EXPECT_EQ(t.attention_scaling, 0.75f);
  EXPECT_EQ(t.inv_freq, rope_table(qwen3_yarn()).inv_freq);  // frequencies unchanged
}

// Factor 1: interpolation is the identity, so the blend mixes a frequency with itself (equal
// up to the f32 rounding of x (1 - e) + x e) and there is no mscale.
TEST(RopeFrequencies, YarnFactorOneGivesThePlainTable) {
  ModelConfig c = qwen3_yarn();
  c.rope_scaling->factor = 1.0;
  const RopeTable t = rope_table(c);
  const std::vector<float> plain = rope_table(config(1e6f, 128)).inv_freq;
  ASSERT_EQ(t.inv_freq.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_NEAR(t.inv_freq[i], plain[i], ulp(plain[i])) << i;
  EXPECT_EQ(t.attention_scaling, 1.0f);
}

}  // namespace
}  // namespace nanovllm
