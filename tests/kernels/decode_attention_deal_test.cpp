// kernels/cuda/decode_attention_deal.h: how the split decode kernel deals a batch's context
// tiles to its CTAs. The CUDA tests check the attention each deal gives; these pin the deal's
// own properties on the CPU, over many batches and grids.
#include "kernels/cuda/decode_attention_deal.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace nanovllm::test {
namespace {

using kernels::cuda::decode::cta_of;
using kernels::cuda::decode::Deal;
using kernels::cuda::decode::deal_units;
using kernels::cuda::decode::parted;
using kernels::cuda::decode::partial_cell;
using kernels::cuda::decode::Range;
using kernels::cuda::decode::range_begin;
using kernels::cuda::decode::range_of;

constexpr int kMinQuota = 2;  // decode_attention_plan.cuh's (the bf16 ring's stages - 1)

// A batch as the kernel's plan sees it: every sequence's tiles, times the kv heads.
struct Batch {
  std::vector<int> tiles;  // per sequence (0: a padding row)
  int hkv = 8;
  int64_t units() const {
    int64_t w = 0;
    for (int t : tiles) w += int64_t{t} * hkv;
    return w;
  }
  int min_tiles() const {
    int m = INT_MAX;
    for (int t : tiles)
      if (t > 0) m = std::min(m, t);
    return m;
  }
  int max_tiles() const { return *std::max_element(tiles.begin(), tiles.end()); }
  Deal deal(int64_t grid) const {
    return deal_units(units(), grid, min_tiles(), max_tiles(), kMinQuota);
  }
};

// The group (sequence, kv head) holding unit u, as [begin, end) units.
std::pair<int64_t, int64_t> group_of(const Batch& b, int64_t u) {
  int64_t first = 0;
  for (int t : b.tiles) {
    const int64_t n = int64_t{t} * b.hkv;
    if (u < first + n) {
      const int64_t g = first + (u - first) / t * t;
      return {g, g + t};
    }
    first += n;
  }
  return {-1, -1};
}

// Every property a deal must have whatever the batch: at most `grid` CTAs, non-empty ranges
// that tile [0, W) in CTA order, cta_of the inverse of range_begin, and each range's own
// partial cell 2j for the piece that begins it.
void expect_partition(const Batch& b, int64_t grid, const std::string& what) {
  const Deal d = b.deal(grid);
  const int64_t w = b.units();
  ASSERT_LE(d.ctas, grid) << what;
  ASSERT_GT(d.ctas, 0) << what;
  int64_t prev = 0;
  for (int64_t j = 0; j < d.ctas; ++j) {
    const int64_t begin = range_begin(d, j), end = range_begin(d, j + 1);
    const Range r = range_of(d, j);  // the kernels' form: both bounds from shared divisions
    ASSERT_EQ(r.begin, begin) << what << ", CTA " << j;
    ASSERT_EQ(r.end, end) << what << ", CTA " << j;
    ASSERT_EQ(begin, prev) << what << ", CTA " << j;
    ASSERT_LT(begin, end) << what << ", CTA " << j << ": empty range";
    for (int64_t u : {begin, (begin + end) / 2, end - 1}) {
      ASSERT_EQ(cta_of(d, u), j) << what << ", unit " << u;
    }
    EXPECT_EQ(partial_cell(d, j, begin), 2 * j) << what;
    if (end - begin > 1) {
      EXPECT_EQ(partial_cell(d, j, begin + 1), 2 * j + 1) << what;
    }
    prev = end;
  }
  EXPECT_EQ(prev, w) << what << ": the ranges stop short of the units";
}

TEST(DecodeAttentionDeal, RangesTileTheUnitsAndCtaOfInvertsThemForMixedAndEqualLengths) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 3000; ++trial) {
    Batch b;
    b.hkv = std::vector<int>{1, 2, 4, 8}[trial % 4];
    const int n = std::uniform_int_distribution<int>(1, 300)(rng);
    const bool equal = trial % 2 == 0;
    const int t0 = std::uniform_int_distribution<int>(1, 1200)(rng);
    for (int i = 0; i < n; ++i)
      b.tiles.push_back(equal ? t0 : std::uniform_int_distribution<int>(1, 1200)(rng));
    if (trial % 5 == 0) b.tiles.push_back(0);  // a padding row
    const int64_t grid = std::vector<int64_t>{7, 100, 132, 528, 1056}[trial % 5];
    expect_partition(b, grid,
                     "trial " + std::to_string(trial) + " (" + std::to_string(n) + " seqs, grid " +
                         std::to_string(grid) + (equal ? ", equal" : ", mixed") + ")");
    if (HasFatalFailure()) return;
  }
}

