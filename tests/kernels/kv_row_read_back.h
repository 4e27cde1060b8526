// A quantized KV cache row through the CPU backend and back (the fp8 and int8 cache tests):
// one token's K and V rows go into a two-block cache by store_kvcache, at slot block_size (block
// 1, row 0), and decode attention over that one key reads them back: its output is the cached
// V row, as the cache holds it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/bf16.h"
#include "kernels/kv_cache.h"

namespace nanovllm::test {

// One token's K and V rows ([Hkv, D] bf16 each) of normal(0, magnitude) values.
struct KvRows {
  std::vector<uint16_t> k, v;
};
inline KvRows normal_kv_rows(std::mt19937& rng, float magnitude, int64_t hkv, int64_t d) {
  std::normal_distribution<float> normal(0.0f, magnitude);
  KvRows r{std::vector<uint16_t>(hkv * d), std::vector<uint16_t>(hkv * d)};
  for (auto& x : r.k) x = float_to_bf16(normal(rng));
  for (auto& x : r.v) x = float_to_bf16(normal(rng));
  return r;
}

// The largest |value| of head h's row in x ([Hkv, D] bf16).
inline float row_max_abs(const std::vector<uint16_t>& x, int64_t h, int64_t d) {
  float m = 0.0f;
  for (int64_t i = 0; i < d; ++i) m = std::max(m, std::fabs(bf16_to_float(x[h * d + i])));
  return m;
}

struct KvRowReadBack {
  std::vector<uint16_t> out;     // [Hkv, D] bf16: the V rows as read
  std::vector<int8_t> v_scale;   // the V rows' exponents or scale codes, [Hkv] (block 1, row 0)
  std::vector<uint8_t> v_bytes;  // the V rows' cached bytes, [Hkv, D]
};

// k, v: [Hkv, D] bf16; dtype: kFp8E4M3 or kI8.
inline KvRowReadBack read_back_kv_row(DType dtype, const std::vector<uint16_t>& k,
                                      const std::vector<uint16_t>& v, int64_t hkv, int64_t d) {
  const int64_t bs = 16, nb = 2;
  std::vector<uint8_t> k_cache(nb * bs * hkv * d), v_cache(nb * bs * hkv * d);
  std::vector<int8_t> k_scale(nb * bs * hkv), v_scale(nb * bs * hkv);
  std::vector<int32_t> slot{static_cast<int32_t>(bs)}, table{1, 0}, context{1};
  std::vector<uint16_t> q(hkv * d, float_to_bf16(0.01f));
  const TensorView kc(k_cache.data(), dtype, {nb, bs, hkv, d});
  const TensorView vc(v_cache.data(), dtype, {nb, bs, hkv, d});
  const TensorView ks(k_scale.data(), DType::kI8, {nb, hkv, bs});
  const TensorView vs(v_scale.data(), DType::kI8, {nb, hkv, bs});
  kernels::cpu::store_kvcache(
      TensorView(const_cast<uint16_t*>(k.data()), DType::kBf16, {1, hkv, d}),
      TensorView(const_cast<uint16_t*>(v.data()), DType::kBf16, {1, hkv, d}), kc, vc,
      TensorView(slot.data(), DType::kI32, {1}), ks, vs);
  KvRowReadBack r;
  r.out.resize(hkv * d);
  kernels::DecodeAttentionParams p;
  p.out = TensorView(r.out.data(), DType::kBf16, {1, hkv, d});
  p.q = TensorView(q.data(), DType::kBf16, {1, hkv, d});
  p.kv = {kc, vc, TensorView(table.data(), DType::kI32, {1, 2}), ks, vs};
  p.context_lens = TensorView(context.data(), DType::kI32, {1});
  p.max_context_len = 1;
  p.scale = 0.125f;
  kernels::cpu::decode_attention(p);
  for (int64_t h = 0; h < hkv; ++h) r.v_scale.push_back(v_scale[(hkv + h) * bs]);
  r.v_bytes.assign(v_cache.begin() + bs * hkv * d, v_cache.begin() + (bs + 1) * hkv * d);
  return r;
}

}  // namespace nanovllm::test
