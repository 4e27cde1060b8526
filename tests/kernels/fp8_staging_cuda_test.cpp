// The 8-bit caches' staging for the Hopper prefill (kernels/cuda/fp8_staging.cu): every token a
// prefill call reads, dequantized into bf16 staging blocks laid out compactly in sequence order,
// must equal the CPU's dequantization of the same byte and row exponent (fp8) or scale code
// (int8) bit for bit, and
// the staging block table must point each sequence's i-th block at first(b) + i. Shapes cover
// chunks that cross blocks (16- and 48-token blocks), a last block's tail, one-token
// sequences and a 4k sequence spread over many CTAs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cuda/prefill_attention_kernels.h"
#include "kernels/fp8.h"
#include "kernels/int8_kv.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/paged_attention_case.h"

namespace nanovllm::test {
namespace {

// The bf16 bits the staging must hold for one cached byte with its row's exponent (fp8) or
// scale code (int8): the value in f32, rounded once.
uint16_t dequantized(DType dt, uint8_t byte, int8_t code) {
  if (dt == DType::kI8)
    return float_to_bf16(static_cast<float>(int8_kv_level(byte)) * int8_kv_scale(code));
  return float_to_bf16(std::ldexp(fp8_e4m3_to_float(byte), code));
}

void check_staging(const std::vector<Seq>& seqs, int64_t d, int64_t hkv, int64_t bs, uint32_t seed,
                   DType dt = DType::kFp8E4M3) {
  PrefillCase c(seqs, d, 2 * hkv, hkv, bs, seed, /*fp8_cache=*/true, dt);
  DevicePrefill dev(c);
  int64_t blocks = 0;
  std::vector<int32_t> first;  // first(b): the staging blocks of sequences before b
  for (int64_t b = 0; b < c.batch; ++b) {
    first.push_back(static_cast<int32_t>(blocks));
    blocks += (c.cu_k[b + 1] - c.cu_k[b] + bs - 1) / bs;
  }
  DevVec<uint16_t> staging_k(blocks * bs * hkv * d), staging_v(blocks * bs * hkv * d);
  DevVec<int32_t> staging_tables(c.batch * c.cache.max_blocks);
  staging_tables.mem.poison();
  kernels::PrefillAttentionParams p = dev.params;
  p.staging_k = staging_k.view(DType::kBf16, {blocks, bs, hkv, d});
  p.staging_v = staging_v.view(DType::kBf16, {blocks, bs, hkv, d});
  p.staging_tables = staging_tables.view(DType::kI32, {c.batch, c.cache.max_blocks});
  p.kv_blocks = blocks;
  kernels::cuda::stage_fp8_blocks(p, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint16_t> sk = staging_k.host(), sv = staging_v.host();
  const std::vector<int32_t> tables = staging_tables.host();
  int64_t wrong_values = 0, wrong_entries = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t k_len = c.cu_k[b + 1] - c.cu_k[b];
    for (int64_t i = 0; i * bs < k_len; ++i)
      wrong_entries += tables[b * c.cache.max_blocks + i] != first[b] + i;
    for (int64_t t = 0; t < k_len; ++t) {
      const int64_t src = c.cache.tables[b * c.cache.max_blocks + t / bs];
      const int64_t dst = first[b] + t / bs;
      for (int64_t h = 0; h < hkv; ++h) {
        const int64_t e = (src * hkv + h) * bs + t % bs;
        const int64_t from = ((src * bs + t % bs) * hkv + h) * d,
                      to = ((dst * bs + t % bs) * hkv + h) * d;
        for (int64_t i = 0; i < d; ++i) {
          wrong_values += sk[to + i] != dequantized(dt, c.cache.k8[from + i], c.cache.ks[e]);
          wrong_values += sv[to + i] != dequantized(dt, c.cache.v8[from + i], c.cache.vs[e]);
        }
      }
    }
  }
  EXPECT_EQ(wrong_entries, 0) << "staging table entries";
  EXPECT_EQ(wrong_values, 0) << "staged values";
}

TEST(Fp8StagingCuda, EveryReadTokenDequantizedExactlyIntoCompactBlocks) {
  SKIP_WITHOUT_CUDA();
  check_staging({{256, 256}, {1, 1}, {100, 300}, {37, 37}, {1, 513}}, 128, 8, 256, 71);
  check_staging({{1000, 4096}, {5, 5}}, 128, 2, 256, 72);
}

TEST(Fp8StagingCuda, Int8RowsDequantizedWithTheirScaleCodes) {
  SKIP_WITHOUT_CUDA();
  check_staging({{256, 256}, {1, 1}, {100, 300}, {37, 37}, {1, 513}}, 128, 8, 256, 75, DType::kI8);
  check_staging({{17, 600}, {300, 300}, {1, 47}, {1, 49}}, 128, 4, 48, 76, DType::kI8);
}

TEST(Fp8StagingCuda, ChunksThatCrossSmallAndOddBlocks) {
  SKIP_WITHOUT_CUDA();
  check_staging({{1, 50}, {64, 64}, {130, 200}, {65, 65}}, 64, 2, 16, 73);
  check_staging({{17, 600}, {300, 300}, {1, 47}, {1, 49}}, 128, 4, 48, 74);
}

}  // namespace
}  // namespace nanovllm::test
