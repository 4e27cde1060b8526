// Embedding, RMSNorm, SiLU-and-mul and the KV store against obvious double references; the
// pending inputs of a decode step launched ahead against their rule.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/activation.h"
#include "kernels/embedding.h"
#include "kernels/kv_cache.h"
#include "kernels/pending_inputs.h"
#include "kernels/rms_norm.h"
#include "tests/kernels/cpu_test_util.h"

namespace nanovllm {
namespace {

using test::bf;

TEST(EmbeddingCpu, CopiesOwnedRowsAndZeroesIdsOutsideTheShard) {
  std::mt19937 rng(21);
  const int64_t vocab_start = 10, shard = 5, h = 7;
  auto weight = test::random_bf16(shard * h, rng);
  std::vector<int32_t> ids{10, 14, 9, 15, 12, 0};
  std::vector<uint16_t> out(ids.size() * h, 0xffff);
  const int64_t t = static_cast<int64_t>(ids.size());
  kernels::cpu::embedding(test::view(out, {t, h}), test::view(ids, {t}),
                          test::view(weight, {shard, h}), vocab_start);
  for (int64_t i = 0; i < t; ++i) {
    const bool owned = ids[i] >= vocab_start && ids[i] < vocab_start + shard;
    for (int64_t e = 0; e < h; ++e)
      EXPECT_EQ(out[i * h + e], owned ? weight[(ids[i] - vocab_start) * h + e] : 0) << i;
  }
}

TEST(ResolvePendingInputsCpu, TakesEachPendingRowsSlotTokenAndKeepsTheOthers) {
  std::vector<int32_t> last_tokens{70, 71, 72, 73, 74};  // [N] by slot
  std::vector<int32_t> ids{-1, 5, -1, -1, 0};            // [B], -1 = pending
  std::vector<int32_t> slots{3, 1, 0, 4, 2};             // [B]
  const int64_t b = static_cast<int64_t>(ids.size());
  kernels::cpu::resolve_pending_inputs(test::view(ids, {b}), test::view(slots, {b}),
                                       test::view(last_tokens, {5}));
  EXPECT_EQ(ids, (std::vector<int32_t>{73, 5, 70, 74, 0}));
}

std::vector<double> rms_ref(const std::vector<double>& x, const std::vector<uint16_t>& w,
                            double eps) {
  double ms = 0.0;
  for (double v : x) ms += v * v;
  ms /= static_cast<double>(x.size());
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] / std::sqrt(ms + eps) * bf(w[i]);
  return out;
}

TEST(RmsNormCpu, MatchesDoubleReferenceOnStridedRows) {
  std::mt19937 rng(22);
  const int64_t t = 5, h = 129, stride = 140;
  auto x = test::random_bf16(t * stride, rng, -3.0f, 3.0f);
  auto w = test::random_bf16(h, rng, 0.5f, 2.0f);
  std::vector<uint16_t> out(t * h);
  TensorView xv = test::view(x, {t, stride});
  xv.shape[1] = h;
  kernels::cpu::rms_norm(test::view(out, {t, h}), xv, test::view(w, {h}), 1e-6f);
  for (int64_t i = 0; i < t; ++i) {
    std::vector<double> row(h);
    for (int64_t e = 0; e < h; ++e) row[e] = bf(x[i * stride + e]);
    const auto want = rms_ref(row, w, 1e-6);
    for (int64_t e = 0; e < h; ++e)
      ASSERT_TRUE(test::close(bf(out[i * h + e]), want[e], 1e-3, 8e-3));
  }
}

TEST(RmsNormCpu, FusedAddStoresBf16SumInResidualAndNormalizesIt) {
  std::mt19937 rng(23);
  const int64_t t = 3, h = 64;
  auto x = test::random_bf16(t * h, rng, -3.0f, 3.0f);
  auto res = test::random_bf16(t * h, rng, -3.0f, 3.0f);
  auto w = test::random_bf16(h, rng, 0.5f, 2.0f);
  const auto x0 = x, res0 = res;
  kernels::cpu::fused_add_rms_norm(test::view(x, {t, h}), test::view(res, {t, h}),
                                   test::view(w, {h}), 1e-6f);
  for (int64_t i = 0; i < t; ++i) {
    std::vector<double> sum(h);
    for (int64_t e = 0; e < h; ++e) {
      // The residual is the sum rounded once to bf16 (exact in float for bf16 inputs).
      const float s = bf16_to_float(x0[i * h + e]) + bf16_to_float(res0[i * h + e]);
      ASSERT_EQ(res[i * h + e], float_to_bf16(s));
      sum[e] = bf(float_to_bf16(s));
    }
    const auto want = rms_ref(sum, w, 1e-6);
    for (int64_t e = 0; e < h; ++e) ASSERT_TRUE(test::close(bf(x[i * h + e]), want[e], 1e-3, 8e-3));
  }
}

TEST(ActivationCpu, SiluAndMulMatchesDoubleReference) {
  std::mt19937 rng(24);
  const int64_t t = 4, inter = 37;
  auto x = test::random_bf16(t * 2 * inter, rng, -6.0f, 6.0f);
  std::vector<uint16_t> out(t * inter);
  kernels::cpu::silu_and_mul(test::view(out, {t, inter}), test::view(x, {t, 2 * inter}));
  for (int64_t i = 0; i < t; ++i)
    for (int64_t e = 0; e < inter; ++e) {
      const double g = bf(x[i * 2 * inter + e]), u = bf(x[i * 2 * inter + inter + e]);
      ASSERT_TRUE(test::close(bf(out[i * inter + e]), g / (1.0 + std::exp(-g)) * u, 1e-3, 8e-3));
    }
}

TEST(KvCacheCpu, StoresEachTokenInItsSlotAndSkipsMinusOne) {
  std::mt19937 rng(25);
  const int64_t blocks = 4, bs = 3, hkv = 2, d = 8, t = 5, stride = 5 * hkv * d;
  auto qkv = test::random_bf16(t * stride, rng);
  TensorView k(qkv.data() + hkv * d, DType::kBf16, {t, hkv, d});
  TensorView v(qkv.data() + 2 * hkv * d, DType::kBf16, {t, hkv, d});
  k.stride[0] = v.stride[0] = stride;
  std::vector<uint16_t> kc(blocks * bs * hkv * d, 7), vc(blocks * bs * hkv * d, 7);
  std::vector<int32_t> slots{11, 0, -1, 5, 3};
  kernels::cpu::store_kvcache(k, v, test::view(kc, {blocks, bs, hkv, d}),
                              test::view(vc, {blocks, bs, hkv, d}), test::view(slots, {t}));
  std::vector<bool> written(blocks * bs, false);
  for (int64_t i = 0; i < t; ++i) {
    if (slots[i] < 0) continue;
    written[slots[i]] = true;
    for (int64_t e = 0; e < hkv * d; ++e) {
      ASSERT_EQ(kc[slots[i] * hkv * d + e], qkv[i * stride + hkv * d + e]);
      ASSERT_EQ(vc[slots[i] * hkv * d + e], qkv[i * stride + 2 * hkv * d + e]);
    }
  }
  for (int64_t s = 0; s < blocks * bs; ++s)
    if (!written[s]) {
      for (int64_t e = 0; e < hkv * d; ++e) ASSERT_EQ(kc[s * hkv * d + e], 7);
    }
}

}  // namespace
}  // namespace nanovllm
