#include "kernels/attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_util.h"
#include "kernels/fp8.h"
#include "kernels/int8_kv.h"

namespace nanovllm::kernels::cpu {

namespace {

struct Scratch {
  std::vector<float> q;       // [D]
  std::vector<float> scores;  // [num_keys]
  std::vector<float> acc;     // [D]
  std::vector<float> row;     // [D]: one cached K or V row, in f32
};

// Cached row j of `kv_head` in f32, whichever the cache's dtype (bf16, fp8 through its table
// times the row's power of two, or int8 times the row's scale).
void load_row(const TensorView& cache, const TensorView& scale, int64_t block, int64_t offset,
              int64_t kv_head, float* out) {
  const int64_t d = cache.size(3);
  if (cache.dtype == DType::kI8) {
    const uint8_t* r = elem<uint8_t>(cache, block, offset, kv_head);
    const float s = int8_kv_scale(*elem<int8_t>(scale, block, kv_head, offset));
    for (int64_t i = 0; i < d; ++i) out[i] = static_cast<float>(int8_kv_level(r[i])) * s;
    return;
  }
  if (cache.dtype == DType::kFp8E4M3) {
    const std::array<float, 256>& table = fp8_e4m3_table();
    const uint8_t* r = elem<uint8_t>(cache, block, offset, kv_head);
    const float f = std::ldexp(1.0f, *elem<int8_t>(scale, block, kv_head, offset));
    for (int64_t i = 0; i < d; ++i) out[i] = table[r[i]] * f;
    return;
  }
  const uint16_t* r = elem<uint16_t>(cache, block, offset, kv_head);
  for (int64_t i = 0; i < d; ++i) out[i] = bf16_to_float(r[i]);
}

// One query head over keys [0, num_keys) of one sequence, read through its block table row.
// Softmax and the weighted sum of V in f32; out gets the bf16-rounded result.
void attend(uint16_t* out, const uint16_t* q, const PagedKV& kv, const int32_t* block_row,
            int64_t kv_head, int64_t num_keys, float scale, Scratch& s) {
  const int64_t d = kv.k_cache.size(3);
  const int64_t block_size = kv.k_cache.size(1);
  s.q.resize(d);
  s.acc.assign(d, 0.0f);
  s.scores.resize(std::max<int64_t>(num_keys, 1));
  s.row.resize(d);
  for (int64_t i = 0; i < d; ++i) s.q[i] = bf16_to_float(q[i]);
  auto key_row = [&](const TensorView& cache, const TensorView& scale, int64_t j) {
    const int32_t block = block_row[j / block_size];
    CHECK_GE(block, 0);
    CHECK_LT(block, cache.size(0));
    load_row(cache, scale, block, j % block_size, kv_head, s.row.data());
    return s.row.data();
  };
  float max_score = -INFINITY;
  for (int64_t j = 0; j < num_keys; ++j) {
    const float* k = key_row(kv.k_cache, kv.k_scale, j);
    float dot = 0.0f;
    for (int64_t i = 0; i < d; ++i) dot += s.q[i] * k[i];
    s.scores[j] = dot * scale;
    max_score = std::max(max_score, s.scores[j]);
  }
  float denom = 0.0f;
  for (int64_t j = 0; j < num_keys; ++j) {
    const float p = std::exp(s.scores[j] - max_score);
    denom += p;
    const float* v = key_row(kv.v_cache, kv.v_scale, j);
    for (int64_t i = 0; i < d; ++i) s.acc[i] += p * v[i];
  }
  const float inv = num_keys > 0 ? 1.0f / denom : 0.0f;
  for (int64_t i = 0; i < d; ++i) out[i] = float_to_bf16(s.acc[i] * inv);
}

void check_common(const TensorView& out, const TensorView& q, const PagedKV& kv) {
  CHECK(out.dtype == DType::kBf16 && q.dtype == DType::kBf16);
  CHECK(kv.k_cache.dtype == kv.v_cache.dtype);
  CHECK(kv.k_cache.dtype == DType::kBf16 || kv.k_cache.dtype == DType::kFp8E4M3 ||
        kv.k_cache.dtype == DType::kI8);
  if (kv.k_cache.dtype != DType::kBf16)
    CHECK(kv.k_scale.dtype == DType::kI8 && kv.v_scale.dtype == DType::kI8 &&
          kv.k_scale.ndim == 3 && kv.v_scale.ndim == 3 &&
          kv.k_scale.size(1) == kv.k_cache.size(2) &&  // [num_blocks, Hkv, block_size]
          kv.k_scale.size(2) == kv.k_cache.size(1));
  CHECK(kv.k_cache.is_contiguous() && kv.v_cache.is_contiguous());
  CHECK(q.ndim == 3 && out.ndim == 3 && kv.k_cache.ndim == 4);
  CHECK(q.stride[2] == 1 && out.stride[2] == 1);
  CHECK_EQ(q.size(2), kv.k_cache.size(3));
  CHECK_EQ(q.size(1), out.size(1));
  CHECK_EQ(q.size(1) % kv.k_cache.size(2), 0);
  CHECK(kv.block_tables.dtype == DType::kI32 && kv.block_tables.ndim == 2);
}

}  // namespace

// fn(item, scratch) for item in [0, n) over `threads` workers, dealt round-robin (the work of an
// item grows along a causal prompt, so contiguous ranges would leave the last worker the most).
// Each item writes its own output row: the result does not depend on the thread count.
template <typename Fn>
void for_each_item(int64_t n, int threads, Fn&& fn) {
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(threads, n));
  parallel_for(workers, static_cast<int>(workers), [&](int64_t w_begin, int64_t w_end) {
    Scratch scratch;
    for (int64_t w = w_begin; w < w_end; ++w)
      for (int64_t item = w; item < n; item += workers) fn(item, scratch);
  });
}

