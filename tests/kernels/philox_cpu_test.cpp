#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "kernels/philox.h"

namespace nanovllm {
namespace {

// Known-answer vectors published with Random123 (kat_vectors, philox4x32 with 10 rounds).
TEST(Philox, MatchesRandom123KnownAnswerForZeroCounterAndKey) {
  const PhiloxCounter out = philox4x32_10(PhiloxCounter{{0, 0, 0, 0}}, PhiloxKey{{0, 0}});
  EXPECT_EQ(out.x[0], 0x6627e8d5u);
  EXPECT_EQ(out.x[1], 0xe169c58du);
  EXPECT_EQ(out.x[2], 0xbc57ac4cu);
  EXPECT_EQ(out.x[3], 0x9b00dbd8u);
}

TEST(Philox, MatchesRandom123KnownAnswerForAllOnes) {
  const PhiloxCounter out =
      philox4x32_10(PhiloxCounter{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
                    PhiloxKey{{0xffffffffu, 0xffffffffu}});
  EXPECT_EQ(out.x[0], 0x408f276du);
  EXPECT_EQ(out.x[1], 0x41c83b0eu);
  EXPECT_EQ(out.x[2], 0xa20bc7c6u);
  EXPECT_EQ(out.x[3], 0x6d5451fdu);
}

TEST(Philox, MatchesRandom123KnownAnswerForPiDigits) {
  const PhiloxCounter out =
      philox4x32_10(PhiloxCounter{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
                    PhiloxKey{{0xa4093822u, 0x299f31d0u}});
  EXPECT_EQ(out.x[0], 0xd16cfe09u);
  EXPECT_EQ(out.x[1], 0x94fdccebu);
  EXPECT_EQ(out.x[2], 0x5001e420u);
  EXPECT_EQ(out.x[3], 0x24126ea1u);
}

TEST(Philox, SamplerStreamUsesSeedAsKeyAndTokenPositionAsCounter) {
  const uint64_t seed = 0x0123456789abcdefull;
  const PhiloxCounter direct =
      philox4x32_10(PhiloxCounter{{77u, 5u, 0u, 0u}}, PhiloxKey{{0x89abcdefu, 0x01234567u}});
  EXPECT_EQ(sampler_random_bits(seed, 77, 5), direct.x[0]);
  EXPECT_NE(sampler_random_bits(seed, 77, 5), sampler_random_bits(seed, 77, 6));
  EXPECT_NE(sampler_random_bits(seed, 77, 5), sampler_random_bits(seed + 1, 77, 5));
}

TEST(Philox, UniformStaysStrictlyInsideUnitIntervalAtBothEnds) {
  EXPECT_GT(uniform_from_bits(0), 0.0f);
  EXPECT_FLOAT_EQ(uniform_from_bits(0), 0.5f / 4294967296.0f);
  EXPECT_LT(uniform_from_bits(0xffffffffu), 1.0f);
  EXPECT_NEAR(uniform_from_bits(0x80000000u), 0.5f, 1e-7f);
  EXPECT_TRUE(std::isfinite(gumbel_from_bits(0)));
  EXPECT_TRUE(std::isfinite(gumbel_from_bits(0xffffffffu)));
}

TEST(Philox, GumbelNoiseHasTheGumbelMeanAndVariance) {
  // Gumbel(0, 1): mean = Euler-Mascheroni gamma, variance = pi^2 / 6.
  const int n = 200000;
  double sum = 0.0, sum_sq = 0.0;
  for (int i = 0; i < n; ++i) {
    const double g = gumbel_from_bits(sampler_random_bits(42, i, 3));
    sum += g;
    sum_sq += g * g;
  }
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.5772156649, 0.01);
  EXPECT_NEAR(var, std::numbers::pi * std::numbers::pi / 6.0, 0.03);
}

}  // namespace
}  // namespace nanovllm
