// kernels/sampler_math.h: the arithmetic both samplers share. These pin the properties the
// samplers rely on: sampler_exp is close to exp (so top-p / min-p mean what they say), the
// fixed-point masses cannot overflow, and the 64-bit candidate key is exactly the order
// (scaled logit descending, id ascending) the CPU reference sorts by.
#include "kernels/sampler_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace nanovllm::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kQwen3Vocab = 151936;

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
}
float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}
// Distance in representable floats (ordered_bits is the monotone integer line of floats).
int64_t ulps(float a, float b) {
  return std::llabs(static_cast<int64_t>(ordered_bits(a)) - static_cast<int64_t>(ordered_bits(b)));
}
// exp rounded once from double: the correctly rounded float in all but rare halfway cases.
float exp_ref(float x) {
  return static_cast<float>(std::exp(static_cast<double>(x)));
}

TEST(SamplerMath, SamplerExpIsWithinThreeUlpOfExpOverMinus88ToZero) {
  // Every 61st float of (-88, 0] (the bit patterns of negatives grow as x falls), plus every
  // float just below 0, where rounding of the reduction matters most. Measured: at most 3.
  int64_t worst = 0;
  float worst_x = 0.0f;
  const auto check = [&](float x) {
    const int64_t d = ulps(sampler_exp(x), exp_ref(x));
    if (d > worst) {
      worst = d;
      worst_x = x;
    }
  };
  for (uint32_t u = bits(-0.0f); from_bits(u) > -88.0f; u += 61) check(from_bits(u));
  for (uint32_t u = bits(-0.0f); u < bits(-0.0f) + (1u << 20); ++u) check(from_bits(u));
  // An evenly spaced sweep too: the bit-pattern walk is sparse in absolute terms near -88.
  for (int i = 0; i < 880000; ++i) check(-static_cast<float>(i) * 1e-4f);
  EXPECT_LE(worst, 3) << "at x = " << worst_x;
}

TEST(SamplerMath, SamplerExpIsZeroBelowMinus88AndForNaN) {
  for (float x : {std::nextafter(-88.0f, -kInf), -88.5f, -100.0f, -1e30f, -kInf,
                  std::numeric_limits<float>::quiet_NaN()})
    EXPECT_EQ(sampler_exp(x), 0.0f) << x;
  // Just above the cut the result is a (subnormal) positive number, not a premature 0.
  EXPECT_GT(sampler_exp(std::nextafter(-88.0f, 0.0f)), 0.0f);
}

TEST(SamplerMath, SamplerExpIsExactlyOneAtZeroAndNeverAboveOne) {
  EXPECT_EQ(sampler_exp(0.0f), 1.0f);
  EXPECT_EQ(sampler_exp(-0.0f), 1.0f);
  // <= 1 is what bounds a token's mass by 2^40 (the overflow argument below).
  for (uint32_t u = bits(-0.0f); u < bits(-0.0f) + (1u << 22); ++u)
    ASSERT_LE(sampler_exp(from_bits(u)), 1.0f) << from_bits(u);
}

TEST(SamplerMath, MassOfTheMaximumIsTwoToThe40AndAVocabularyOfThemFitsInU64) {
  EXPECT_EQ(sampler_mass(0.0f), uint64_t{1} << kMassFractionBits);
  EXPECT_EQ(sampler_mass(-0.0f), uint64_t{1} << 40);
  EXPECT_EQ(sampler_mass(-kInf), 0u);
  EXPECT_EQ(sampler_mass(-40.0f), 0u);  // e^-40 * 2^40 < 1: below the fixed point's unit
  EXPECT_GT(sampler_mass(-27.0f), 0u);
  // The largest possible total: every token at the row maximum. Summed the way the samplers
  // do (u64 adds), it is exact and stays below 2^58 as the header promises.
  uint64_t total = 0;
  for (int64_t v = 0; v < kQwen3Vocab; ++v) total += sampler_mass(0.0f);
  EXPECT_EQ(total, static_cast<uint64_t>(kQwen3Vocab) << 40);
  EXPECT_LT(total, uint64_t{1} << 58);
}

TEST(SamplerMath, TopPTargetIsTheFlooredFractionOfTheTotal) {
  const uint64_t total = uint64_t{4} << 40;  // four tokens at the maximum
  EXPECT_EQ(top_p_target(0.5f, total), uint64_t{2} << 40);
  EXPECT_EQ(top_p_target(0.25f, total), uint64_t{1} << 40);
  EXPECT_EQ(top_p_target(1.0f, total), total);
  EXPECT_GT(top_p_target(std::nextafter(0.5f, 1.0f), total), uint64_t{2} << 40);
  EXPECT_LT(top_p_target(std::nextafter(0.5f, 0.0f), total), uint64_t{2} << 40);
  // The product is floored, and top_p is the float the slot holds: 0.9f is 0.899999976.
  EXPECT_EQ(top_p_target(0.9f, 10), 8u);
}

