// Where a prefill step's rows are cut for the overlapped row-parallel sums
// (layers/prefill_overlap.h): pieces within the copy-engine slot, multiples of 16 rows but the
// last, at least two, and one stream where the step is small, the path missing, or the pieces
// too many.
#include "layers/prefill_overlap.h"

#include <gtest/gtest.h>

#include "kernels/attention.h"

namespace nanovllm {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// cuts covers [0, tokens) in increasing pieces, each of at most `most_rows` rows, all but the
// last a multiple of 16.
void expect_cover(const std::vector<int64_t>& cuts, int64_t tokens, int64_t most_rows) {
  ASSERT_GE(cuts.size(), 3u) << "at least two pieces";
  EXPECT_EQ(cuts.front(), 0);
  EXPECT_EQ(cuts.back(), tokens);
  for (size_t p = 0; p + 1 < cuts.size(); ++p) {
    const int64_t rows = cuts[p + 1] - cuts[p];
    EXPECT_GT(rows, 0) << "piece " << p;
    EXPECT_LE(rows, most_rows) << "piece " << p;
    if (p + 2 < cuts.size()) {
      EXPECT_EQ(rows % 16, 0) << "piece " << p;
    }
  }
}

TEST(PrefillOverlapPieces, TheEightBShapesChunkOf4096RowsIsTwoHalvesOfOneSlot) {
  // 2,048 rows of 4,096 bf16 values are 16 MiB: exactly one slot.
  EXPECT_EQ(PrefillOverlap::pieces(4096, 4096, 16 * kMiB), (std::vector<int64_t>{0, 2048, 4096}));
}

TEST(PrefillOverlapPieces, LargerStepsTakeAsManySlotsAsTheyNeedEvenly) {
  const auto cuts = PrefillOverlap::pieces(16384, 4096, 16 * kMiB);
  EXPECT_EQ(cuts.size(), 9u);  // 8 pieces of 2,048 rows
  expect_cover(cuts, 16384, 2048);
  // Hidden 5120 (14B, 32B): 1,632 rows a slot at most; an odd step leaves a short last piece.
  const auto odd = PrefillOverlap::pieces(10001, 5120, 16 * kMiB);
  expect_cover(odd, 10001, 1632);
  EXPECT_EQ(odd.size(), 8u);  // 7 pieces: ceil(10001 / 1632)
}

TEST(PrefillOverlapPieces, SmallStepsNoPathAndTooManyPiecesKeepOneStream) {
  EXPECT_TRUE(PrefillOverlap::pieces(PrefillOverlap::kMinTokens - 1, 4096, 16 * kMiB).empty());
  EXPECT_FALSE(PrefillOverlap::pieces(PrefillOverlap::kMinTokens, 4096, 16 * kMiB).empty());
  EXPECT_TRUE(PrefillOverlap::pieces(4096, 4096, 0).empty());     // no copy-engine path
  EXPECT_TRUE(PrefillOverlap::pieces(4096, 4096, 1000).empty());  // not one row of 16 fits
  // 16 pieces of 2,048 rows are the most: 32,768 rows go, one row more does not.
  EXPECT_EQ(PrefillOverlap::pieces(32768, 4096, 16 * kMiB).size(), 17u);
  EXPECT_TRUE(PrefillOverlap::pieces(32769, 4096, 16 * kMiB).empty());
}

// The shapes measured on 4 H200s (132 SMs), 32k prompts: a piece's CTAs of the Hopper prefill
// kernel (kernels/attention.h) from the pieces PrefillOverlap::pieces cuts a 16,384-row chunk in.
int64_t piece_ctas(int64_t hidden, int64_t hq, int64_t hkv) {
  const auto cuts = PrefillOverlap::pieces(16384, hidden, 16 * kMiB);
  return kernels::cuda::hopper_prefill_ctas(cuts[1] - cuts[0], hq, hkv);
}

TEST(PrefillOverlapPieceAttention, AutoTakesItFromFourRanksWhereEachPieceFillsItsWaves) {
  constexpr int kSms = 132;
  // The 8B shape at tp 4 (8 q / 2 kv heads a rank, pieces of 2,048 rows): 128 CTAs, gained.
  EXPECT_EQ(piece_ctas(4096, 8, 2), 128);
  EXPECT_TRUE(PrefillOverlap::attention_by_piece("auto", 4, true, piece_ctas(4096, 8, 2), kSms));
  // The 0.6B at tp 4 (4 q / 2 kv, 8,192 rows): 256 CTAs in two waves, gained.
  EXPECT_EQ(piece_ctas(1024, 4, 2), 256);
  EXPECT_TRUE(PrefillOverlap::attention_by_piece("auto", 4, true, piece_ctas(1024, 4, 2), kSms));
  // The 4B at tp 4 (8 q / 2 kv, 2,736 rows): 172 CTAs, 1.3 waves, lost.
  EXPECT_EQ(piece_ctas(2560, 8, 2), 172);
  EXPECT_FALSE(PrefillOverlap::attention_by_piece("auto", 4, true, piece_ctas(2560, 8, 2), kSms));
  // The 14B at tp 4 (10 q / 2 kv: G 5, the Hopper kernel's padded tiles of 24 positions; 1,504
  // rows): 126 CTAs, gained. Under the mma.sync kernel (before G 5 took the Hopper one) it lost.
  EXPECT_EQ(piece_ctas(5120, 10, 2), 126);
  EXPECT_TRUE(PrefillOverlap::attention_by_piece("auto", 4, true, piece_ctas(5120, 10, 2), kSms));
  EXPECT_FALSE(PrefillOverlap::attention_by_piece("auto", 4, false, 126, kSms));
  // Two ranks keep one attention a layer (the 8B at tp 2: 256 CTAs a piece, lost).
  EXPECT_FALSE(PrefillOverlap::attention_by_piece("auto", 2, true, piece_ctas(4096, 16, 4), kSms));
  EXPECT_TRUE(PrefillOverlap::attention_by_piece("auto", 8, true, 264, kSms));
}

TEST(PrefillOverlapPieceAttention, OnAndOffHoldWhateverTheShape) {
  for (int ranks : {2, 4})
    for (int64_t ctas : {int64_t{128}, int64_t{172}}) {
      EXPECT_TRUE(PrefillOverlap::attention_by_piece("on", ranks, false, ctas, 132));
      EXPECT_FALSE(PrefillOverlap::attention_by_piece("off", ranks, true, ctas, 132));
    }
}

}  // namespace
}  // namespace nanovllm
