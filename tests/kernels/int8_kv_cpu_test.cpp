// The int8 KV cache format (kernels/int8_kv.h) and the CPU backend's int8 cache: the scale code
// is the least quarter binade that holds the row, values round to nearest even and saturate
// (an infinity too; a NaN stores 0), levels are stored plus 128, and a stored row reads back
// through decode attention with one key (the output is that V row) within half a step of the row's
// grid, whatever the row's magnitude, closer than fp8 keeps the same row.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/int8_kv.h"
#include "tests/kernels/kv_row_read_back.h"

namespace nanovllm {
namespace {

TEST(Int8KvFormat, ScaleCodeIsTheLeastQuarterBinadeThatHoldsTheRow) {
  EXPECT_EQ(int8_kv_scale_code(127.0f), 0);  // 127 x 2^0 holds 127 exactly
  EXPECT_EQ(int8_kv_scale_code(128.0f), 1);
  EXPECT_EQ(int8_kv_scale_code(254.0f), 4);
  EXPECT_EQ(int8_kv_scale_code(0.0f), 0);
  EXPECT_FLOAT_EQ(int8_kv_scale(4), 2.0f);
  EXPECT_FLOAT_EQ(int8_kv_scale(-5), std::pow(2.0f, -1.25f));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> exponent(-20.0f, 25.0f);  // codes -108..72
  for (int i = 0; i < 2000; ++i) {
    const float m = std::pow(2.0f, exponent(rng));
    const int8_t c = int8_kv_scale_code(m);
    EXPECT_GE(127.0f * int8_kv_scale(c), m * (1.0f - 1e-6f)) << m;
    EXPECT_LT(127.0f * int8_kv_scale(static_cast<int8_t>(c - 1)), m) << m;  // the least
  }
  // Beyond the codes' range: clamped, never wrapped.
  EXPECT_EQ(int8_kv_scale_code(1e-30f), -128);
  EXPECT_EQ(int8_kv_scale_code(1e30f), 127);
  EXPECT_EQ(int8_kv_scale_code(std::numeric_limits<float>::infinity()), 127);
}

TEST(Int8KvFormat, RoundsToNearestEvenAndSaturatesInsteadOfWrapping) {
  EXPECT_EQ(int8_kv_from_float(2.5f, 1.0f), 2);
  EXPECT_EQ(int8_kv_from_float(3.5f, 1.0f), 4);
  EXPECT_EQ(int8_kv_from_float(-2.5f, 1.0f), -2);
  EXPECT_EQ(int8_kv_from_float(0.74f, 0.5f), 1);
  EXPECT_EQ(int8_kv_from_float(1000.0f, 1.0f), 127);
  EXPECT_EQ(int8_kv_from_float(-1000.0f, 1.0f), -127);
  EXPECT_EQ(int8_kv_from_float(std::numeric_limits<float>::infinity(), 1.0f), 127);
  EXPECT_EQ(int8_kv_from_float(std::numeric_limits<float>::quiet_NaN(), 1.0f), 0);
}

TEST(Int8KvFormat, LevelsAreStoredInOffsetBinary) {
  EXPECT_EQ(int8_kv_byte(-127), 1);
  EXPECT_EQ(int8_kv_byte(0), 128);
  EXPECT_EQ(int8_kv_byte(127), 255);
  for (int q = -127; q <= 127; ++q)
    EXPECT_EQ(int8_kv_level(int8_kv_byte(static_cast<int8_t>(q))), q);
}

// The CPU store writes each value's level plus 128, under the row's scale code.
TEST(Int8KvCacheCpu, StoreWritesEachLevelPlus128) {
  const int64_t hkv = 2, d = 64;
  std::mt19937 rng(11);
  const auto [k, v] = test::normal_kv_rows(rng, 3.0f, hkv, d);
  const test::KvRowReadBack r = test::read_back_kv_row(DType::kI8, k, v, hkv, d);
  for (int64_t h = 0; h < hkv; ++h) {
    const float s = int8_kv_scale(r.v_scale[h]);
    for (int64_t i = 0; i < d; ++i)
      EXPECT_EQ(r.v_bytes[h * d + i], int8_kv_from_float(bf16_to_float(v[h * d + i]), s) + 128)
          << "head " << h << " i " << i;
  }
}

// One sequence of one key: decode attention's output is that key's V row, as the cache holds
// it; the cache's rows are written by store_kvcache. Rows of magnitude 1e-3 to 1e3, normal
// values, so the row's largest is about 2.5-3 standard deviations.
TEST(Int8KvCacheCpu, AStoredRowReadsBackWithinHalfAStepCloserThanFp8) {
  const int64_t hkv = 2, d = 64;
  std::mt19937 rng(7);
  for (float magnitude : {1e-3f, 1.0f, 1e3f}) {
    const auto [k, v] = test::normal_kv_rows(rng, magnitude, hkv, d);
    const test::KvRowReadBack int8 = test::read_back_kv_row(DType::kI8, k, v, hkv, d);
    const test::KvRowReadBack fp8 = test::read_back_kv_row(DType::kFp8E4M3, k, v, hkv, d);
    double err_int8 = 0.0, err_fp8 = 0.0;  // sums of |read - stored|
    for (int64_t h = 0; h < hkv; ++h) {
      const float max_abs = test::row_max_abs(v, h, d);
      EXPECT_EQ(int8.v_scale[h], int8_kv_scale_code(max_abs));
      const float step = int8_kv_scale(int8.v_scale[h]);
      for (int64_t i = 0; i < d; ++i) {
        const float want = bf16_to_float(v[h * d + i]), got = bf16_to_float(int8.out[h * d + i]);
        err_int8 += std::fabs(got - want);
        err_fp8 += std::fabs(bf16_to_float(fp8.out[h * d + i]) - want);
        // Half a step of the row's grid, then the output's bf16 rounding.
        EXPECT_NEAR(got, want, step / 2.0f + std::fabs(want) / 128.0f)
            << "magnitude " << magnitude << " head " << h << " i " << i;
      }
    }
    std::printf("[ figures  ] magnitude %g: mean |error| / magnitude int8 %.5f, fp8 %.5f\n",
                magnitude, err_int8 / (hkv * d) / magnitude, err_fp8 / (hkv * d) / magnitude);
    EXPECT_LT(err_int8, 0.6 * err_fp8) << "magnitude " << magnitude;
  }
}

}  // namespace
}  // namespace nanovllm