TEST(SamplerMath, OrderedBitsRoundTripAndFollowTheFloatOrder) {
  // [12] ascending; -0 and +0 compare equal as floats but get distinct, adjacent keys, which
  // is why scaled_logit folds -0 into +0 before a key is made.
  const std::vector<float> ascending{-kInf,
                                     -std::numeric_limits<float>::max(),
                                     -1.0f,
                                     -std::numeric_limits<float>::min(),
                                     -std::numeric_limits<float>::denorm_min(),
                                     -0.0f,
                                     0.0f,
                                     std::numeric_limits<float>::denorm_min(),
                                     std::numeric_limits<float>::min(),
                                     1.0f,
                                     std::numeric_limits<float>::max(),
                                     kInf};
  for (size_t i = 0; i < ascending.size(); ++i) {
    EXPECT_EQ(bits(float_from_ordered(ordered_bits(ascending[i]))), bits(ascending[i])) << i;
    if (i > 0) {
      EXPECT_LT(ordered_bits(ascending[i - 1]), ordered_bits(ascending[i])) << i;
    }
  }
  EXPECT_EQ(ordered_bits(-0.0f) + 1, ordered_bits(0.0f));
  // Random bit patterns (NaNs skipped): the key order is the float order, the trip exact.
  std::mt19937 rng(5);
  for (int i = 0; i < 200000; ++i) {
    const float a = from_bits(static_cast<uint32_t>(rng())),
                b = from_bits(static_cast<uint32_t>(rng()));
    if (std::isnan(a) || std::isnan(b)) continue;
    ASSERT_EQ(bits(float_from_ordered(ordered_bits(a))), bits(a));
    if (a < b) {
      ASSERT_LT(ordered_bits(a), ordered_bits(b)) << a << " " << b;
    } else if (a > b) {
      ASSERT_GT(ordered_bits(a), ordered_bits(b)) << a << " " << b;
    }
  }
}

TEST(SamplerMath, ScaledLogitFoldsNegativeZeroIntoPositiveZero) {
  EXPECT_EQ(bits(scaled_logit(-0.0f, 0.6f)), bits(0.0f));
  // A tiny negative logit over a large temperature underflows to -0: folded as well.
  EXPECT_EQ(bits(scaled_logit(-std::numeric_limits<float>::denorm_min(), 4.0f)), bits(0.0f));
  EXPECT_EQ(candidate_key(scaled_logit(-0.0f, 1.0f), 7), candidate_key(0.0f, 7));
  EXPECT_EQ(scaled_logit(3.0f, 0.5f), 6.0f);
  EXPECT_EQ(scaled_logit(-kInf, 0.01f), -kInf);
}

TEST(SamplerMath, CandidateKeyOrdersLogitDescendingThenIdAscendingAndInverts) {
  EXPECT_GT(candidate_key(1.0f, 5), candidate_key(0.5f, 0));
  EXPECT_GT(candidate_key(1.0f, 3), candidate_key(1.0f, 4));
  EXPECT_GT(candidate_key(-kInf, 0), candidate_key(-kInf, 1));
  // The CUDA kernel pads and initialises with key 0: no real (logit, id) may map to it.
  EXPECT_GT(candidate_key(-kInf, static_cast<int32_t>(kQwen3Vocab - 1)), 0u);
  EXPECT_GT(candidate_key(-kInf, std::numeric_limits<int32_t>::max()), 0u);
  for (float l : {-kInf, -3.5f, -0.0f, 0.0f, 1e-30f, 7.25f, kInf})
    for (int32_t id :
         {0, 1, 4095, static_cast<int32_t>(kQwen3Vocab - 1), std::numeric_limits<int32_t>::max()}) {
      const uint64_t key = candidate_key(l, id);
      EXPECT_EQ(bits(key_logit(key)), bits(l)) << l << " " << id;
      EXPECT_EQ(key_id(key), id) << l << " " << id;
    }
  // Sorting by key descending is the reference's comparator: few distinct logits, many ties.
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> pick(-4, 4);
  struct Cand {
    float l;
    int32_t id;
  };
  std::vector<Cand> by_rule, by_key;  // [5000] each
  for (int32_t id = 0; id < 5000; ++id)
    by_rule.push_back({scaled_logit(pick(rng) * 0.5f, 0.7f), id});
  std::shuffle(by_rule.begin(), by_rule.end(), rng);
  by_key = by_rule;
  std::sort(by_rule.begin(), by_rule.end(),
            [](const Cand& a, const Cand& b) { return a.l > b.l || (a.l == b.l && a.id < b.id); });
  std::sort(by_key.begin(), by_key.end(), [](const Cand& a, const Cand& b) {
    return candidate_key(a.l, a.id) > candidate_key(b.l, b.id);
  });
  for (size_t i = 0; i < by_rule.size(); ++i) ASSERT_EQ(by_key[i].id, by_rule[i].id) << i;
}

}  // namespace
}  // namespace nanovllm::kernels
