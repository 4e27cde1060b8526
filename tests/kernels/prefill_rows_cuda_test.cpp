// A prefill step's attention run piece by piece (kernels/prefill_rows.h, as the tensor-parallel
// prefill overlap runs it where that pays, layers/prefill_overlap.h): each piece's launch, over the
// step's cu_seqlens cut on the device by clip_seqlens_to_rows, writes exactly its own rows of the
// whole output, and those rows match the CPU reference of the whole step -- every query keeps its
// position and so its keys. Both prefill kernels (kMma everywhere, kHopper where it serves the
// shape); pieces that cut across sequences, inside cached prefixes' chunks and off the 128-row
// tiles. Tolerances: prefill_attention_hopper_cuda_test.cpp's (rel L2 < 1e-2, max |diff| < 2e-2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/prefill_rows.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/paged_attention_case.h"

namespace nanovllm::test {
namespace {

using kernels::cuda::PrefillKernel;

constexpr uint16_t kPoison = 0xFFFF;  // DeviceMem::poison's bf16 NaN

// Runs `kernel` over each piece [cuts[p], cuts[p + 1]) of c's rows in turn, into one output
// poisoned before each piece; checks each piece's rows against `ref` (the whole step's CPU
// output, [tq, hq, d]) and that no other row was written.
void check_pieces(PrefillCase& c, const std::vector<uint16_t>& ref, PrefillKernel kernel,
                  const std::vector<int32_t>& cuts) {
  DevicePrefill dev(c);
  DevVec<int32_t> clipped(static_cast<size_t>(2 * (c.batch + 1)));  // [2, B + 1]
  const int64_t row = c.hq * c.d;                                   // bf16 values a row of out
  ExecContext ctx;
  for (size_t p = 0; p + 1 < cuts.size(); ++p) {
    const int32_t a = cuts[p], b = cuts[p + 1];
    const std::string what = std::string(kernels::cuda::prefill_kernel_name(kernel)) + ", rows [" +
                             std::to_string(a) + ", " + std::to_string(b) + ")";
    const TensorView seqlens = clipped.view(DType::kI32, {2, c.batch + 1});
    kernels::cuda::clip_seqlens_to_rows(dev.params.cu_seqlens_q, dev.params.cu_seqlens_k, a, b,
                                        seqlens, ctx);
    const std::vector<uint16_t> out = dev.run([&](kernels::PrefillAttentionParams p) {
      p.cu_seqlens_q = seqlens.slice_rows(0, 1).reshape({c.batch + 1});
      p.cu_seqlens_k = seqlens.slice_rows(1, 2).reshape({c.batch + 1});
      p.max_seqlen_q = std::min(c.max_q, b - a);
      kernels::cuda::prefill_attention(p, kernel, nullptr);
    });
    const auto rows = [&](const std::vector<uint16_t>& v, int64_t r0, int64_t r1) {
      return std::vector<uint16_t>(v.begin() + r0 * row, v.begin() + r1 * row);
    };
    const ErrorStats e = compare_bf16(rows(out, a, b), rows(ref, a, b));
    EXPECT_TRUE(e.finite) << what << ": a row of the piece unwritten or NaN";
    EXPECT_LT(e.rel_l2, 1e-2) << what;
    EXPECT_LT(e.max_abs, 2e-2) << what;
    int64_t written_outside = 0;
    for (int64_t i = 0; i < c.tq * row; ++i)
      if ((i < a * row || i >= b * row) && out[static_cast<size_t>(i)] != kPoison)
        ++written_outside;
    EXPECT_EQ(written_outside, 0) << what << ": values written outside the piece's rows";
  }
}

void check_both_kernels(const std::vector<Seq>& seqs, const std::vector<int32_t>& cuts, int64_t hq,
                        int64_t hkv, int64_t bs, uint32_t seed) {
  constexpr int64_t kHeadDim = 128;
  PrefillCase c(seqs, kHeadDim, hq, hkv, bs, seed);
  ASSERT_EQ(cuts.back(), c.tq) << "the pieces cover the step";
  const std::vector<uint16_t> ref = c.cpu_reference();
  check_pieces(c, ref, PrefillKernel::kMma, cuts);
  if (kernels::cuda::hopper_prefill_supports(kHeadDim, hq, hkv, bs))
    check_pieces(c, ref, PrefillKernel::kHopper, cuts);
}

TEST(PrefillRowsCuda, PiecesAcrossFreshPromptsAndCachedChunksMatchTheWholeStep) {
  SKIP_WITHOUT_CUDA();
  // Rows [0, 300) a chunk after 400 cached tokens, [300, 450) a fresh prompt, [450, 950) a chunk
  // after 400 more; pieces cut inside each sequence, across two, and off the 128-row tiles.
  check_both_kernels({{300, 700}, {150, 150}, {500, 900}}, {0, 208, 480, 800, 950}, 16, 8, 256, 3);
}

TEST(PrefillRowsCuda, OneLongChunksPiecesOverItsCachedPrefix) {
  SKIP_WITHOUT_CUDA();
  // The lone long prompt's second chunk (as the 32k prompt's), scaled down: 2,048 rows after
  // 2,048 cached, in four pieces; the 8B shape's heads a rank at tp 4 (8 q / 2 kv).
  check_both_kernels({{2048, 4096}}, {0, 512, 1024, 1536, 2048}, 8, 2, 256, 11);
}

}  // namespace
}  // namespace nanovllm::test
