// CUDA paged attention (prefill on tensor cores, flash-decoding) against the CPU reference
// on random paged caches with shuffled block tables. Outputs are bf16 convex combinations of
// V rows in [-1, 1]; the CPU keeps softmax weights in f32 while the prefill kernel rounds P to
// bf16 for the tensor cores (relative 2^-9 per weight, averaging out over keys), and both
// round the output once: relative L2 error < 1e-2 and max |diff| < 2e-2 cover that with
// margin, while any indexing or masking error gives O(1) differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/attention.h"
#include "tests/kernels/cuda_test_util.h"

namespace nanovllm::test {
namespace {

struct Seq {
  int q_len, k_len;  // decode: q_len == 1, k_len == context length
};

// A paged cache holding every sequence's keys in randomly chosen blocks.
struct PagedCase {
  int64_t d, hq, hkv, bs, num_blocks, max_blocks;
  std::vector<uint16_t> k, v;   // [num_blocks, bs, hkv, d]
  std::vector<int32_t> tables;  // [B, max_blocks], -1 padded
  PagedCase(const std::vector<Seq>& seqs, int64_t head_dim, int64_t q_heads, int64_t kv_heads,
            int64_t block_size, std::mt19937& rng)
      : d(head_dim), hq(q_heads), hkv(kv_heads), bs(block_size) {
    max_blocks = 1;
    int64_t total = 0;
    for (const Seq& s : seqs) {
      const int64_t nb = (s.k_len + bs - 1) / bs;
      max_blocks = std::max(max_blocks, nb);
      total += nb;
    }
    num_blocks = total + 3;  // a few blocks nobody owns
    std::vector<int32_t> perm(num_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    tables.assign(seqs.size() * max_blocks, -1);
    int64_t next = 0;
    for (size_t b = 0; b < seqs.size(); ++b)
      for (int64_t i = 0; i < (seqs[b].k_len + bs - 1) / bs; ++i)
        tables[b * max_blocks + i] = perm[next++];
    k = random_bf16(num_blocks * bs * hkv * d, rng);
    v = random_bf16(num_blocks * bs * hkv * d, rng);
  }
};

struct DevicePaged {
  DevVec<uint16_t> k, v;
  DevVec<int32_t> tables;
  explicit DevicePaged(const PagedCase& c) : k(c.k), v(c.v), tables(c.tables) {}
  kernels::PagedKV view(const PagedCase& c, int64_t batch) const {
    return {k.view(DType::kBf16, {c.num_blocks, c.bs, c.hkv, c.d}),
            v.view(DType::kBf16, {c.num_blocks, c.bs, c.hkv, c.d}),
            tables.view(DType::kI32, {batch, c.max_blocks})};
  }
};

kernels::PagedKV host_paged(PagedCase& c, int64_t batch) {
  return {host_view(c.k.data(), DType::kBf16, {c.num_blocks, c.bs, c.hkv, c.d}),
          host_view(c.v.data(), DType::kBf16, {c.num_blocks, c.bs, c.hkv, c.d}),
          host_view(c.tables.data(), DType::kI32, {batch, c.max_blocks})};
}

void check_prefill(const std::vector<Seq>& seqs, int64_t d, int64_t hq, int64_t hkv, int64_t bs,
                   uint32_t seed) {
  std::mt19937 rng(seed);
  PagedCase c(seqs, d, hq, hkv, bs, rng);
  const int64_t batch = static_cast<int64_t>(seqs.size());
  std::vector<int32_t> cu_q{0}, cu_k{0};
  int max_q = 0, max_k = 0;
  for (const Seq& s : seqs) {
    cu_q.push_back(cu_q.back() + s.q_len);
    cu_k.push_back(cu_k.back() + s.k_len);
    max_q = std::max(max_q, s.q_len);
    max_k = std::max(max_k, s.k_len);
  }
  const int64_t tq = cu_q.back();
  const int64_t q_pitch = (hq + 2 * hkv) * d;  // q is a view into qkv rows
  auto q = random_bf16(tq * q_pitch, rng, -2, 2);
  std::vector<uint16_t> ref(tq * hq * d);
  kernels::PrefillAttentionParams hp;
  hp.out = host_view(ref.data(), DType::kBf16, {tq, hq, d});
  hp.q = host_view(q.data(), DType::kBf16, {tq, hq, d});
  hp.q.stride[0] = q_pitch;
  hp.kv = host_paged(c, batch);
  hp.cu_seqlens_q = host_view(cu_q.data(), DType::kI32, {batch + 1});
  hp.cu_seqlens_k = host_view(cu_k.data(), DType::kI32, {batch + 1});
  hp.max_seqlen_q = max_q;
  hp.max_seqlen_k = max_k;
  hp.scale = 1.f / std::sqrt(static_cast<float>(d));
  kernels::cpu::prefill_attention(hp);

  DevicePaged dev(c);
  DevVec<uint16_t> dq(q), dout(tq * hq * d);
  DevVec<int32_t> dcq(cu_q), dck(cu_k);
  kernels::PrefillAttentionParams p = hp;
  p.out = dout.view(DType::kBf16, {tq, hq, d});
  p.q = dq.view(DType::kBf16, {tq, hq, d});
  p.q.stride[0] = q_pitch;
  p.kv = dev.view(c, batch);
  p.cu_seqlens_q = dcq.view(DType::kI32, {batch + 1});
  p.cu_seqlens_k = dck.view(DType::kI32, {batch + 1});
  kernels::cuda::prefill_attention(p, nullptr);
  const ErrorStats e = compare_bf16(dout.host(), ref);
  EXPECT_TRUE(e.finite) << "unwritten or NaN output";
  EXPECT_LT(e.rel_l2, 1e-2);
  EXPECT_LT(e.max_abs, 2e-2);
}

void check_decode(const std::vector<int>& ctx, int64_t d, int64_t hq, int64_t hkv, int64_t bs,
                  int max_splits, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Seq> seqs;
  for (int l : ctx) seqs.push_back({1, l});
  PagedCase c(seqs, d, hq, hkv, bs, rng);
  const int64_t batch = static_cast<int64_t>(ctx.size());
  const int max_ctx = *std::max_element(ctx.begin(), ctx.end());
  auto q = random_bf16(batch * hq * d, rng, -2, 2);
  std::vector<int32_t> lens(ctx.begin(), ctx.end());
  std::vector<uint16_t> ref(batch * hq * d);
  kernels::DecodeAttentionParams hp;
  hp.out = host_view(ref.data(), DType::kBf16, {batch, hq, d});
  hp.q = host_view(q.data(), DType::kBf16, {batch, hq, d});
  hp.kv = host_paged(c, batch);
  hp.context_lens = host_view(lens.data(), DType::kI32, {batch});
  hp.max_context_len = max_ctx;
  hp.scale = 1.f / std::sqrt(static_cast<float>(d));
  kernels::cpu::decode_attention(hp);

  DevicePaged dev(c);
  DevVec<uint16_t> dq(q), dout(batch * hq * d);
  DevVec<int32_t> dlens(lens);
  const int64_t ms = std::max(max_splits, 1);
  DevVec<float> split_out(batch * hq * ms * d), split_lse(batch * hq * ms);
  kernels::DecodeAttentionParams p = hp;
  p.out = dout.view(DType::kBf16, {batch, hq, d});
  p.q = dq.view(DType::kBf16, {batch, hq, d});
  p.kv = dev.view(c, batch);
  p.context_lens = dlens.view(DType::kI32, {batch});
  if (max_splits > 0) {
    p.split_out = split_out.view(DType::kF32, {batch, hq, ms, d});
    p.split_lse = split_lse.view(DType::kF32, {batch, hq, ms});
  }
  kernels::cuda::decode_attention(p, nullptr);
  const ErrorStats e = compare_bf16(dout.host(), ref);
  EXPECT_TRUE(e.finite) << "unwritten or NaN output";
  EXPECT_LT(e.rel_l2, 1e-2);
  EXPECT_LT(e.max_abs, 2e-2);
}

TEST(PrefillAttentionCuda, FullBlockSingleTokenAndCachedPrefixHeadDim128Gqa2) {
  SKIP_WITHOUT_CUDA();
  check_prefill({{256, 256}, {1, 1}, {100, 300}, {37, 37}, {1, 513}}, 128, 16, 8, 256, 11);
}

TEST(PrefillAttentionCuda, SmallBlocksHeadDim64Gqa4) {
  SKIP_WITHOUT_CUDA();
  check_prefill({{1, 50}, {64, 64}, {130, 200}, {65, 65}}, 64, 8, 2, 16, 12);
}

TEST(PrefillAttentionCuda, NoGqaOddLengths) {
  SKIP_WITHOUT_CUDA();
  check_prefill({{513, 513}, {3, 70}}, 128, 4, 4, 32, 13);
  check_prefill({{127, 129}, {200, 200}}, 64, 2, 2, 256, 14);
}

TEST(PrefillAttentionCuda, MaxModelLen4096) {
  SKIP_WITHOUT_CUDA();
  check_prefill({{4096, 4096}}, 128, 2, 1, 256, 15);
  check_prefill({{1000, 4096}}, 64, 4, 1, 256, 16);  // long cached prefix, GQA 4
}

TEST(DecodeAttentionCuda, Batch1ContextEdgesWithAndWithoutSplits) {
  SKIP_WITHOUT_CUDA();
  for (int splits : {0, 1, 16}) {
    check_decode({1}, 128, 16, 8, 256, splits, 21);
    check_decode({256}, 128, 16, 8, 256, splits, 22);  // one exactly full block
    check_decode({4096}, 128, 16, 8, 256, splits, 23);
    check_decode({257}, 64, 8, 2, 16, splits, 24);
  }
}

TEST(DecodeAttentionCuda, MixedLengthsGqa124HeadDims) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(25);
  std::uniform_int_distribution<int> len(1, 700);
  std::vector<int> ctx(37);
  for (auto& l : ctx) l = len(rng);
  ctx[0] = 1;
  ctx[1] = 16;
  for (int64_t g : {1, 2, 4}) {
    check_decode(ctx, 128, 4 * g, 4, 16, 32, 26);
    check_decode(ctx, 64, 2 * g, 2, 32, 0, 27);
  }
}

TEST(DecodeAttentionCuda, Batch512) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(28);
  std::uniform_int_distribution<int> len(1, 300);
  std::vector<int> ctx(512);
  for (auto& l : ctx) l = len(rng);
  check_decode(ctx, 128, 8, 2, 16, 8, 29);
  check_decode(ctx, 64, 16, 8, 16, 0, 30);
}

}  // namespace
}  // namespace nanovllm::test
