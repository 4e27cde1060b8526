#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/attention.h"
#include "tests/kernels/cpu_test_util.h"

namespace nanovllm {
namespace {

using test::bf;

// One sequence in a batch: k_len keys (un-paged, [k_len, Hkv, D]) of which the last q_len
// have queries ([q_len, Hq, D]).
struct Seq {
  int64_t k_len, q_len;
  std::vector<uint16_t> k, v, q;
  std::vector<int32_t> blocks;  // its block table
};

struct Case {
  int64_t hq, hkv, d, block_size;
  std::vector<std::pair<int64_t, int64_t>> lens;  // (k_len, q_len) per sequence
};

// Dense attention in double with an explicit causal mask: query i (absolute position
// k_len - q_len + i) may see key j iff j <= k_len - q_len + i.
std::vector<double> dense_reference(const Seq& s, int64_t hq, int64_t hkv, int64_t d,
                                    double scale) {
  std::vector<double> out(static_cast<size_t>(s.q_len * hq * d), 0.0);
  for (int64_t i = 0; i < s.q_len; ++i)
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t g = h * hkv / hq;  // kv head shared by this query head
      std::vector<double> logits(s.k_len);
      std::vector<bool> mask(s.k_len);
      double mx = -INFINITY;
      for (int64_t j = 0; j < s.k_len; ++j) {
        mask[j] = j <= s.k_len - s.q_len + i;
        double dot = 0.0;
        for (int64_t e = 0; e < d; ++e)
          dot += bf(s.q[(i * hq + h) * d + e]) * bf(s.k[(j * hkv + g) * d + e]);
        logits[j] = dot * scale;
        if (mask[j]) mx = std::max(mx, logits[j]);
      }
      double denom = 0.0;
      for (int64_t j = 0; j < s.k_len; ++j)
        if (mask[j]) denom += std::exp(logits[j] - mx);
      for (int64_t j = 0; j < s.k_len; ++j) {
        if (!mask[j]) continue;
        const double p = std::exp(logits[j] - mx) / denom;
        for (int64_t e = 0; e < d; ++e)
          out[(i * hq + h) * d + e] += p * bf(s.v[(j * hkv + g) * d + e]);
      }
    }
  return out;
}

// Builds the sequences, a cache with shuffled block ids, and writes K/V into it by hand.
struct Fixture {
  std::vector<Seq> seqs;
  std::vector<uint16_t> k_cache, v_cache;  // [num_blocks, block_size, Hkv, D]
  std::vector<int32_t> block_tables;       // [B, width], -1 padded
  int64_t num_blocks = 0, width = 0;

