// min_tokens on the CUDA sampler: the mask of eos / stop ids a slot applies until its position
// matches the CPU reference token for token, never lets a masked id be drawn, and writes -inf
// into the processed rows only where it applies (the logits are never written).
#include <gtest/gtest.h>

#include "tests/kernels/sampler_cuda_case.h"

namespace nanovllm::test {
namespace {

// The ids of row r's `count` largest logits, largest first.
std::vector<int32_t> top_ids(Case& c, int64_t r, int count) {
  std::vector<int32_t> ids(static_cast<size_t>(c.vocab));
  for (int32_t v = 0; v < c.vocab; ++v) ids[v] = v;
  const float* l = c.row(r);
  std::partial_sort(ids.begin(), ids.begin() + count, ids.end(),
                    [l](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  ids.resize(static_cast<size_t>(count));
  return ids;
}

// A min_tokens batch: row i has a slot of its own of kind i % 6, masking its row's top
// `masked` tokens (plus padding ids the kernels must skip) until position 20; rows alternate
// below the position (masked) and at it (free); every 5th row is padding, every 7th slot a
// refill with stale ids but position 0.
Case min_tokens_case(int64_t b, int masked, uint32_t seed) {
  Case c;
  for (int64_t i = 0; i < b; ++i) {
    const Slot kinds[] = {Slot{0.0f},
                          qwen3(0.6f, i),
                          Slot{1.0f, -1, 1.0f, 0.0f, i},
                          Slot{1.0f, -1, 0.9f, 0.0f, i},
                          Slot{0.7f, -1, 1.0f, 0.05f, i},
                          Slot{1.0f, 1, 1.0f, 0.0f, i}};
    c.add(kinds[i % 6], i % 2 ? 19 : 18);  // draws token 20 (free) or 19 (< 20: masked)
    if (i % 5 == 4) c.row_slot.back() = -1;
  }
  c.fill_normal(seed);
  for (int64_t i = 0; i < b; ++i) {
    Slot& s = c.slots[i];
    s.masked = top_ids(c, i, masked);
    s.masked.insert(s.masked.begin() + masked / 2, {-1, static_cast<int32_t>(c.vocab), -7});
    s.min_pos = i % 7 == 6 ? 0 : 20;
  }
  return c;
}

TEST(SamplerCuda, MinTokensMaskMatchesCpuAndNeverDrawsAMaskedId) {
  SKIP_WITHOUT_CUDA();
  // Batch sizes that leave the mask kernel's last block partly empty and give 8 to 1 blocks
  // per row in the sampler; masks of 1 id (the argmax), 4 and the longest, 48 ids (45 here,
  // plus three padding entries).
  for (int64_t b : {1, 7, 41, 301})
    for (int masked : {1, 4, 45}) {
      SCOPED_TRACE("batch " + std::to_string(b) + " masked " + std::to_string(masked));
      Case c = min_tokens_case(b, masked, 20 + static_cast<uint32_t>(b));
      const Out got = expect_same_as_cpu(c);
      int masked_rows = 0;
      for (int64_t r = 0; r < b; ++r) {
        if (c.row_slot[r] < 0) continue;
        const Slot& s = c.slots[c.row_slot[r]];
        if (c.positions[r] + 1 < s.min_pos) {
          ++masked_rows;
          EXPECT_EQ(std::find(s.masked.begin(), s.masked.end(), got.tokens[r]), s.masked.end())
              << describe(c, r) << " token " << got.tokens[r];
        } else if (s.t == 0.0f) {  // free again: the argmax
          EXPECT_EQ(got.tokens[r], std::max_element(c.row(r), c.row(r) + c.vocab) - c.row(r))
              << describe(c, r);
        }
      }
      if (b > 1) {
        EXPECT_GT(masked_rows, 0);
      }
    }
}

TEST(SamplerCuda, MinTokensMaskWritesMinusInfinityIntoProcessedRowsOnlyAndNeverIntoTheLogits) {
  SKIP_WITHOUT_CUDA();
  Case c = min_tokens_case(23, 6, 30);
  Buffers after;
  run_cuda(c, &after);
  EXPECT_EQ(first_difference(after.logits, c.logits), -1) << "the logits were written";
  int masked_rows = 0;
  for (int64_t r = 0; r < c.rows(); ++r) {
    const bool applies = c.row_slot[r] >= 0 && c.positions[r] + 1 < c.slots[c.row_slot[r]].min_pos;
    // A masked row: the raw row with -inf at the ids; any other: untouched (the poison).
    std::vector<float> want(c.vocab, unwritten_float());
    if (applies) {
      ++masked_rows;
      want.assign(c.row(r), c.row(r) + c.vocab);
      for (int32_t id : c.slots[c.row_slot[r]].masked)
        if (id >= 0 && id < c.vocab) want[id] = -kInf;
    }
    const std::vector<float> got(after.processed.begin() + r * c.vocab,
                                 after.processed.begin() + (r + 1) * c.vocab);
    EXPECT_EQ(first_difference(got, want), -1) << describe(c, r);
  }
  EXPECT_GT(masked_rows, 0);
}

}  // namespace
}  // namespace nanovllm::test
