// FP8 E4M3 (kernels/fp8.h) and the CPU backend's fp8 KV cache: the encoding against the
// format's definition (every byte round-trips, round to nearest even, saturation instead of
// inf or NaN), the row exponent, and a stored row read back through decode attention with one
// key (the output is that V row) within fp8's rounding of the row, however small the row's
// values, which is what the per-row power of two is for.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/fp8.h"
#include "tests/kernels/kv_row_read_back.h"

namespace nanovllm {
namespace {

TEST(Fp8E4M3, KnownValuesFollowTheFormat) {
  EXPECT_EQ(fp8_e4m3_from_float(1.0f), 0x38);  // exponent field 7, mantissa 0
  EXPECT_EQ(fp8_e4m3_from_float(-2.0f), 0xc0);
  EXPECT_EQ(fp8_e4m3_from_float(448.0f), 0x7e);
  EXPECT_EQ(fp8_e4m3_from_float(0.0f), 0x00);
  EXPECT_EQ(fp8_e4m3_from_float(-0.0f), 0x80);
  EXPECT_EQ(fp8_e4m3_from_float(std::ldexp(1.0f, -9)), 0x01);  // the smallest subnormal
  EXPECT_EQ(fp8_e4m3_from_float(std::ldexp(1.0f, -6)), 0x08);  // the smallest normal
  EXPECT_FLOAT_EQ(fp8_e4m3_to_float(0x7e), 448.0f);
  EXPECT_FLOAT_EQ(fp8_e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0xff)));
}

TEST(Fp8E4M3, EveryFiniteByteRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    const float x = fp8_e4m3_to_float(static_cast<uint8_t>(b));
    if (std::isnan(x)) continue;
    EXPECT_EQ(fp8_e4m3_from_float(x), b) << "byte " << b << " = " << x;
  }
}

TEST(Fp8E4M3, RoundsToNearestEvenAndSaturatesInsteadOfInfOrNan) {
  EXPECT_EQ(fp8_e4m3_from_float(17.0f), fp8_e4m3_from_float(16.0f));  // tie: even mantissa
  EXPECT_EQ(fp8_e4m3_from_float(19.0f), fp8_e4m3_from_float(20.0f));  // tie: even mantissa
  EXPECT_EQ(fp8_e4m3_from_float(17.5f), fp8_e4m3_from_float(18.0f));  // nearest
  EXPECT_EQ(fp8_e4m3_from_float(std::ldexp(1.0f, -10)), 0x00);        // tie below 2^-9: even
  for (float big : {449.0f, 464.0f, 1e6f, INFINITY}) {
    EXPECT_EQ(fp8_e4m3_from_float(big), 0x7e) << big;
    EXPECT_EQ(fp8_e4m3_from_float(-big), 0xfe) << big;
  }
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(fp8_e4m3_from_float(NAN))));
}

TEST(Fp8E4M3, RowExponentBringsTheLargestValueIntoRange) {
  EXPECT_EQ(fp8_row_exponent(448.0f), 0);
  EXPECT_EQ(fp8_row_exponent(449.0f), 1);
  EXPECT_EQ(fp8_row_exponent(0.0f), 0);
  for (float m : {1e-6f, 3e-3f, 0.5f, 1.0f, 7.0f, 1000.0f, 3e30f}) {
    const int e = fp8_row_exponent(m);
    EXPECT_LE(std::ldexp(m, -e), 448.0f) << m;
    EXPECT_GT(std::ldexp(m, -e), 224.0f) << m;  // the least such e: range half used at worst
  }
}

// One sequence of one key: decode attention's output is that key's V row, as the cache holds
// it; the cache's rows are written by store_kvcache. Rows of magnitude 1e-3 to 1e3.
TEST(Fp8KvCacheCpu, AStoredRowReadsBackWithinFp8RoundingWhateverItsMagnitude) {
  const int64_t hkv = 2, d = 64;
  std::mt19937 rng(7);
  for (float magnitude : {1e-3f, 1.0f, 1e3f}) {
    const auto [k, v] = test::normal_kv_rows(rng, magnitude, hkv, d);
    const test::KvRowReadBack r = test::read_back_kv_row(DType::kFp8E4M3, k, v, hkv, d);
    for (int64_t h = 0; h < hkv; ++h) {
      const float max_abs = test::row_max_abs(v, h, d);
      const int e = fp8_row_exponent(max_abs);
      EXPECT_EQ(r.v_scale[h], e);
      for (int64_t i = 0; i < d; ++i) {
        const float want = bf16_to_float(v[h * d + i]), got = bf16_to_float(r.out[h * d + i]);
        // Half an fp8 ulp (2^-4 relative for normals, 2^(e - 10) for the row's subnormals),
        // then the output's bf16 rounding.
        const float tol =
            std::max(std::fabs(want) / 16.0f, std::ldexp(1.0f, e - 10)) + std::fabs(want) / 128.0f;
        EXPECT_NEAR(got, want, tol) << "magnitude " << magnitude << " head " << h << " i " << i;
      }
    }
  }
}

}  // namespace
}  // namespace nanovllm
