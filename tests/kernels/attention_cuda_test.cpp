// CUDA paged attention (prefill on tensor cores; decode with its device-planned split-KV, in
// each scratch mode and inside a CUDA graph replayed with new lengths) against the CPU
// reference on random paged caches with shuffled block tables. Outputs are bf16 convex combinations
// of V rows in [-1, 1]; the CPU keeps softmax weights in f32 while the prefill kernel rounds P to
// bf16 for the tensor cores (relative 2^-9 per weight, averaging out over keys), and both
// round the output once: relative L2 error < 1e-2 and max |diff| < 2e-2 cover that with
// margin, while any indexing or masking error gives O(1) differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cuda/decode_attention_cluster_plan.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/decode_attention_rig.h"
#include "tests/kernels/paged_attention_case.h"

namespace nanovllm::test {
namespace {

void check_prefill(const std::vector<Seq>& seqs, int64_t d, int64_t hq, int64_t hkv, int64_t bs,
                   uint32_t seed, bool fp8 = false, DType cache8 = DType::kFp8E4M3) {
  PrefillCase c(seqs, d, hq, hkv, bs, seed, fp8, cache8);
  const std::vector<uint16_t> ref = c.cpu_reference();
  DevicePrefill dev(c);
  const std::vector<uint16_t> out = dev.run([](const kernels::PrefillAttentionParams& p) {
    kernels::cuda::prefill_attention(p, nullptr);
  });
  const ErrorStats e = compare_bf16(out, ref);
  EXPECT_TRUE(e.finite) << "unwritten or NaN output";
  EXPECT_LT(e.rel_l2, 1e-2);
  EXPECT_LT(e.max_abs, 2e-2);
  if (!fp8) return;
  // Again with bf16 staging for the blocks the call reads (exactly enough of them): the
  // Hopper kernel on an H100/H200 for the shapes it takes, over the dequantized blocks.
  int64_t blocks = 0;
  for (size_t b = 0; b + 1 < c.cu_k.size(); ++b)
    blocks += (c.cu_k[b + 1] - c.cu_k[b] + bs - 1) / bs;
  DevVec<uint16_t> staging_k(blocks * bs * hkv * d), staging_v(blocks * bs * hkv * d);
  DevVec<int32_t> staging_tables(c.batch * c.cache.max_blocks);
  dev.params.staging_k = staging_k.view(DType::kBf16, {blocks, bs, hkv, d});
  dev.params.staging_v = staging_v.view(DType::kBf16, {blocks, bs, hkv, d});
  dev.params.staging_tables = staging_tables.view(DType::kI32, {c.batch, c.cache.max_blocks});
  dev.params.kv_blocks = blocks;
  const std::vector<uint16_t> staged = dev.run([](const kernels::PrefillAttentionParams& p) {
    kernels::cuda::prefill_attention(p, nullptr);
  });
  const ErrorStats s = compare_bf16(staged, ref);
  EXPECT_TRUE(s.finite) << "staged: unwritten or NaN output";
  EXPECT_LT(s.rel_l2, 1e-2) << "staged";
  EXPECT_LT(s.max_abs, 2e-2) << "staged";
  // A count past the staging's blocks: the call must not overrun it; it takes the mma kernel.
  dev.params.kv_blocks = blocks + 1;
  const ErrorStats m = compare_bf16(dev.run([](const kernels::PrefillAttentionParams& p) {
    kernels::cuda::prefill_attention(p, nullptr);
  }),
                                    ref);
  EXPECT_TRUE(m.finite && m.rel_l2 < 1e-2 && m.max_abs < 2e-2) << "too little staging";
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

// Qwen3-14B: 40 q heads over 8 kv heads (a group of 5: the mma.sync kernel, the Hopper one
// takes powers of two).
TEST(PrefillAttentionCuda, Gqa5OfTheFourteenBillionShape) {
  SKIP_WITHOUT_CUDA();
  check_prefill({{300, 300}, {17, 600}, {1, 1}}, 128, 40, 8, 256, 17);
}

TEST(PrefillAttentionCuda, MaxModelLen4096) {
  SKIP_WITHOUT_CUDA();
  check_prefill({{4096, 4096}}, 128, 2, 1, 256, 15);
  check_prefill({{1000, 4096}}, 64, 4, 1, 256, 16);  // long cached prefix, GQA 4
}

TEST(DecodeAttentionCuda, Batch1TileEdgesAndLongContextsInEverySplitMode) {
  SKIP_WITHOUT_CUDA();
  for (Split split : kAllSplits) {
    for (int ctx : {1, 31, 32, 33, 256, 257, 1000, 4096, 16384}) check_decode({ctx}, {}, split, 21);
    for (int ctx : {1, 63, 64, 65, 257, 4096}) {  // head dim 64: 64-token tiles
      check_decode({ctx}, {64, 8, 2, 16}, split, 22);
      check_decode({ctx}, {64, 8, 2, 128}, split, 22);  // each tile within one block
    }
  }
}

TEST(DecodeAttentionCuda, MixedLengthsInOneBatchGqa12458HeadDims64And128) {
  SKIP_WITHOUT_CUDA();
  const std::vector<int> lens{1, 31, 32, 33, 255, 256, 257, 1000, 4096, 2, 64, 65, 700, 16};
  for (int64_t g : {1, 2, 4, 5, 8}) {  // 5: Qwen3-14B's 40 q over 8 kv heads
    for (Split split : kAllSplits) {
      check_decode(lens, {128, 2 * g, 2, 256}, split, 23);
      check_decode(lens, {64, 4 * g, 4, 16}, split, 24);
    }
  }
}

TEST(DecodeAttentionCuda, Batch256RandomLengthsWithLongOnes) {
  SKIP_WITHOUT_CUDA();
  std::vector<int> lens = random_lens(256, 1, 2048, 25);
  lens[7] = lens[100] = 4096;
  for (Split split : kAllSplits) check_decode(lens, {128, 4, 2, 256}, split, 26);
}

TEST(DecodeAttentionCuda, Batch512ShortLengths) {
  SKIP_WITHOUT_CUDA();
  const std::vector<int> lens = random_lens(512, 1, 300, 27);
  check_decode(lens, {128, 8, 2, 16}, Split::kFused, 28);
  check_decode(lens, {64, 16, 8, 16}, Split::kNone, 29);
}

TEST(DecodeAttentionCuda, PaddingRowsOfContextZeroGetZeros) {
  SKIP_WITHOUT_CUDA();
  for (Split split : kAllSplits) {
    check_decode({0, 5, 0, 0, 300, 4096, 0}, {}, split, 30);
    check_decode({0, 0, 0}, {}, split, 31);  // nothing to read at all
    check_decode({1000, 0}, {64, 8, 1, 16}, split, 32);
  }
}

TEST(DecodeAttentionCuda, NonPowerOfTwoBlockSize) {
  SKIP_WITHOUT_CUDA();
  const std::vector<int> lens{1, 47, 48, 49, 500, 1025, 3000};
  for (Split split : kAllSplits) {
    check_decode(lens, {128, 16, 8, 48}, split, 33);
    check_decode(lens, {64, 4, 2, 100}, split, 34);
  }
}

// Scratch smaller than the slots: few CTAs, each range crossing many (sequence, kv head)
// groups, split and whole ones mixed; cells 2 is a single CTA doing everything.
TEST(DecodeAttentionCuda, SmallScratchFewCtasEachCoveringManyGroups) {
  SKIP_WITHOUT_CUDA();
  std::vector<int> lens = random_lens(37, 1, 700, 35);
  lens[3] = 0;
  for (Split split : {Split::kMergeKernel, Split::kFused}) {
    for (int64_t cells : {2, 6, 32, 70}) {
      check_decode(lens, {}, split, 36, cells);
      check_decode(lens, {64, 8, 2, 16}, split, 37, cells);
    }
  }
}

// --kv-cache-dtype fp8: the mma.sync prefill reading fp8, the Hopper one over bf16 staging
// (check_prefill runs both), and the decode kernel in every split mode read the same fp8 rows
// as the CPU reference, whose rows carry exponents 0..3 apart: a kernel that ignored or
// misplaced them would be far off.
TEST(PrefillAttentionCuda, Fp8CacheWithCachedPrefixesGqa1245) {
  SKIP_WITHOUT_CUDA();
  check_prefill({{256, 256}, {1, 1}, {100, 300}, {37, 37}, {1, 513}}, 128, 16, 8, 256, 51, true);
  check_prefill({{1, 50}, {64, 64}, {130, 200}, {65, 65}}, 64, 8, 2, 16, 52, true);
  check_prefill({{300, 300}, {17, 600}, {1, 1}}, 128, 40, 8, 256, 53, true);
  check_prefill({{1000, 4096}}, 64, 4, 1, 256, 54, true);
  check_prefill({{127, 129}, {200, 200}}, 128, 4, 4, 32, 55, true);
}

// A mixed step over an fp8 cache (layers/attention_layer.cpp): the leading one-query
// sequences go to the decode kernel, the prefill kernels get the rest through views of
// cu_seqlens_q / _k and the block table that start at sequence `lead` (q and out stay whole:
// cu_seqlens_q holds absolute rows). Both halves against the CPU reference of the whole step,
// for the mma path and the staged Hopper one.
TEST(PrefillAttentionCuda, Fp8LeadingDecodeRowsThenPrefillOverOffsetViews) {
  SKIP_WITHOUT_CUDA();
  const int64_t d = 128, hq = 16, hkv = 8, bs = 16, lead = 3;
  PrefillCase c({{1, 700}, {1, 33}, {1, 256}, {64, 300}, {17, 17}, {1, 90}}, d, hq, hkv, bs, 62,
                true);
  const std::vector<uint16_t> ref = c.cpu_reference();
  DevicePrefill dev(c);
  std::vector<int32_t> lead_lens;
  for (int64_t b = 0; b < lead; ++b) lead_lens.push_back(c.cu_k[b + 1] - c.cu_k[b]);
  DevVec<int32_t> d_lead_lens(lead_lens);
  int64_t rest_blocks = 0;
  for (int64_t b = lead; b < c.batch; ++b) rest_blocks += (c.cu_k[b + 1] - c.cu_k[b] + bs - 1) / bs;
  DevVec<uint16_t> staging_k(rest_blocks * bs * hkv * d), staging_v(rest_blocks * bs * hkv * d);
  DevVec<int32_t> staging_tables((c.batch - lead) * c.cache.max_blocks);
  for (bool staged : {false, true}) {
    const std::vector<uint16_t> out = dev.run([&](const kernels::PrefillAttentionParams& p) {
      kernels::DecodeAttentionParams dp;
      dp.out = p.out.slice_rows(0, lead);
      dp.q = p.q.slice_rows(0, lead);
      dp.kv = p.kv;
      dp.kv.block_tables = p.kv.block_tables.slice_rows(0, lead);
      dp.context_lens = d_lead_lens.view(DType::kI32, {lead});
      dp.scale = p.scale;
      kernels::cuda::decode_attention(dp, nullptr);
      kernels::PrefillAttentionParams rest = p;
      rest.kv.block_tables = p.kv.block_tables.slice_rows(lead, c.batch);
      rest.cu_seqlens_q = p.cu_seqlens_q.slice_rows(lead, c.batch + 1);
      rest.cu_seqlens_k = p.cu_seqlens_k.slice_rows(lead, c.batch + 1);
      if (staged) {
        rest.staging_k = staging_k.view(DType::kBf16, {rest_blocks, bs, hkv, d});
        rest.staging_v = staging_v.view(DType::kBf16, {rest_blocks, bs, hkv, d});
        rest.staging_tables =
            staging_tables.view(DType::kI32, {c.batch - lead, c.cache.max_blocks});
        rest.kv_blocks = rest_blocks;
      }
      kernels::cuda::prefill_attention(rest, nullptr);
    });
    const ErrorStats e = compare_bf16(out, ref);
    EXPECT_TRUE(e.finite) << "unwritten or NaN output, staged " << staged;
    EXPECT_LT(e.rel_l2, 1e-2) << "staged " << staged;
    EXPECT_LT(e.max_abs, 2e-2) << "staged " << staged;
  }
}

// --kv-cache-dtype int8 (kernels/int8_kv.h's rows with quarter-binade scale codes): the same
// kernels as fp8's but for the conversion of a row's bytes and its scale, against the CPU
// reference reading the same int8 rows; fewer shapes than fp8's, as only that part differs.
TEST(PrefillAttentionCuda, Int8CacheWithCachedPrefixesGqa1245) {
  SKIP_WITHOUT_CUDA();
  check_prefill({{256, 256}, {1, 1}, {100, 300}, {37, 37}, {1, 513}}, 128, 16, 8, 256, 71, true,
                DType::kI8);
  check_prefill({{1, 50}, {64, 64}, {130, 200}, {65, 65}}, 64, 8, 2, 16, 72, true, DType::kI8);
  check_prefill({{300, 300}, {17, 600}, {1, 1}}, 128, 40, 8, 256, 73, true, DType::kI8);
}

TEST(DecodeAttentionCuda, Int8CacheTileEdgesMixedLengthsAndGroupsInEverySplitMode) {
  SKIP_WITHOUT_CUDA();
  const std::vector<int> lens{1, 31, 33, 256, 257, 1000, 4096, 2, 65, 700};
  for (Split split : kAllSplits) {
    for (int ctx : {1, 5, 33, 16384})
      check_decode({ctx}, {128, 16, 8, 256, true, 2, DType::kI8}, split, 76);
    for (int64_t g : {1, 2, 4, 5, 8})
      check_decode(lens, {128, 2 * g, 2, 256, true, 2, DType::kI8}, split, 77);
    check_decode({0, 5, 0, 300, 4096, 0}, {128, 4, 2, 48, true, 2, DType::kI8}, split, 79);
  }
  check_decode(random_lens(256, 1, 2048, 80), {128, 4, 2, 256, true, 2, DType::kI8}, Split::kFused,
               81);
}

TEST(DecodeAttentionCuda, Fp8CacheTileEdgesMixedLengthsAndGroupsInEverySplitMode) {
  SKIP_WITHOUT_CUDA();
  const std::vector<int> lens{1, 31, 32, 33, 255, 256, 257, 1000, 4096, 2, 64, 65, 700, 16};
  for (Split split : kAllSplits) {
    for (int ctx : {1, 3, 4, 5, 31, 32, 33, 257, 16384})
      check_decode({ctx}, {128, 16, 8, 256, true}, split, 56);
    for (int64_t g : {1, 2, 4, 5, 8}) {
      check_decode(lens, {128, 2 * g, 2, 256, true}, split, 57);
      check_decode(lens, {64, 4 * g, 4, 16, true}, split, 58);
    }
    check_decode({0, 5, 0, 300, 4096, 0}, {128, 8, 2, 48, true}, split, 59);  // bs 48, padding
    // The same at G 2: the streaming ring's walk over padding rows and pages of 48 tokens.
    check_decode({0, 5, 0, 300, 4096, 0}, {128, 4, 2, 48, true}, split, 59);
  }
  std::vector<int> many = random_lens(256, 1, 2048, 60);
  check_decode(many, {128, 4, 2, 256, true}, Split::kFused, 61);
}

// Equal lengths whose groups the deal splits (decode_attention_plan.cuh's deal_units; figures
// for a grid of 528 CTAs, an H100 or H200): cut into unequal parts at the same offsets (4 x 8193
// tokens: 257 tiles in 16 parts of 16-17; padding rows among 3 x 5000, left out of the group
// count; one sequence of 1025 tokens, 33 tiles in 17 parts of 1-2), and into equal parts as
// plain ranges (3 x 700 in pages of 48 tokens); both walks on the fp8 path.
TEST(DecodeAttentionCuda, EqualLengthsCutIntoPartsWithPaddingOddTilesAndSmallPages) {
  SKIP_WITHOUT_CUDA();
  for (Split split : kAllSplits) {
    for (bool fp8 : {false, true}) {
      check_decode(std::vector<int>(4, 8193), {128, 16, 8, 256, fp8}, split, 65);
      check_decode({0, 5000, 5000, 0, 5000}, {128, 8, 2, 256, fp8}, split, 66);
      check_decode({1025}, {128, 16, 8, 256, fp8}, split, 67);
      check_decode(std::vector<int>(3, 700), {128, 32, 4, 48, fp8}, split, 68);
    }
  }
}

// One call captured in a CUDA graph, replayed after the lengths and block tables changed under
// it (short, long, mixed, padding): every replay must match the CPU, which holds only if the
// split plan comes from the live lengths, and the merge counters must be reset each time.
TEST(DecodeAttentionCuda, GraphReplayFollowsLiveLengthsAndTables) {
  SKIP_WITHOUT_CUDA();
  const DecodeShape shape{128, 8, 2, 256};
  std::vector<std::vector<int>> b1{{1}, {16384}, {33}, {4096}, {0}, {1000}};
  std::vector<std::vector<int>> b16{random_lens(16, 1, 40, 40), random_lens(16, 1, 3000, 41),
                                    std::vector<int>(16, 1024), random_lens(16, 100, 2048, 42)};
  b16.push_back(std::vector<int>(16, 0));
  b16.back()[15] = 77;
  b16.push_back(std::vector<int>(16, 1));
  b16.back()[0] = 16384;
  for (const kernels::cuda::DecodeKernel kernel : decode_kernels(shape)) {
    for (Split split : {Split::kMergeKernel, Split::kFused, Split::kCluster}) {
      for (const auto* configs : {&b1, &b16}) {
        if (!split_serves(split, static_cast<int64_t>(configs->front().size()), shape)) continue;
        std::vector<int> capacity(configs->front().size(), 0);
        for (const auto& c : *configs)
          for (size_t i = 0; i < c.size(); ++i) capacity[i] = std::max(capacity[i], c[i]);
        DecodeRig rig(capacity, shape, split, 43, 0, kernel);
        cudaStream_t stream;
        CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        rig.set_lens(configs->front());
        rig.run(stream);  // eager first: one-time set-up stays out of the capture
        CUDA_CHECK(cudaStreamSynchronize(stream));
        rig.expect_matches_cpu(std::string(kernels::cuda::decode_kernel_name(kernel)) + ", " +
                               split_name(split) + " eager");
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        rig.run(stream);
        CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
        CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        for (int round = 0; round < 2; ++round) {
          for (size_t i = 0; i < configs->size(); ++i) {
            rig.set_lens((*configs)[i]);
            CUDA_CHECK(cudaGraphLaunch(exec, stream));
            CUDA_CHECK(cudaStreamSynchronize(stream));
            rig.expect_matches_cpu(std::string(kernels::cuda::decode_kernel_name(kernel)) + ", " +
                                   split_name(split) + " replay " + std::to_string(round) + "." +
                                   std::to_string(i) +
                                   ", B=" + std::to_string(configs->front().size()));
          }
        }
        CUDA_CHECK(cudaGraphExecDestroy(exec));
        CUDA_CHECK(cudaGraphDestroy(graph));
        CUDA_CHECK(cudaStreamDestroy(stream));
      }
    }
  }
}

// The graphs' short-context twins are captured at decode_cluster_context_bound: the rule of
// decode_attention_cluster_plan.h (pinned by decode_attention_cluster_plan_test) on this
// device's SM count, head shape and scratch, for every batch a twin can have.
TEST(DecodeAttentionCuda, ClusterContextBoundIsThePlanRuleOnThisDevice) {
  SKIP_WITHOUT_CUDA();
  int dev = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  namespace d = kernels::cuda::decode;
  int clustered = 0;
  for (const auto& [hq, hkv] : {std::pair<int64_t, int64_t>{16, 8}, {16, 4}, {32, 8}, {8, 2}}) {
    const int64_t cells = kernels::cuda::decode_attention_split_cells(hq, hkv, 128);
    for (int64_t b = 1; b <= 8; ++b) {
      const int want =
          d::cluster_context_bound(d::cluster_plan(kernels::cuda::DecodeMerge::kAuto,
                                                   d::ClusterChoice::kAuto, b, hkv, cells, sms),
                                   hq / hkv, 32);
      EXPECT_EQ(kernels::cuda::decode_cluster_context_bound(b, hq, hkv, 128, cells), want)
          << "B=" << b << " " << hq << "/" << hkv;
      clustered += want > 0;
    }
  }
  EXPECT_GT(clustered, 0) << "no batch formed clusters on " << sms << " SMs";
  EXPECT_EQ(kernels::cuda::decode_cluster_context_bound(1, 16, 8, 128, 32), 0);  // little scratch
}

// q 32 times wider than elsewhere: scores spread over tens of log2 units, so along a long
// context the running max passes its old value by more than the tensor-core kernel's lazy
// slack (8) again and again; every rescale of its accumulators (and, fp8, of the weights' own
// base) must be exact for the output to match.
TEST(DecodeAttentionCuda, PeakedScoresMoveTheRunningMaxFarAlongTheContext) {
  SKIP_WITHOUT_CUDA();
  const std::vector<int> lens{4096, 16384, 700, 33, 1};
  for (bool fp8 : {false, true}) {
    for (int64_t g : {2, 4, 5, 8}) {
      const DecodeShape shape{128, 2 * g, 2, 256, fp8, 64};
      check_decode(lens, shape, Split::kFused, 63);
      check_decode({16384}, shape, Split::kNone, 64);
    }
  }
}

}  // namespace
}  // namespace nanovllm::test
