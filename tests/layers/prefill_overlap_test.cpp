// Where a prefill step's rows are cut for the overlapped row-parallel sums
// (layers/prefill_overlap.h): pieces within the copy-engine slot, multiples of 16 rows but the
// last, at least two, and one stream where the step is small, the path missing, or the pieces
// too many.
#include "layers/prefill_overlap.h"

#include <gtest/gtest.h>

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

TEST(PrefillOverlapPieceAttention, AutoTakesItFromFourRanksOnAndOffAtAnyCount) {
  for (int ranks : {1, 2}) EXPECT_FALSE(PrefillOverlap::attention_by_piece("auto", ranks));
  for (int ranks : {4, 8}) EXPECT_TRUE(PrefillOverlap::attention_by_piece("auto", ranks));
  for (int ranks : {2, 4}) {
    EXPECT_TRUE(PrefillOverlap::attention_by_piece("on", ranks));
    EXPECT_FALSE(PrefillOverlap::attention_by_piece("off", ranks));
  }
}

}  // namespace
}  // namespace nanovllm
