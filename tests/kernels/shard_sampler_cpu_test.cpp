// Sampling from vocabulary shards on the CPU (kernels/shard_sampler.h): for every rule it
// covers, each rank's candidates merged on rank 0 give the full-row sampler's token, at any
// rank count, including uneven last shards, ties across shards and padding rows.
#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/sampler_math.h"
#include "tests/kernels/shard_sampler_case.h"

namespace nanovllm {
namespace {

constexpr int K = kernels::kShardCandidates;

// Every rank's keys [tp, rows, K] for the case.
std::vector<int64_t> all_keys(test::ShardCase& c, int tp) {
  std::vector<int64_t> keys(static_cast<size_t>(tp * c.rows * K), -1);
  for (int r = 0; r < tp; ++r) {
    std::vector<float> shard = c.shard(tp, r);
    kernels::ShardCandidatesBatch b;
    b.shard_logits = test::view(shard, {c.rows, c.shard_width(tp)});
    b.vocab_start = r * c.shard_width(tp);
    b.columns = c.shard_columns(tp, r);
    b.vocab = c.vocab;
    b.slots = test::view(c.row_slot, {c.rows});
    b.positions = test::view(c.positions, {c.rows});
    b.params = c.params();
    b.keys = TensorView(keys.data() + r * c.rows * K, DType::kI64, {c.rows, K});
    kernels::cpu::shard_candidates(b);
  }
  return keys;
}

std::vector<int32_t> merged_tokens(test::ShardCase& c, int tp, std::vector<int64_t>& keys,
                                   std::vector<int32_t>* last_tokens = nullptr) {
  std::vector<int32_t> out(static_cast<size_t>(c.rows), -7);
  kernels::ShardMergeBatch m;
  m.keys = test::view(keys, {tp, c.rows, K});
  m.slots = test::view(c.row_slot, {c.rows});
  m.positions = test::view(c.positions, {c.rows});
  m.vocab = c.vocab;
  m.params = c.params();
  m.out_tokens = test::view(out, {c.rows});
  if (last_tokens) m.last_tokens = test::view(*last_tokens, {c.num_slots()});
  kernels::cpu::merge_shard_candidates(m);
  return out;
}

TEST(ShardSamplerCpu, MergedShardsDrawTheFullRowSamplersTokenAtEveryRankCount) {
  for (const int64_t vocab : {1000, 997}) {
    test::ShardCase c = test::make_shard_case(vocab, 77, static_cast<uint32_t>(vocab));
    const std::vector<int32_t> want = c.reference_tokens();
    for (const int tp : {1, 2, 3, 4, 8}) {
      std::vector<int64_t> keys = all_keys(c, tp);
      EXPECT_EQ(merged_tokens(c, tp, keys), want) << "vocab " << vocab << ", tp " << tp;
    }
  }
}

TEST(ShardSamplerCpu, ManySeedsAndPositionsAgreeWithTheFullRowSampler) {
  // The Gumbel draws differ per seed and position: many of them, two shard layouts.
  test::ShardCase c = test::make_shard_case(640, 66, 5);
  for (int round = 0; round < 20; ++round) {
    for (auto& s : c.seeds) s = s * 6364136223846793005LL + 1442695040888963407LL;
    for (auto& p : c.positions) p += 1;
    const std::vector<int32_t> want = c.reference_tokens();
    for (const int tp : {2, 5}) {
      std::vector<int64_t> keys = all_keys(c, tp);
      ASSERT_EQ(merged_tokens(c, tp, keys), want) << "round " << round << ", tp " << tp;
    }
  }
}

TEST(ShardSamplerCpu, ATopKShardGivesItsOwnTopKSortedWithGlobalIds) {
  test::ShardCase c = test::make_shard_case(1000, 7, 3);
  const int tp = 4;
  std::vector<int64_t> keys = all_keys(c, tp);
  const int64_t w = c.shard_width(tp);
  const int64_t row = 4;  // slot 4: t 0.6, top_k 20
  ASSERT_EQ(c.row_slot[row], 4);
  for (int r = 0; r < tp; ++r) {
    const uint64_t* k = reinterpret_cast<const uint64_t*>(keys.data() + (r * c.rows + row) * K);
    // The shard's tokens by (logit desc, id asc), from the full row.
    std::vector<int32_t> ids;
    for (int64_t v = r * w; v < std::min(c.vocab, (r + 1) * w); ++v)
      ids.push_back(static_cast<int32_t>(v));
    const float* x = c.logits.data() + row * c.vocab;
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
    for (int i = 0; i < K; ++i) {
      if (i < 20) {
        EXPECT_EQ(kernels::key_id(k[i]), ids[i]) << "rank " << r << ", key " << i;
        EXPECT_EQ(kernels::key_logit(k[i]), kernels::scaled_logit(x[ids[i]], 0.6f));
      } else {
        EXPECT_EQ(k[i], 0u) << "rank " << r << ", key " << i << " past top_k";
      }
    }
  }
}

TEST(ShardSamplerCpu, FlatRowsGoToTheLowestIdsAndPaddingRowsToZero) {
  test::ShardCase c = test::make_shard_case(1000, 14, 9);
  const int tp = 4;
  std::vector<int64_t> keys = all_keys(c, tp);
  std::vector<int32_t> last(static_cast<size_t>(c.num_slots()), -3);
  const std::vector<int32_t> got = merged_tokens(c, tp, keys, &last);
  // Rows 7 and 12 are flat: row 7's slot (top-k 40) draws among ids 0..39, row 12's (greedy)
  // takes id 0.
  ASSERT_EQ(c.row_slot[7], 7);
  EXPECT_LT(got[7], 40);
  ASSERT_EQ(c.row_slot[12], 1);
  EXPECT_EQ(got[12], 0);
  EXPECT_EQ(got[6], 0);  // padding
  EXPECT_EQ(got[13], 0);
  for (int r = 0; r < tp; ++r)
    for (int i = 0; i < K; ++i) EXPECT_EQ(keys[(r * c.rows + 6) * K + i], 0) << "padding keys";
  std::vector<int32_t> want_last(last.size(), -3);  // the last row naming each slot
  for (int64_t b = 0; b < c.rows; ++b)
    if (c.row_slot[b] >= 0) want_last[c.row_slot[b]] = got[b];
  EXPECT_EQ(last, want_last);
  EXPECT_EQ(got, c.reference_tokens());
}

}  // namespace
}  // namespace nanovllm