void prefill_attention(const PrefillAttentionParams& p, int threads) {
  check_common(p.out, p.q, p.kv);
  const int64_t num_seqs = p.cu_seqlens_q.size(0) - 1;
  CHECK_EQ(p.cu_seqlens_k.size(0), num_seqs + 1);
  CHECK_GE(p.kv.block_tables.size(0), num_seqs);
  const int64_t hq = p.q.size(1);
  const int64_t group = hq / p.kv.k_cache.size(2);
  const int64_t width = p.kv.block_tables.size(1);
  const int64_t block_size = p.kv.k_cache.size(1);
  // Each query row's sequence, keys and table row, checked here on the caller's thread.
  struct Row {
    int64_t token, num_keys;
    const int32_t* block_row;
  };
  std::vector<Row> rows;
  for (int64_t b = 0; b < num_seqs; ++b) {
    const int64_t q_begin = *elem<int32_t>(p.cu_seqlens_q, b);
    const int64_t q_len = *elem<int32_t>(p.cu_seqlens_q, b + 1) - q_begin;
    const int64_t k_len = *elem<int32_t>(p.cu_seqlens_k, b + 1) - *elem<int32_t>(p.cu_seqlens_k, b);
    CHECK_LE(q_len, k_len);
    CHECK_LE((k_len + block_size - 1) / block_size, width);
    const int32_t* block_row = elem<int32_t>(p.kv.block_tables, b);
    for (int64_t i = 0; i < q_len; ++i)  // causal: keys up to own position
      rows.push_back({q_begin + i, k_len - q_len + i + 1, block_row});
  }
  for_each_item(static_cast<int64_t>(rows.size()) * hq, threads,
                [&](int64_t item, Scratch& scratch) {
                  const Row& r = rows[item / hq];
                  const int64_t h = item % hq;
                  attend(elem<uint16_t>(p.out, r.token, h), elem<uint16_t>(p.q, r.token, h), p.kv,
                         r.block_row, h / group, r.num_keys, p.scale, scratch);
                });
}

void decode_attention(const DecodeAttentionParams& p, int threads) {
  check_common(p.out, p.q, p.kv);
  const int64_t num_seqs = p.q.size(0);
  CHECK_EQ(p.context_lens.size(0), num_seqs);
  CHECK_GE(p.kv.block_tables.size(0), num_seqs);
  const int64_t hq = p.q.size(1);
  const int64_t group = hq / p.kv.k_cache.size(2);
  const int64_t width = p.kv.block_tables.size(1);
  const int64_t block_size = p.kv.k_cache.size(1);
  for (int64_t b = 0; b < num_seqs; ++b) {
    const int64_t num_keys = *elem<int32_t>(p.context_lens, b);
    CHECK_LE((num_keys + block_size - 1) / block_size, width);
  }
  for_each_item(num_seqs * hq, threads, [&](int64_t item, Scratch& scratch) {
    const int64_t b = item / hq, h = item % hq;
    attend(elem<uint16_t>(p.out, b, h), elem<uint16_t>(p.q, b, h), p.kv,
           elem<int32_t>(p.kv.block_tables, b), h / group, *elem<int32_t>(p.context_lens, b),
           p.scale, scratch);
  });
}

}  // namespace nanovllm::kernels::cpu