// Mixed lengths keep the plain deal: every range but the last holds exactly the quota, the
// quota being ceil(W / grid) raised to the kernel's floor.
TEST(DecodeAttentionDeal, MixedLengthsDealEqualQuotasOfCeilWOverGrid) {
  Batch b;
  b.tiles = {40, 3, 700, 33, 1, 512, 96};
  const Deal d = b.deal(528);
  EXPECT_FALSE(parted(d));
  // A one-tile group lowers the floor to 1 (a range of two one-tile groups is no cheaper).
  EXPECT_EQ(d.quota, std::max<int64_t>((b.units() + 527) / 528, 1));
  for (int64_t j = 0; j + 1 < d.ctas; ++j)
    EXPECT_EQ(range_begin(d, j + 1) - range_begin(d, j), d.quota) << "CTA " << j;
}

// Equal lengths whose groups are split: each range inside one group, every group cut at the
// same offsets, at most 1/8 more tiles a CTA than the plain quota.
void expect_equal_parts(const Batch& b, int64_t grid, const std::string& what) {
  expect_partition(b, grid, what);
  const Deal d = b.deal(grid);
  const int64_t quota = std::max<int64_t>((b.units() + grid - 1) / grid, kMinQuota);
  std::map<int64_t, std::vector<int64_t>> cuts;  // group begin -> where its ranges begin in it
  for (int64_t j = 0; j < d.ctas; ++j) {
    const int64_t begin = range_begin(d, j), end = range_begin(d, j + 1);
    const auto [g0, g1] = group_of(b, begin);
    EXPECT_LE(end, g1) << what << ", CTA " << j << " straddles a group end";
    EXPECT_LE((end - begin) * 8, quota * 9) << what << ", CTA " << j;
    cuts[g0].push_back(begin - g0);
  }
  for (const auto& [g0, offsets] : cuts)
    EXPECT_EQ(offsets, cuts.begin()->second) << what << ", the group at unit " << g0;
}

TEST(DecodeAttentionDeal, EqualLengthsSplitIntoPartsAtTheSameOffsetsNotStraddlingRanges) {
  // 8 sequences of 32769 tokens (1025 tiles), 8 kv heads, 528 CTAs: 8 parts of 128-129 tiles.
  Batch long8{std::vector<int>(8, 1025), 8};
  const Deal d = long8.deal(528);
  EXPECT_TRUE(parted(d));
  EXPECT_EQ(d.ctas, 512);
  EXPECT_EQ(range_begin(d, 1), 128);
  EXPECT_EQ(range_begin(d, 8), 1025);
  EXPECT_EQ(range_begin(d, 9), 1025 + 128);
  expect_equal_parts(long8, 528, "8 x 1025 tiles");
  // One sequence of 1025 tokens (33 tiles): 17 parts of 1-2 tiles, where ranges of the quota
  // (2) would straddle every group end.
  Batch one{{33}, 8};
  EXPECT_TRUE(parted(one.deal(528)));
  EXPECT_EQ(one.deal(528).ctas, 8 * 17);
  expect_equal_parts(one, 528, "1 x 33 tiles");
  // Padding rows are no groups: 3 x 157 tiles over 2 kv heads.
  Batch padded{{0, 157, 157, 0, 157}, 2};
  expect_equal_parts(padded, 528, "3 x 157 tiles and padding");
  // Parts that divide the group evenly stay plain ranges (batch 1 at 1024 tokens: quota 2).
  Batch even{{32}, 8};
  EXPECT_FALSE(parted(even.deal(528)));
  EXPECT_EQ(even.deal(528).quota, 2);
  expect_equal_parts(even, 528, "1 x 32 tiles");
}

TEST(DecodeAttentionDeal, EqualLengthsTooCostlyToPartKeepTheQuotaOrWholeGroups) {
  // 8 x 1025 tokens over 8 kv heads: 64 groups of 33 tiles, quota 4; 8 parts a group (what 528
  // CTAs allow) would take 5 tiles a CTA, 1/4 more: the plain quota stays, ranges straddle.
  Batch b8{std::vector<int>(8, 33), 8};
  const Deal d = b8.deal(528);
  EXPECT_FALSE(parted(d));
  EXPECT_EQ(d.quota, 4);
  expect_partition(b8, 528, "8 x 33 tiles");
  // 64 x 4096 tokens: 512 groups of 128 tiles against a quota of 125: whole groups, none split.
  Batch whole{std::vector<int>(64, 128), 8};
  EXPECT_EQ(whole.deal(528).quota, 128);
  EXPECT_EQ(whole.deal(528).ctas, 512);
  expect_partition(whole, 528, "64 x 128 tiles");
}

}  // namespace
}  // namespace nanovllm::test
