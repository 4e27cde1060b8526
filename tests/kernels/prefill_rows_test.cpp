// A piece of a prefill step's rows (kernels/prefill_rows.h): which rows of each sequence it
// keeps and how many keys they see, so that every kept query keeps its position and so
// attends to exactly the keys it attends to in the whole step.
#include "kernels/prefill_rows.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace nanovllm {
namespace {

using kernels::clip_seqlens_to_rows;

struct Clipped {
  std::vector<int32_t> q, k;
};
Clipped clip(const std::vector<int32_t>& cu_q, const std::vector<int32_t>& cu_k, int32_t a,
             int32_t b) {
  Clipped c{std::vector<int32_t>(cu_q.size()), std::vector<int32_t>(cu_k.size())};
  clip_seqlens_to_rows(cu_q.data(), cu_k.data(), static_cast<int>(cu_q.size()) - 1, a, b,
                       c.q.data(), c.k.data());
  return c;
}

TEST(PrefillRows, OneLongPromptsPieceSeesItsCachedPrefixAndItsOwnRowsSoFar) {
  // A 16,384-token chunk after 16,384 cached tokens; the piece of rows 2,048..4,095.
  const Clipped c = clip({0, 16384}, {0, 32768}, 2048, 4096);
  EXPECT_EQ(c.q, (std::vector<int32_t>{2048, 4096}));
  EXPECT_EQ(c.k, (std::vector<int32_t>{0, 16384 + 4096}));
}

TEST(PrefillRows, SequencesOutsideThePieceGetNoRowsAndNoKeys) {
  // Rows [0, 3), [3, 10), [10, 12); keys 5 (2 cached), 7, 2; the piece [4, 11).
  const Clipped c = clip({0, 3, 10, 12}, {0, 5, 12, 14}, 4, 11);
  EXPECT_EQ(c.q, (std::vector<int32_t>{4, 4, 10, 11}));
  EXPECT_EQ(c.k, (std::vector<int32_t>{0, 0, 7, 8}));
}

TEST(PrefillRows, EveryRowKeepsItsPositionInWhicheverPieceHoldsIt) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int batch = std::uniform_int_distribution<int>(1, 6)(rng);
    std::vector<int32_t> cu_q{0}, cu_k{0};
    for (int j = 0; j < batch; ++j) {
      const int q = std::uniform_int_distribution<int>(1, 40)(rng);
      const int cached = std::uniform_int_distribution<int>(0, 30)(rng);
      cu_q.push_back(cu_q.back() + q);
      cu_k.push_back(cu_k.back() + cached + q);
    }
    const int32_t rows = cu_q.back();
    std::vector<int32_t> cuts{0};
    while (cuts.back() < rows)
      cuts.push_back(std::min(rows, cuts.back() + std::uniform_int_distribution<int>(1, 25)(rng)));
    std::vector<int> seen(static_cast<size_t>(rows), 0);
    for (size_t p = 0; p + 1 < cuts.size(); ++p) {
      const Clipped c = clip(cu_q, cu_k, cuts[p], cuts[p + 1]);
      ASSERT_EQ(c.q.front(), std::max(cu_q.front(), cuts[p]));
      ASSERT_EQ(c.q.back(), cuts[p + 1]);
      for (int j = 0; j < batch; ++j) {
        const int32_t q_len = c.q[j + 1] - c.q[j], k_len = c.k[j + 1] - c.k[j];
        ASSERT_GE(q_len, 0);
        ASSERT_GE(k_len, q_len);
        for (int32_t r = c.q[j]; r < c.q[j + 1]; ++r) {
          ASSERT_TRUE(r >= cuts[p] && r < cuts[p + 1]);
          ++seen[static_cast<size_t>(r)];
          // The position (and so the causal key range) in the piece and in the whole step.
          const int32_t in_piece = k_len - q_len + (r - c.q[j]);
          const int32_t whole = (cu_k[j + 1] - cu_k[j]) - (cu_q[j + 1] - cu_q[j]) + (r - cu_q[j]);
          ASSERT_EQ(in_piece, whole) << "trial " << trial << " row " << r;
        }
      }
    }
    for (int s : seen) ASSERT_EQ(s, 1);  // every row in exactly one piece
  }
}

}  // namespace
}  // namespace nanovllm
