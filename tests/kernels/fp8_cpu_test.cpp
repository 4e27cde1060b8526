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

#include "kernels/attention.h"
#include "kernels/bf16.h"
#include "kernels/fp8.h"
#include "kernels/kv_cache.h"

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
  const int64_t hkv = 2, d = 64, bs = 16, nb = 2;
  std::mt19937 rng(7);
  for (float magnitude : {1e-3f, 1.0f, 1e3f}) {
    std::normal_distribution<float> normal(0.0f, magnitude);
    std::vector<uint16_t> k(hkv * d), v(hkv * d), q(hkv * d, float_to_bf16(0.01f));
    for (auto& x : k) x = float_to_bf16(normal(rng));
    for (auto& x : v) x = float_to_bf16(normal(rng));
    std::vector<uint8_t> k_cache(nb * bs * hkv * d), v_cache(nb * bs * hkv * d);
    std::vector<int8_t> k_scale(nb * bs * hkv), v_scale(nb * bs * hkv);
    // The row goes to slot bs: block 1, row 0, the first key of a sequence whose block table
    // starts at block 1.
    std::vector<int32_t> slot{static_cast<int32_t>(bs)}, table{1, 0}, context{1};
    const TensorView kc(k_cache.data(), DType::kFp8E4M3, {nb, bs, hkv, d});
    const TensorView vc(v_cache.data(), DType::kFp8E4M3, {nb, bs, hkv, d});
    const TensorView ks(k_scale.data(), DType::kI8, {nb, hkv, bs});
    const TensorView vs(v_scale.data(), DType::kI8, {nb, hkv, bs});
    kernels::cpu::store_kvcache(TensorView(k.data(), DType::kBf16, {1, hkv, d}),
                                TensorView(v.data(), DType::kBf16, {1, hkv, d}), kc, vc,
                                TensorView(slot.data(), DType::kI32, {1}), ks, vs);
    std::vector<uint16_t> out(hkv * d);
    kernels::DecodeAttentionParams p;
    p.out = TensorView(out.data(), DType::kBf16, {1, hkv, d});
    p.q = TensorView(q.data(), DType::kBf16, {1, hkv, d});
    p.kv = {kc, vc, TensorView(table.data(), DType::kI32, {1, 2}), ks, vs};
    p.context_lens = TensorView(context.data(), DType::kI32, {1});
    p.max_context_len = 1;
    p.scale = 0.125f;
    kernels::cpu::decode_attention(p);
    for (int64_t h = 0; h < hkv; ++h) {
      float max_abs = 0.0f;
      for (int64_t i = 0; i < d; ++i)
        max_abs = std::max(max_abs, std::fabs(bf16_to_float(v[h * d + i])));
      const int e = fp8_row_exponent(max_abs);
      EXPECT_EQ(v_scale[static_cast<size_t>((hkv + h) * bs)], e);  // block 1, head h, row 0
      for (int64_t i = 0; i < d; ++i) {
        const float want = bf16_to_float(v[h * d + i]), got = bf16_to_float(out[h * d + i]);
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
