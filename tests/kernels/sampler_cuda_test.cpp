// The CUDA sampler must return the CPU reference's tokens (and last_tokens) for identical
// logits, token for token: both draw the same Philox bits and share kernels/sampler_math.h, so
// the only allowed divergence is a Gumbel score tie within one ulp of logf, which random f32
// logits do not produce in practice. The cases reach every path of kernels/cuda/sampler.cu:
// the one-pass greedy draw, the two-pass unfiltered draw, the one-pass small top-k (k <= 32,
// each thread keeping its 3 or 4 largest logits; a thread re-reading its share, and a block whose
// candidates overflow sending its row to the histogram passes), the window histogram +
// compaction (3 passes), the restart when the window holds too few tokens, the exact radix
// levels (count and mass) when more than 2048 tokens are candidates, and the direct Gumbel pass
// of min-p alone; at batch sizes that give 8, 4, 2 and 1 blocks per row.
#include <gtest/gtest.h>

#include <utility>

#include "tests/kernels/sampler_cuda_case.h"

namespace nanovllm::test {
namespace {

constexpr int32_t kCompactionPasses = 3;  // max, window histogram, compaction
constexpr int32_t kLargeK = 40;           // above the one-pass path's 32: the histogram passes
constexpr int32_t kMany = 1 << 20;

TEST(SamplerCuda, GreedyRowsMatchCpuIncludingTiesInOnePass) {
  SKIP_WITHOUT_CUDA();
  Case c;
  for (int i = 0; i < 64; ++i) c.add(Slot{0.0f, i % 2 ? 20 : -1, i % 3 ? 0.9f : 1.0f, 0.0f, i}, i);
  c.fill_normal(1);
  c.row(0)[100] = c.row(0)[90000] = 1e4f;         // the maximum twice: the lower id wins
  c.row(1)[kVocab - 1] = 1e4f;                    // the last token is the maximum
  std::fill(c.row(2), c.row(2) + kVocab, 0.25f);  // all equal: token 0
  c.row(3)[0] = c.row(3)[kVocab - 1] = 1e4f;      // first and last tie
  std::transform(c.row(4), c.row(4) + kVocab, c.row(4),
                 [](float x) { return -1.0f - std::abs(x); });
  c.row(4)[400] = -0.0f;  // -0 and +0 tie as the maximum: the lower id (400) wins
  c.row(4)[500] = 0.0f;
  expect_passes(c, expect_same_as_cpu(c), 1, 1);
}

TEST(SamplerCuda, UnfilteredRowsMatchCpuInTwoPasses) {
  SKIP_WITHOUT_CUDA();
  Case c;
  int64_t seed = 1000;
  for (float t : {1.0f, 0.6f, 0.7f, 1.5f})
    for (int32_t k : {-1, 0, static_cast<int32_t>(kVocab), static_cast<int32_t>(kVocab) + 100}) {
      c.add(Slot{t, k, 1.0f, 0.0f, seed}, static_cast<int32_t>(seed % 97));
      ++seed;
    }
  c.add(Slot{1.0f, -1, 1.5f, 0.0f, 5}, 3);     // top_p >= 1: no cut
  c.add(Slot{1.0f, -1, 1.0f, -0.5f, 6}, 3);    // min_p <= 0: no cut
  c.add(Slot{1.0f, -1, 1.0f, 0.0f, -1}, 0);    // seed bit pattern 2^64 - 1
  c.add(Slot{1e-38f, -1, 1.0f, 0.0f, 12}, 2);  // raised to the minimum temperature...
  c.add(Slot{0.01f, -1, 1.0f, 0.0f, 12}, 2);   // ...so the same draw as this row
  c.fill_normal(2);
  // The max pass, then the draw (bounded by the max token's score).
  expect_passes(c, expect_same_as_cpu(c), 2, 2);
}

TEST(SamplerCuda, Qwen3DefaultsMatchCpuInOnePassAtEveryBatch) {
  SKIP_WITHOUT_CUDA();
  // The performance contract: top_k 20 + top_p 0.95 on LM-head-like rows reads each row once
  // (each thread keeps its 3 largest logits, each block its candidates above its floor).
  for (int b : {64, 63, 8, 1}) {
    Case c;
    for (int i = 0; i < b; ++i)
      c.add(qwen3(i % 3 == 0 ? 0.6f : i % 3 == 1 ? 0.7f : 1.0f, 7 * i), i);
    c.fill_normal(3);
    expect_passes(c, expect_same_as_cpu(c), 1, 1);
  }
}

TEST(SamplerCuda, SmallTopKRowsMatchCpuAtEveryBlocksPerRow) {
  SKIP_WITHOUT_CUDA();
  // k from 1 to 32 with every other filter, at the temperatures' edges (0.01 scales a raw gap of
  // 1e-4 to 1e-2), on rows whose top tokens tie in raw logits and on rows with fewer finite tokens
  // than k; batch 1, 20, 40, 64, 100 and 300 have 8, 8, 4, 4, 2 and 1 blocks per row (H100 /
  // H200).
  for (int64_t b : {1, 20, 40, 64, 100, 300}) {
    SCOPED_TRACE("batch " + std::to_string(b));
    Case c;
    const int32_t ks[] = {1, 2, 5, 20, 31, 32};
    const float ts[] = {0.01f, 0.6f, 1.0f, 1.7f};
    const float ps[] = {1.0f, 0.95f, 0.5f};
    for (int64_t i = 0; i < b; ++i)
      c.add(Slot{ts[i % 4], ks[i % 6], ps[i % 3], i % 5 == 0 ? 0.1f : 0.0f, 1000 + i},
            static_cast<int32_t>(i));
    c.fill_normal(18);
    std::mt19937 rng(19);
    std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
    for (int64_t r = 0; r < c.rows(); ++r) {
      float* l = c.row(r);
      if (r % 7 == 3) {  // 40 tokens tied at the top, 1e-4 apart in pairs
        for (int i = 0; i < 40; ++i) l[id(rng)] = 9.0f + 1e-4f * static_cast<float>(i / 2);
      } else if (r % 7 == 5) {  // 10 finite tokens, the rest -inf
        std::vector<float> keep(l, l + kVocab);
        std::fill(l, l + kVocab, -kInf);
        for (int i = 0; i < 10; ++i) {
          const int32_t v = id(rng);
          l[v] = keep[v];
        }
      }
    }
    expect_passes(c, expect_same_as_cpu(c), 1, 1);
  }
}

// Block 0's thread `t` (of 512) reads the logits of token ids 4 (t + 512 j) .. + 3, j = 0, 1, ...
// (float4 loads), whatever the blocks per row: the ids of one thread's share.
std::vector<int32_t> thread_share_ids(int thread, int count) {
  std::vector<int32_t> ids;
  for (int j = 0; static_cast<int>(ids.size()) < count; ++j)
    for (int e = 0; e < 4; ++e) ids.push_back(4 * (thread + 512 * j) + e);
  ids.resize(static_cast<size_t>(count));
  return ids;
}

// b rows of normal(0, 3) logits (seed `fill`), row i at position i with its own slot(i).
template <typename SlotOf>
Case rows_of(int64_t b, SlotOf slot, uint32_t fill) {
  Case c;
  for (int64_t i = 0; i < b; ++i) c.add(slot(i), static_cast<int32_t>(i));
  c.fill_normal(fill);
  return c;
}

TEST(SamplerCuda, OnePassTopKRescansAThreadHoldingManyOfTheTopTokens) {
  SKIP_WITHOUT_CUDA();
  // Each thread keeps its 3 largest logits (8 blocks a row) or 4 (4 or fewer); here one
  // thread's share holds the row's top 4 or 12 (distinct, or tied in pairs), so that thread
  // reads its share again for every token at or above the block's floor (with 4 kept and the
  // top 4, exactly at the edge). Batch 1, 40 and 300: 8, 4 and 1 blocks per row on an H100 /
  // H200.
  for (const auto& [b, top] :
       {std::pair<int64_t, int>{1, 12}, {1, 4}, {40, 12}, {40, 4}, {300, 12}, {300, 4}}) {
    SCOPED_TRACE("batch " + std::to_string(b) + ", top " + std::to_string(top));
    Case c = rows_of(
        b,
        [](int64_t i) {
          return Slot{i % 2 ? 0.6f : 1.0f, i % 3 ? 20 : 32, i % 4 ? 0.95f : 1.0f, 0.0f, 500 + i};
        },
        20);
    for (int64_t r = 0; r < c.rows(); ++r) {
      const std::vector<int32_t> ids = thread_share_ids(static_cast<int>(r % 3), top);
      for (size_t i = 0; i < ids.size(); ++i)
        c.row(r)[ids[i]] = 20.0f + (r % 2 ? 0.5f * static_cast<float>(i / 2) : 0.25f * i);
    }
    expect_passes(c, expect_same_as_cpu(c), 1, 1);
  }
}

TEST(SamplerCuda, OnePassTopKFallsBackToTheHistogramPassesWhenABlockOverflows) {
  SKIP_WITHOUT_CUDA();
  // Threads 0..18 of block 0 hold only 20.0 (ties, above every normal(0, 3) logit): the 20th
  // largest of the threads' maxima is a lower logit, so every one of their tokens is a candidate,
  // 5,700 with one block per row (batch 300) and 2,812 with two: more than the block's 2,048, so
  // the row takes the histogram passes after the first read. With 4 and 8 blocks per row (batch 40,
  // 1) they fit.
  for (int64_t b : {1, 40, 300}) {
    SCOPED_TRACE("batch " + std::to_string(b));
    Case c = rows_of(
        b,
        [](int64_t i) {
          return Slot{i % 2 ? 0.6f : 1.0f, 20, i % 3 ? 0.95f : 1.0f, 0.0f, 700 + i};
        },
        21);
    for (int64_t r = 0; r < c.rows(); ++r)
      for (int t = 0; t < 19; ++t)
        for (int32_t v : thread_share_ids(t, 4 * 75))
          if (v < kVocab) c.row(r)[v] = 20.0f;
    const Out o = expect_same_as_cpu(c);
    if (b == 300) expect_passes(c, o, kCompactionPasses + 1, kMany);
  }
}

TEST(SamplerCuda, TopPOnlyMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  Case c;
  int64_t seed = 1;
  for (float t : {0.6f, 1.0f})
    for (float p : {0.9f, 0.3f, 1e-6f})
      for (int32_t pos : {0, 41}) c.add(Slot{t, -1, p, 0.0f, seed++}, pos);
  c.fill_normal(4);
  expect_same_as_cpu(c);
}

TEST(SamplerCuda, MinPOnlyMatchesCpuInTwoPasses) {
  SKIP_WITHOUT_CUDA();
  // min-p needs only the row max: the draw follows directly, no histogram.
  Case c;
  int64_t seed = 50;
  for (float t : {0.6f, 1.0f, 1.3f})
    for (float mp : {0.01f, 0.05f, 0.1f, 0.5f}) c.add(Slot{t, -1, 1.0f, mp, seed++}, 9);
  c.fill_normal(5);
  expect_passes(c, expect_same_as_cpu(c), 2, 2);
}

TEST(SamplerCuda, CombinedFiltersMatchCpu) {
  SKIP_WITHOUT_CUDA();
  Case c;
  int64_t seed = 70;
  for (int32_t pos : {0, 9}) {
    c.add(Slot{1.0f, 1, 1.0f, 0.0f, seed++}, pos);  // top-1: greedy on the scaled logits
    c.add(Slot{0.7f, 50, 1.0f, 0.0f, seed++}, pos);
    c.add(Slot{0.8f, 20, 0.8f, 0.1f, seed++}, pos);
    c.add(Slot{1.0f, 1000, 0.95f, 0.0f, seed++}, pos);
    c.add(Slot{1.0f, -1, 0.9f, 0.02f, seed++}, pos);
    c.add(Slot{0.6f, 40, 1.0f, 0.05f, seed++}, pos);
    c.add(Slot{1.0f, static_cast<int32_t>(kVocab), 0.9f, 0.0f, seed++}, pos);  // k: no cut
    c.add(Slot{1e-38f, 20, 0.95f, 0.0f, seed++}, pos);  // tiny temperature, filtered
  }
  c.fill_normal(6);
  expect_same_as_cpu(c);
}

TEST(SamplerCuda, MixedBatchWithPaddingAndRepeatedOutOfOrderSlotsMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  Case c;
  c.slots = {Slot{0.0f},
             qwen3(0.6f, 1),
             Slot{0.6f, -1, 1.0f, 0.0f, 2},
             Slot{1.0f, -1, 0.9f, 0.0f, 3},
             Slot{0.8f, 30, 1.0f, 0.1f, 4},
             Slot{0.0f, 20, 0.95f},
             qwen3(1.0f, 6),
             Slot{0.7f, 5000, 1.0f, 0.0f, 7}};
  // Slot 5 has no row; slots 1, 2 and 6 have several (positions differ); rows 3, 9 pad.
  c.row_slot = {6, 1, 2, -1, 0, 1, 3, 2, 7, -1, 4, 6, 1, 2};
  for (int64_t r = 0; r < c.rows(); ++r) c.positions.push_back(static_cast<int32_t>(3 * r + 1));
  c.fill_normal(7);
  c.row(3)[11] = c.row(9)[12] = 1e4f;  // padding rows that read their logits would show
  expect_same_as_cpu(c);
}

TEST(SamplerCuda, EveryBlocksPerRowChoiceMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  // Batch 1 and 20 give 8 blocks per row, 40 gives 4, 100 gives 2, 300 gives 1 (H100/H200).
  for (int64_t b : {1, 20, 40, 100, 300}) {
    SCOPED_TRACE("batch " + std::to_string(b));
    Case c;
    for (int64_t i = 0; i < b; ++i) {
      const Slot kinds[] = {qwen3(0.6f, i),
                            Slot{0.0f},
                            Slot{0.6f, -1, 1.0f, 0.0f, i},
                            Slot{1.0f, -1, 0.9f, 0.0f, i},
                            Slot{0.7f, -1, 1.0f, 0.05f, i},
                            qwen3(1.0f, i)};
      c.add(kinds[i % 6], static_cast<int32_t>(i));
    }
    c.fill_normal(8);
    expect_same_as_cpu(c);
  }
}

TEST(SamplerCuda, TiesAtTheKthValueMatchCpu) {
  SKIP_WITHOUT_CUDA();
  // 10 tokens above 30 tokens tied at 15.0 (the rest below 14): top_k 20 cuts inside the tie,
  // where only the lower ids may stay; 10 and 40 cut at its edges.
  Case c;
  int64_t seed = 300;
  for (int32_t k : {20, 25, 10, 40})
    for (float t : {0.6f, 1.0f}) {
      c.add(Slot{t, k, 1.0f, 0.0f, seed++}, 4);
      c.add(Slot{t, k, 0.95f, 0.0f, seed++}, 4);
    }
  c.fill_normal(9);
  std::mt19937 rng(10);
  std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
  for (int64_t r = 0; r < c.rows(); ++r) {
    float* l = c.row(r);
    std::transform(l, l + kVocab, l, [](float x) { return std::min(x, 14.0f); });
    for (int i = 0; i < 10; ++i) l[id(rng)] = 15.5f + 0.25f * static_cast<float>(i);
    for (int i = 0; i < 30; ++i) l[id(rng)] = 15.0f;
  }
  expect_same_as_cpu(c);
}

TEST(SamplerCuda, UniformRowsTakeTheExactRadixPath) {
  SKIP_WITHOUT_CUDA();
  // Every token ties: the window's first bin holds all 151936, far over the 2048 candidates
  // that fit in shared memory, so the cut is found over the key's digits (here: by id).
  Case c;
  c.add(Slot{1.0f, kLargeK, 1.0f, 0.0f, 1}, 0);
  c.add(Slot{1.0f, -1, 0.5f, 0.0f, 2}, 0);  // the target is exactly half the total
  c.add(Slot{0.6f, kLargeK, 0.5f, 0.0f, 3}, 0);
  c.add(Slot{1.0f, 3000, 0.3f, 0.0f, 4}, 0);
  c.logits.assign(static_cast<size_t>(c.rows() * c.ld), 0.5f);
  expect_passes(c, expect_same_as_cpu(c), kCompactionPasses + 1, kMany);
}

TEST(SamplerCuda, TopKAboveTheCandidateLimitMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  // 5000 candidates do not fit the 2048 sorted in shared memory: the exact count path, then
  // (with top_p) a mass pass above the top-k cut.
  Case c;
  for (float t : {0.6f, 1.0f}) {
    c.add(Slot{t, 5000, 1.0f, 0.0f, 21}, 5);
    c.add(Slot{t, 5000, 0.99f, 0.0f, 22}, 5);
    c.add(Slot{t, 3000, 1.0f, 0.02f, 23}, 5);
  }
  c.fill_normal(12);
  expect_passes(c, expect_same_as_cpu(c), kCompactionPasses + 1, kMany);
}

TEST(SamplerCuda, TopPNearOneOnAFlatRowTakesTheExactMassPath) {
  SKIP_WITHOUT_CUDA();
  // normal(0, 0.1): masses nearly equal, so top_p 0.999 needs almost the whole vocabulary.
  Case c;
  c.add(Slot{1.0f, -1, 0.999f, 0.0f, 31}, 1);
  c.add(Slot{0.6f, -1, 0.999f, 0.0f, 32}, 1);
  c.add(Slot{1.0f, -1, 0.9f, 0.0f, 33}, 1);
  c.add(Slot{1.0f, 100000, 0.999f, 0.0f, 34}, 1);
  c.fill_normal(13, 0.1f);
  expect_passes(c, expect_same_as_cpu(c), kCompactionPasses + 1, kMany);
}

TEST(SamplerCuda, TinyTemperatureRestartsWhenTheWindowHoldsTooFewTokens) {
  SKIP_WITHOUT_CUDA();
  // At t 0.01 the 32-logit window is 0.32 of raw logit below the max: fewer than 40 tokens.
  Case c;
  for (int64_t s = 0; s < 4; ++s) {
    c.add(Slot{0.01f, kLargeK, 1.0f, 0.0f, 40 + s}, 2);
    c.add(Slot{0.01f, kLargeK, 0.95f, 0.0f, 50 + s}, 2);
  }
  c.fill_normal(14);
  expect_passes(c, expect_same_as_cpu(c), kCompactionPasses + 1, kMany);
}

TEST(SamplerCuda, MaskedVocabularyRowsMatchCpu) {
  SKIP_WITHOUT_CUDA();
  // All but 100 tokens -inf (zero mass, -inf score); top_k 200 reaches into the masked ones.
  // The last three rows are fully masked: every rule then falls back to token 0.
  Case c;
  const Slot kinds[] = {Slot{1.0f, -1, 0.9f, 0.0f, 1},
                        Slot{0.6f, 20, 1.0f, 0.0f, 2},
                        Slot{1.0f, 200, 1.0f, 0.0f, 3},
                        qwen3(0.6f, 4),
                        Slot{1.0f, -1, 1.0f, 0.1f, 5},
                        Slot{1.0f, -1, 1.0f, 0.0f, 6},
                        Slot{0.0f}};
  for (const Slot& s : kinds) c.add(s, 8);
  for (const Slot& s : {kinds[0], kinds[1], kinds[6]}) c.add(s, 8);
  c.fill_normal(15);
  std::mt19937 rng(16);
  std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
  for (int64_t r = 0; r < c.rows(); ++r) {
    std::vector<float> keep(c.row(r), c.row(r) + kVocab);
    std::fill(c.row(r), c.row(r) + kVocab, -kInf);
    if (r < 7)
      for (int i = 0; i < 100; ++i) {
        const int32_t v = id(rng);
        c.row(r)[v] = keep[v];
      }
  }
  expect_same_as_cpu(c);
}

TEST(SamplerCuda, StridedRowsAndOddVocabSizesMatchCpu) {
  SKIP_WITHOUT_CUDA();
  // Views into wider buffers (aligned and not: the 4-wide loads must fall back) and
  // vocabularies that are no multiple of 4, down to fewer tokens than blocks per row.
  const Slot kinds[] = {Slot{0.0f}, Slot{0.8f, -1, 1.0f, 0.0f, 1}, qwen3(0.6f, 2),
                        Slot{1.0f, -1, 0.9f, 0.0f, 3}, Slot{1.0f, 2, 1.0f, 0.1f, 4}};
  for (auto [vocab, ld] : {std::pair<int64_t, int64_t>{kVocab, kVocab + 13},
                           {kVocab, kVocab + 64},
                           {1003, 1003},
                           {1003, 1024},
                           {7, 9}}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab) + " ld " + std::to_string(ld));
    for (int64_t b : {1, 5}) {
      Case c;
      c.vocab = vocab;
      c.ld = ld;
      for (int64_t i = 0; i < b; ++i) c.add(b == 1 ? kinds[2] : kinds[i], static_cast<int32_t>(i));
      c.fill_normal(17);
      for (int64_t r = 0; r < b; ++r) std::fill(c.row(r) + vocab, c.row(r) + ld, 1e4f);  // unread
      expect_same_as_cpu(c);
    }
  }
}

}  // namespace
}  // namespace nanovllm::test
