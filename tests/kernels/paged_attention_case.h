// Random paged-attention inputs shared by the CUDA attention tests (attention_cuda_test.cpp,
// prefill_attention_hopper_cuda_test.cpp): a paged cache whose blocks are dealt to the
// sequences in shuffled order (so a kernel that ignores the block table reads wrong keys), and
// a prefill batch over it with its CPU reference and device copies. Either cache may be fp8
// (--kv-cache-dtype fp8: kernels/fp8.h's rows with their exponents), which the CPU reference
// reads as well: the kernels are held to the same tolerance on the same dequantized values.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/fp8.h"
#include "kernels/int8_kv.h"
#include "tests/kernels/cuda_test_util.h"

namespace nanovllm::test {

struct Seq {
  int q_len, k_len;  // decode: q_len == 1, k_len == context length
};

// A decode batch of these context lengths (one query each).
inline std::vector<Seq> decode_seqs(const std::vector<int>& lens) {
  std::vector<Seq> seqs;
  for (int l : lens) seqs.push_back({1, l});
  return seqs;
}

// A paged cache holding every sequence's keys in randomly chosen blocks.
struct PagedCase {
  int64_t d, hq, hkv, bs, num_blocks, max_blocks;
  std::vector<uint16_t> k, v;   // [num_blocks, bs, hkv, d]
  std::vector<int32_t> tables;  // [B, max_blocks], -1 padded
  // 8-bit caches only (fp8: an 8-bit cache, of element dtype8: kFp8E4M3 or kI8): every row of
  // k and v scaled by 2^-s (s in 0..3, drawn per row, so that rows get different exponents or
  // scale codes), then encoded: k8, v8 [num_blocks, bs, hkv, d], ks, vs [num_blocks, hkv, bs].
  bool fp8 = false;
  DType dtype8 = DType::kFp8E4M3;
  std::vector<uint8_t> k8, v8;
  std::vector<int8_t> ks, vs;
  PagedCase(const std::vector<Seq>& seqs, int64_t head_dim, int64_t q_heads, int64_t kv_heads,
            int64_t block_size, std::mt19937& rng, bool fp8_cache = false,
            DType cache8 = DType::kFp8E4M3)
      : d(head_dim), hq(q_heads), hkv(kv_heads), bs(block_size), fp8(fp8_cache), dtype8(cache8) {
    max_blocks = 1;
    int64_t total = 0;
    for (const Seq& s : seqs) {
      const int64_t nb = (s.k_len + bs - 1) / bs;
      max_blocks = std::max(max_blocks, nb);
      total += nb;
    }
    num_blocks = total + 3;  // a few blocks nobody owns
    deal(seqs, rng);
    k = random_bf16(num_blocks * bs * hkv * d, rng);
    v = random_bf16(num_blocks * bs * hkv * d, rng);
    if (fp8) {
      encode(k, k8, ks, rng);
      encode(v, v8, vs, rng);
    }
  }
  void encode(const std::vector<uint16_t>& x, std::vector<uint8_t>& bytes,
              std::vector<int8_t>& exponents, std::mt19937& rng) const {
    std::uniform_int_distribution<int> shift(0, 3);
    bytes.resize(x.size());
    exponents.resize(num_blocks * hkv * bs);
    for (int64_t b = 0; b < num_blocks; ++b)
      for (int64_t o = 0; o < bs; ++o)
        for (int64_t h = 0; h < hkv; ++h) {
          const int64_t row = ((b * bs + o) * hkv + h) * d;
          const int s = shift(rng);
          float max_abs = 0.f;
          for (int64_t i = 0; i < d; ++i)
            max_abs = std::max(max_abs, std::fabs(std::ldexp(bf16_to_float(x[row + i]), -s)));
          if (dtype8 == DType::kI8) {
            const int8_t c = int8_kv_scale_code(max_abs);
            exponents[(b * hkv + h) * bs + o] = c;
            const float scale = int8_kv_scale(c);
            for (int64_t i = 0; i < d; ++i)
              bytes[row + i] = int8_kv_byte(
                  int8_kv_from_float(std::ldexp(bf16_to_float(x[row + i]), -s), scale));
            continue;
          }
          const int8_t e = fp8_row_exponent(max_abs);
          exponents[(b * hkv + h) * bs + o] = e;
          for (int64_t i = 0; i < d; ++i)
            bytes[row + i] = fp8_e4m3_from_float(std::ldexp(bf16_to_float(x[row + i]), -s - e));
        }
  }
  // Fresh tables for these sequences (each no longer than the case was built for): blocks
  // drawn at random, without repeats, from the whole cache; rows of k_len 0 stay all -1.
  void deal(const std::vector<Seq>& seqs, std::mt19937& rng) {
    std::vector<int32_t> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    tables.assign(seqs.size() * max_blocks, -1);
    int64_t next = 0;
    for (size_t b = 0; b < seqs.size(); ++b) {
      const int64_t nb = (seqs[b].k_len + bs - 1) / bs;
      CHECK_LE(nb, max_blocks);
      for (int64_t i = 0; i < nb; ++i) tables[b * max_blocks + i] = perm[next++];
    }
    CHECK_LE(next, num_blocks);
  }
};

struct DevicePaged {
  DevVec<uint16_t> k, v;
  DevVec<int32_t> tables;
  DevVec<uint8_t> k8, v8;  // fp8 only (else empty)
  DevVec<int8_t> ks, vs;
  explicit DevicePaged(const PagedCase& c)
      : k(c.k), v(c.v), tables(c.tables), k8(c.k8), v8(c.v8), ks(c.ks), vs(c.vs) {}
  kernels::PagedKV view(const PagedCase& c, int64_t batch) const {
    if (c.fp8)
      return {k8.view(c.dtype8, {c.num_blocks, c.bs, c.hkv, c.d}),
              v8.view(c.dtype8, {c.num_blocks, c.bs, c.hkv, c.d}),
              tables.view(DType::kI32, {batch, c.max_blocks}),
              ks.view(DType::kI8, {c.num_blocks, c.hkv, c.bs}),
              vs.view(DType::kI8, {c.num_blocks, c.hkv, c.bs})};
    return {k.view(DType::kBf16, {c.num_blocks, c.bs, c.hkv, c.d}),
            v.view(DType::kBf16, {c.num_blocks, c.bs, c.hkv, c.d}),
            tables.view(DType::kI32, {batch, c.max_blocks})};
  }
};

inline kernels::PagedKV host_paged(PagedCase& c, int64_t batch) {
  if (c.fp8)
    return {host_view(c.k8.data(), c.dtype8, {c.num_blocks, c.bs, c.hkv, c.d}),
            host_view(c.v8.data(), c.dtype8, {c.num_blocks, c.bs, c.hkv, c.d}),
            host_view(c.tables.data(), DType::kI32, {batch, c.max_blocks}),
            host_view(c.ks.data(), DType::kI8, {c.num_blocks, c.hkv, c.bs}),
            host_view(c.vs.data(), DType::kI8, {c.num_blocks, c.hkv, c.bs})};
  return {host_view(c.k.data(), DType::kBf16, {c.num_blocks, c.bs, c.hkv, c.d}),
          host_view(c.v.data(), DType::kBf16, {c.num_blocks, c.bs, c.hkv, c.d}),
          host_view(c.tables.data(), DType::kI32, {batch, c.max_blocks})};
}

// A prefill batch (every sequence's keys already in the cache) with q in [-2, 2] read as the
// q slice of fused qkv rows, so its token stride is (hq + 2 hkv) * d, wider than hq * d.
struct PrefillCase {
  std::mt19937 rng;  // first: the cache and then q are drawn from it
  PagedCase cache;
  int64_t d, hq, batch, q_pitch, tq = 0;
  std::vector<int32_t> cu_q{0}, cu_k{0};  // [B + 1]
  int max_q = 0, max_k = 0;
  std::vector<uint16_t> q;  // [tq, q_pitch]
  PrefillCase(const std::vector<Seq>& seqs, int64_t head_dim, int64_t q_heads, int64_t kv_heads,
              int64_t block_size, uint32_t seed, bool fp8_cache = false,
              DType cache8 = DType::kFp8E4M3)
      : rng(seed),
        cache(seqs, head_dim, q_heads, kv_heads, block_size, rng, fp8_cache, cache8),
        d(head_dim),
        hq(q_heads),
        batch(static_cast<int64_t>(seqs.size())),
        q_pitch((q_heads + 2 * kv_heads) * head_dim) {
    for (const Seq& s : seqs) {
      cu_q.push_back(cu_q.back() + s.q_len);
      cu_k.push_back(cu_k.back() + s.k_len);
      max_q = std::max(max_q, s.q_len);
      max_k = std::max(max_k, s.k_len);
    }
    tq = cu_q.back();
    q = random_bf16(tq * q_pitch, rng, -2, 2);
  }
  float scale() const { return 1.f / std::sqrt(static_cast<float>(d)); }
  // The CPU reference output, [tq, hq, d].
  std::vector<uint16_t> cpu_reference() {
    std::vector<uint16_t> ref(tq * hq * d);
    kernels::PrefillAttentionParams p;
    p.out = host_view(ref.data(), DType::kBf16, {tq, hq, d});
    p.q = host_view(q.data(), DType::kBf16, {tq, hq, d});
    p.q.stride[0] = q_pitch;
    p.kv = host_paged(cache, batch);
    p.cu_seqlens_q = host_view(cu_q.data(), DType::kI32, {batch + 1});
    p.cu_seqlens_k = host_view(cu_k.data(), DType::kI32, {batch + 1});
    p.max_seqlen_q = max_q;
    p.max_seqlen_k = max_k;
    p.scale = scale();
    kernels::cpu::prefill_attention(p, reference_threads());
    return ref;
  }
};

// Device copies of a PrefillCase and the params that read them (callers may redirect a view).
struct DevicePrefill {
  DevicePaged kv;
  DevVec<uint16_t> q, out;     // q: [tq, q_pitch]; out: [tq, hq, d]
  DevVec<int32_t> cu_q, cu_k;  // [B + 1]
  kernels::PrefillAttentionParams params;
  explicit DevicePrefill(const PrefillCase& c)
      : kv(c.cache), q(c.q), out(c.tq * c.hq * c.d), cu_q(c.cu_q), cu_k(c.cu_k) {
    params.out = out.view(DType::kBf16, {c.tq, c.hq, c.d});
    params.q = q.view(DType::kBf16, {c.tq, c.hq, c.d});
    params.q.stride[0] = c.q_pitch;
    params.kv = kv.view(c.cache, c.batch);
    params.cu_seqlens_q = cu_q.view(DType::kI32, {c.batch + 1});
    params.cu_seqlens_k = cu_k.view(DType::kI32, {c.batch + 1});
    params.max_seqlen_q = c.max_q;
    params.max_seqlen_k = c.max_k;
    params.scale = c.scale();
  }
  // Poisons out (0xFF bytes: bf16 NaN, so a row the kernel never writes fails the finiteness
  // check), calls launch(params) on the default stream, returns out [tq, hq, d].
  template <typename Launch>
  std::vector<uint16_t> run(Launch&& launch) {
    out.mem.poison();
    launch(params);
    return out.host();
  }
};

}  // namespace nanovllm::test