  Fixture(const Case& c, std::mt19937& rng) {
    int64_t total_blocks = 0;
    for (auto [k_len, q_len] : c.lens) {
      const int64_t nb = (k_len + c.block_size - 1) / c.block_size;
      total_blocks += nb;
      width = std::max(width, nb);
    }
    num_blocks = total_blocks + 3;  // a few unused blocks
    std::vector<int32_t> ids(num_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    const int64_t row = c.hkv * c.d;
    k_cache = test::random_bf16(num_blocks * c.block_size * row, rng, -9.0f, 9.0f);  // garbage
    v_cache = test::random_bf16(num_blocks * c.block_size * row, rng, -9.0f, 9.0f);
    block_tables.assign(c.lens.size() * width, -1);
    size_t next = 0;
    for (size_t b = 0; b < c.lens.size(); ++b) {
      Seq s{c.lens[b].first, c.lens[b].second, {}, {}, {}, {}};
      s.k = test::random_bf16(s.k_len * row, rng);
      s.v = test::random_bf16(s.k_len * row, rng);
      s.q = test::random_bf16(s.q_len * c.hq * c.d, rng, -2.0f, 2.0f);
      for (int64_t j = 0; j < (s.k_len + c.block_size - 1) / c.block_size; ++j) {
        s.blocks.push_back(ids[next++]);
        block_tables[b * width + j] = s.blocks.back();
      }
      for (int64_t j = 0; j < s.k_len; ++j) {
        const int64_t slot = s.blocks[j / c.block_size] * c.block_size + j % c.block_size;
        std::copy_n(s.k.begin() + j * row, row, k_cache.begin() + slot * row);
        std::copy_n(s.v.begin() + j * row, row, v_cache.begin() + slot * row);
      }
      seqs.push_back(std::move(s));
    }
  }
  kernels::PagedKV kv(const Case& c) {
    return {test::view(k_cache, {num_blocks, c.block_size, c.hkv, c.d}),
            test::view(v_cache, {num_blocks, c.block_size, c.hkv, c.d}),
            test::view(block_tables, {static_cast<int64_t>(seqs.size()), width})};
  }
};

std::vector<Case> prefill_cases() {
  return {
      {4, 4, 64, 16, {{1, 1}}},                      // 1-token sequence, MHA
      {8, 4, 64, 16, {{16, 16}, {32, 32}}},          // blocks exactly full, GQA 2
      {8, 2, 128, 16, {{37, 5}, {50, 50}, {3, 1}}},  // cached prefix spanning blocks, GQA 4
      {4, 1, 64, 8, {{40, 17}, {9, 9}}},             // prefix ends mid-block, GQA 4
      {2, 2, 128, 256, {{300, 300}, {13, 2}}},       // the default block size
      {6, 3, 64, 4, {{23, 23}, {24, 8}, {1, 1}}},    // tiny blocks, odd lengths
  };
}

TEST(AttentionCpu, PrefillMatchesDenseCausalReferenceWithCachedPrefixAndGqaOnAnyWorkerCount) {
  std::mt19937 rng(11);
  for (const Case& c : prefill_cases()) {
    Fixture f(c, rng);
    std::vector<int32_t> cu_q{0}, cu_k{0};
    int max_q = 0, max_k = 0;
    for (const Seq& s : f.seqs) {
      cu_q.push_back(cu_q.back() + static_cast<int32_t>(s.q_len));
      cu_k.push_back(cu_k.back() + static_cast<int32_t>(s.k_len));
      max_q = std::max<int>(max_q, s.q_len);
      max_k = std::max<int>(max_k, s.k_len);
    }
    const int64_t tq = cu_q.back(), tok_stride = c.hq * c.d + 2 * c.hkv * c.d;
    // q lives inside a wider qkv buffer, like the model's projection output.
    std::vector<uint16_t> qkv(tq * tok_stride, 0), out(tq * c.hq * c.d, 0);
    int64_t t = 0;
    for (const Seq& s : f.seqs)
      for (int64_t i = 0; i < s.q_len; ++i, ++t)
        std::copy_n(s.q.begin() + i * c.hq * c.d, c.hq * c.d, qkv.begin() + t * tok_stride);
    TensorView q = test::view(qkv, {tq, c.hq, c.d});
    q.stride[0] = tok_stride;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    kernels::PrefillAttentionParams p;
    p.out = test::view(out, {tq, c.hq, c.d});
    p.q = q;
    p.kv = f.kv(c);
    p.cu_seqlens_q = test::view(cu_q, {static_cast<int64_t>(cu_q.size())});
    p.cu_seqlens_k = test::view(cu_k, {static_cast<int64_t>(cu_k.size())});
    p.max_seqlen_q = max_q;
    p.max_seqlen_k = max_k;
    p.scale = scale;
    kernels::cpu::prefill_attention(p);
    // Any worker count gives the same bits: each query row and head is computed alone.
    std::vector<uint16_t> threaded(out.size(), 0);
    kernels::PrefillAttentionParams pt = p;
    pt.out = test::view(threaded, {tq, c.hq, c.d});
    kernels::cpu::prefill_attention(pt, 4);
    ASSERT_EQ(threaded, out) << "4 workers: other bits than 1";
    t = 0;
    for (const Seq& s : f.seqs) {
      const auto want = dense_reference(s, c.hq, c.hkv, c.d, scale);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_TRUE(test::close(bf(out[t * c.hq * c.d + i]), want[i], 2e-3, 1e-2))
            << "hq=" << c.hq << " hkv=" << c.hkv << " d=" << c.d << " k_len=" << s.k_len
            << " q_len=" << s.q_len << " elem " << i << ": " << bf(out[t * c.hq * c.d + i])
            << " vs " << want[i];
      t += s.q_len;
    }
  }
}

TEST(AttentionCpu, DecodeMatchesDenseReferenceOfTheLastQueryOnAnyWorkerCount) {
  std::mt19937 rng(12);
  const std::vector<Case> cases = {
      {4, 4, 64, 16, {{1, 1}, {16, 1}, {17, 1}}},
      {8, 2, 128, 16, {{64, 1}, {5, 1}}},
      {8, 4, 64, 256, {{257, 1}, {256, 1}, {2, 1}}},
      {2, 1, 64, 8, {{33, 1}}},
  };
  for (const Case& c : cases) {
    Fixture f(c, rng);
    const int64_t b = static_cast<int64_t>(f.seqs.size());
    std::vector<uint16_t> q(b * c.hq * c.d), out(b * c.hq * c.d);
    std::vector<int32_t> ctx;
    for (int64_t i = 0; i < b; ++i) {
      std::copy(f.seqs[i].q.begin(), f.seqs[i].q.end(), q.begin() + i * c.hq * c.d);
      ctx.push_back(static_cast<int32_t>(f.seqs[i].k_len));
    }
    kernels::DecodeAttentionParams p;
    p.out = test::view(out, {b, c.hq, c.d});
    p.q = test::view(q, {b, c.hq, c.d});
    p.kv = f.kv(c);
    p.context_lens = test::view(ctx, {b});
    p.max_context_len = *std::max_element(ctx.begin(), ctx.end());
    p.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    kernels::cpu::decode_attention(p);
    std::vector<uint16_t> threaded(out.size(), 0);
    kernels::DecodeAttentionParams pt = p;
    pt.out = test::view(threaded, {b, c.hq, c.d});
    kernels::cpu::decode_attention(pt, 3);
    ASSERT_EQ(threaded, out) << "3 workers: other bits than 1";
    for (int64_t i = 0; i < b; ++i) {
      const auto want = dense_reference(f.seqs[i], c.hq, c.hkv, c.d, p.scale);
      for (size_t e = 0; e < want.size(); ++e)
        ASSERT_TRUE(test::close(bf(out[i * c.hq * c.d + e]), want[e], 2e-3, 1e-2))
            << "seq " << i << " elem " << e;
    }
  }
}

}  // namespace
}  // namespace nanovllm
