// The split decode-attention kernel reads the paged cache before it waits for the kernel
// launched ahead of it (programmatic dependent launch), all but each sequence's last tile,
// which holds the new token that kernel writes. Pinned with the model's own producer,
// qk_norm_rope_store, launched right before the attention on one stream: every round the new
// token's cache rows start as NaN and q un-roped, so a tile or query read too early shows up as
// a difference from the same pair run with a synchronisation between.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/rotary.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/paged_attention_case.h"

namespace nanovllm::test {
namespace {

constexpr uint16_t kBf16NaN = 0x7FC0;

// One decode step's attention inputs: qkv rows [B, (Hq + 2 Hkv) D] (the producer ropes q and k
// in place and stores k, v at slot_mapping), the cache with room for every context.
struct PdlCase {
  PdlCase(const std::vector<int>& lens, uint32_t seed)
      : lens(lens),
        batch(static_cast<int64_t>(lens.size())),
        rng(seed),
        cache(decode_seqs(lens), kD, kHq, kHkv, kBlock, rng),
        qkv(random_bf16(batch * pitch(), rng, -2, 2)) {
    for (int64_t b = 0; b < batch; ++b) {  // a padding row (context 0) has no slot
      const int pos = std::max(lens[b] - 1, 0);
      positions.push_back(pos);
      const int32_t block = cache.tables[b * cache.max_blocks + pos / kBlock];
      slots.push_back(lens[b] <= 0 ? -1
                                   : block * static_cast<int32_t>(kBlock) +
                                         pos % static_cast<int32_t>(kBlock));
    }
    poisoned_k = cache.k;
    poisoned_v = cache.v;
    for (int32_t slot : slots)
      for (int64_t i = 0; i < kHkv * kD && slot >= 0; ++i) {
        poisoned_k[slot * kHkv * kD + i] = kBf16NaN;
        poisoned_v[slot * kHkv * kD + i] = kBf16NaN;
      }
    for (int i = 0; i < kD / 2; ++i)
      inv_freq.push_back(std::pow(1e6f, -2.f * static_cast<float>(i) / kD));
    q_norm = random_bf16(kD, rng, 0.5f, 1.5f);
    k_norm = random_bf16(kD, rng, 0.5f, 1.5f);
  }
  static int64_t pitch() { return (kHq + 2 * kHkv) * kD; }

  static constexpr int64_t kD = 128, kHq = 16, kHkv = 8, kBlock = 256;
  std::vector<int> lens;
  int64_t batch;
  std::mt19937 rng;
  PagedCase cache;
  std::vector<uint16_t> qkv, poisoned_k, poisoned_v, q_norm, k_norm;
  std::vector<int32_t> positions, slots;
  std::vector<float> inv_freq;
};

// qk_norm_rope_store then decode_attention on `stream`, from fresh copies (NaN in the new
// token's cache rows), with a stream synchronisation between the two or none (the attention
// launched early). Split scratch with a merge kernel (fused false) or the last-CTA merge.
std::vector<uint16_t> run(const PdlCase& c, bool synced, bool fused, cudaStream_t stream) {
  const int64_t b = c.batch, d = PdlCase::kD, hq = PdlCase::kHq, hkv = PdlCase::kHkv;
  DevVec<uint16_t> qkv(c.qkv), k_cache(c.poisoned_k), v_cache(c.poisoned_v), out(b * hq * d);
  DevVec<uint16_t> q_norm(c.q_norm), k_norm(c.k_norm);
  DevVec<int32_t> tables(c.cache.tables), lens(std::vector<int32_t>(c.lens.begin(), c.lens.end()));
  DevVec<int32_t> positions(c.positions), slots(c.slots);
  DevVec<float> inv_freq(c.inv_freq);
  const int64_t cells = kernels::cuda::decode_attention_split_cells(hq, hkv, d);
  DevVec<float> split_out(cells * (hq / hkv) * d), split_lse(cells * (hq / hkv));
  DevVec<int32_t> counters(std::vector<int32_t>(cells / 2, 0));
  const auto heads = [&](int64_t first, int64_t n) {
    TensorView v(static_cast<uint16_t*>(qkv.mem.get()) + first * d, DType::kBf16, {b, n, d},
                 Device::kCuda);
    v.stride[0] = PdlCase::pitch();
    return v;
  };
  kernels::DecodeAttentionParams p;
  p.out = out.view(DType::kBf16, {b, hq, d});
  p.q = heads(0, hq);
  p.kv = {k_cache.view(DType::kBf16, {c.cache.num_blocks, PdlCase::kBlock, hkv, d}),
          v_cache.view(DType::kBf16, {c.cache.num_blocks, PdlCase::kBlock, hkv, d}),
          tables.view(DType::kI32, {b, c.cache.max_blocks})};
  p.context_lens = lens.view(DType::kI32, {b});
  p.scale = 1.f / std::sqrt(static_cast<float>(d));
  p.split_out = split_out.view(DType::kF32, {cells, hq / hkv, d});
  p.split_lse = split_lse.view(DType::kF32, {cells, hq / hkv});
  if (fused) p.split_counters = counters.view(DType::kI32, {cells / 2});
  CUDA_CHECK(cudaDeviceSynchronize());  // the uploads are done before the kernels start
  kernels::cuda::qk_norm_rope_store(
      p.q, heads(hq, hkv), heads(hq + hkv, hkv), q_norm.view(DType::kBf16, {d}),
      k_norm.view(DType::kBf16, {d}), positions.view(DType::kI32, {b}), 1e-6f,
      kernels::RopeFrequencies{inv_freq.view(DType::kF32, {d / 2}), 1.f}, p.kv.k_cache,
      p.kv.v_cache, slots.view(DType::kI32, {b}), stream);
  if (synced) CUDA_CHECK(cudaStreamSynchronize(stream));
  kernels::cuda::decode_attention(p, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return out.host();
}

// Batch 1 at a tile edge and deep in a long context (the last tile alone in its CTA's range,
// or after others), and a mixed batch with one-tile sequences and a padding row (context 0).
std::vector<std::vector<int>> batches() {
  return {{1024},
          {1025},
          {16384},
          {1, 33, 64, 65, 700, 2048, 3000, 31, 32, 5, 256, 257, 1, 90, 4000, 0}};
}

TEST(DecodeAttentionNewTokenCuda, NewTokenWrittenByTheKernelBeforeIsReadAfterItsWrites) {
  SKIP_WITHOUT_CUDA();
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const std::vector<std::vector<int>> all = batches();
  for (size_t i = 0; i < all.size(); ++i) {
    const PdlCase c(all[i], 7 + static_cast<uint32_t>(i));
    for (bool fused : {false, true}) {
      const std::string what = "batch " + std::to_string(i) + (fused ? " fused" : " merge kernel");
      const std::vector<uint16_t> ref = run(c, true, fused, stream);
      ASSERT_TRUE(std::all_of(ref.begin(), ref.end(),
                              [](uint16_t v) { return std::isfinite(bf16_to_float(v)); }))
          << what << ": the synchronised run left NaN (the stored token was not read)";
      for (int round = 0; round < 8; ++round)
        EXPECT_EQ(run(c, false, fused, stream), ref) << what << ", round " << round;
    }
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace nanovllm::test
