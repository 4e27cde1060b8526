#include "engine/block_manager.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <numeric>

namespace nanovllm {
namespace {

Sequence make_seq(std::vector<int32_t> tokens, int block_size, int64_t id = 0) {
  return Sequence(id, std::move(tokens), SamplingParams{}, block_size);
}

std::vector<int32_t> iota_tokens(int n, int32_t start) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// Reference straight from the definition: XXH64(seed 0) of [prefix LE bytes] ++ int32 bytes.
uint64_t reference_hash(const uint64_t* prefix, const std::vector<int32_t>& tokens) {
  std::vector<unsigned char> bytes;
  if (prefix)
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<unsigned char>(*prefix >> (8 * i)));
  for (const int32_t t : tokens)
    for (int i = 0; i < 4; ++i)
      bytes.push_back(static_cast<unsigned char>(static_cast<uint32_t>(t) >> (8 * i)));
  return XXH64(bytes.data(), bytes.size(), 0);
}

void expect_all_free(const BlockManager& bm) {
  EXPECT_EQ(bm.num_free_blocks(), bm.num_blocks());
  EXPECT_EQ(bm.num_used_blocks(), 0);
  for (const Block& b : bm.blocks()) EXPECT_EQ(b.ref_count, 0) << "block " << b.block_id;
}

TEST(BlockManager, ChainedHashEqualsDirectXxh64Reference) {
  const std::vector<int32_t> b0 = {11, -2, 300000, 4}, b1 = {5, 6, 7, 8};
  const uint64_t h0 = reference_hash(nullptr, b0);
  const uint64_t h1 = reference_hash(&h0, b1);
  EXPECT_EQ(compute_block_hash(std::nullopt, b0), h0);
  EXPECT_EQ(compute_block_hash(h0, b1), h1);

  BlockManager bm(4, 4);
  std::vector<int32_t> tokens = b0;
  tokens.insert(tokens.end(), b1.begin(), b1.end());
  tokens.push_back(9);  // partial third block: never hashed
  Sequence seq = make_seq(tokens, 4);
  bm.allocate(seq);
  ASSERT_EQ(seq.block_table.size(), 3u);
  EXPECT_EQ(bm.block(seq.block_table[0]).hash, h0);
  EXPECT_EQ(bm.block(seq.block_table[1]).hash, h1);
  EXPECT_FALSE(bm.block(seq.block_table[2]).hash.has_value());
  EXPECT_EQ(bm.lookup(h1), seq.block_table[1]);
}

TEST(BlockManager, SameContentAtDifferentPositionHashesDifferently) {
  BlockManager bm(4, 3);
  Sequence seq = make_seq({1, 2, 3, 1, 2, 3, 1, 2, 3}, 3);
  bm.allocate(seq);
  std::vector<uint64_t> hashes;
  for (const int32_t id : seq.block_table) hashes.push_back(*bm.block(id).hash);
  EXPECT_NE(hashes[0], hashes[1]);
  EXPECT_NE(hashes[1], hashes[2]);
  EXPECT_NE(hashes[0], hashes[2]);
  EXPECT_EQ(seq.num_cached_tokens, 0);
}

TEST(BlockManager, SharedPrefixRaisesRefCountsAndReleaseLowersThem) {
  BlockManager bm(8, 4);
  std::vector<int32_t> prefix = iota_tokens(8, 100);
  std::vector<int32_t> t1 = prefix, t2 = prefix;
  t1.insert(t1.end(), {1, 2});
  t2.insert(t2.end(), {3, 4, 5});
  Sequence s1 = make_seq(t1, 4, 1), s2 = make_seq(t2, 4, 2);
  bm.allocate(s1);
  const int free_before = bm.num_free_blocks();
  bm.allocate(s2);
  EXPECT_EQ(s2.num_cached_tokens, 8);
  EXPECT_EQ(s2.block_table[0], s1.block_table[0]);
  EXPECT_EQ(s2.block_table[1], s1.block_table[1]);
  EXPECT_NE(s2.block_table[2], s1.block_table[2]);
  EXPECT_EQ(bm.num_free_blocks(), free_before - 1);  // only the partial block was new
  EXPECT_EQ(bm.block(s1.block_table[0]).ref_count, 2);
  EXPECT_EQ(bm.block(s1.block_table[1]).ref_count, 2);
  bm.deallocate(s1);
  EXPECT_EQ(bm.block(s2.block_table[0]).ref_count, 1);
  EXPECT_EQ(bm.block(s2.block_table[1]).ref_count, 1);
  EXPECT_TRUE(s1.block_table.empty());
  bm.deallocate(s2);
  expect_all_free(bm);
}

TEST(BlockManager, FreedCachedBlockIsRevivedByLaterIdenticalPrefix) {
  BlockManager bm(6, 4);
  std::vector<int32_t> tokens = iota_tokens(9, 7);
  Sequence s1 = make_seq(tokens, 4, 1);
  bm.allocate(s1);
  const std::vector<int32_t> old_table = s1.block_table;
  bm.deallocate(s1);
  expect_all_free(bm);
  tokens.back() = 99;  // same two full blocks, different partial block
  Sequence s2 = make_seq(tokens, 4, 2);
  const PrefixMatch match = bm.match_prefix(s2);
  EXPECT_EQ(match.num_cached_tokens, 8);
  EXPECT_EQ(match.num_blocks_needed, 3);  // two revived from the free list + one fresh
  bm.allocate(s2);
  EXPECT_EQ(s2.block_table[0], old_table[0]);
  EXPECT_EQ(s2.block_table[1], old_table[1]);
  EXPECT_EQ(s2.num_cached_tokens, 8);
  const std::vector<int32_t> free_ids = bm.free_block_ids();
  for (const int32_t id : s2.block_table) {
    EXPECT_EQ(std::count(free_ids.begin(), free_ids.end(), id), 0) << id;
    EXPECT_TRUE(bm.is_used(id));
  }
  EXPECT_EQ(bm.num_free_blocks(), 3);
}

TEST(BlockManager, ForcedHashCollisionNeverReusesWrongBlock) {
  // Every block hashes to the same value: only the guard keeps contents apart.
  BlockManager bm(16, 4,
                  [](std::optional<uint64_t>, std::span<const int32_t>) { return uint64_t{42}; });
  Sequence a = make_seq({1, 2, 3, 4, 5}, 4, 1);
  bm.allocate(a);
  // Same tokens at a later position (different prefix) must not alias a's block 0, though
  // the map entry points there and the tokens agree.
  Sequence c = make_seq({1, 2, 3, 4, 1, 2, 3, 4, 7}, 4, 3);
  bm.allocate(c);
  EXPECT_EQ(c.num_cached_tokens, 4);  // block 0 is a genuine hit
  EXPECT_EQ(c.block_table[0], a.block_table[0]);
  EXPECT_NE(c.block_table[1], a.block_table[0]);
  // Different tokens, same hash: a miss.
  Sequence b = make_seq({9, 9, 9, 9, 5}, 4, 2);
  bm.allocate(b);
  EXPECT_EQ(b.num_cached_tokens, 0);
  for (const int32_t id : b.block_table) {
    EXPECT_NE(id, a.block_table[0]);
    EXPECT_NE(id, c.block_table[1]);
  }
  EXPECT_EQ(bm.block(b.block_table[0]).ref_count, 1);
  for (Sequence* s : {&a, &b, &c}) bm.deallocate(*s);
  expect_all_free(bm);
}

TEST(BlockManager, ExhaustedPoolRefuses) {
  BlockManager bm(3, 4);
  Sequence too_long = make_seq(iota_tokens(13, 0), 4);  // 4 blocks
  EXPECT_FALSE(bm.can_allocate(too_long));
  Sequence fits = make_seq(iota_tokens(11, 0), 4);  // 3 blocks, the whole pool
  ASSERT_TRUE(bm.can_allocate(fits));
  bm.allocate(fits);
  EXPECT_EQ(bm.num_free_blocks(), 0);
  Sequence other = make_seq({50}, 4, 1);
  EXPECT_FALSE(bm.can_allocate(other));
  fits.append_token(1);  // 12 tokens: still inside block 3
  EXPECT_TRUE(bm.can_append(fits));
  bm.may_append(fits);
  fits.append_token(2);  // 13 tokens: needs a fourth block
  EXPECT_FALSE(bm.can_append(fits));
}

TEST(BlockManager, FullyCachedPromptRecomputesItsLastBlockFresh) {
  BlockManager bm(4, 4);
  const std::vector<int32_t> tokens = iota_tokens(8, 1);
  Sequence s1 = make_seq(tokens, 4, 1);
  bm.allocate(s1);
  Sequence s2 = make_seq(tokens, 4, 2);
  EXPECT_EQ(bm.match_prefix(s2).num_blocks_needed, 1);
  bm.allocate(s2);
  EXPECT_EQ(s2.num_cached_tokens, 4);  // the model still computes block 1
  EXPECT_EQ(s2.block_table[0], s1.block_table[0]);
  EXPECT_NE(s2.block_table[1], s1.block_table[1]);
  EXPECT_EQ(bm.block(s1.block_table[1]).ref_count, 1);  // never shared, never rewritten
  EXPECT_EQ(bm.block(s2.block_table[1]).hash, bm.block(s1.block_table[1]).hash);
  bm.deallocate(s1);
  bm.deallocate(s2);
  expect_all_free(bm);
}

TEST(BlockManager, CanAllocateCountsOnlyBlocksThatNeedAFreeBlock) {
  BlockManager bm(4, 4);
  std::vector<int32_t> tokens = iota_tokens(9, 1);
  Sequence s1 = make_seq(tokens, 4, 1);
  bm.allocate(s1);  // 3 blocks used, 1 free
  tokens.back() = 77;
  Sequence s2 = make_seq(tokens, 4, 2);  // 3 blocks, two of them shared with s1
  EXPECT_EQ(bm.num_free_blocks(), 1);
  EXPECT_TRUE(bm.can_allocate(s2));
  bm.allocate(s2);
  EXPECT_EQ(bm.num_free_blocks(), 0);
}

TEST(BlockManager, MayAppendHashesAFilledBlockAndAllocatesAtTheNextBoundary) {
  BlockManager bm(4, 4);
  Sequence s = make_seq({1, 2, 3}, 4);
  bm.allocate(s);
  s.append_token(4);  // fills block 0
  ASSERT_TRUE(bm.can_append(s));
  bm.may_append(s);
  ASSERT_EQ(s.block_table.size(), 1u);
  EXPECT_EQ(bm.block(s.block_table[0]).hash, reference_hash(nullptr, {1, 2, 3, 4}));
  s.append_token(5);  // starts block 1
  const int free_before = bm.num_free_blocks();
  bm.may_append(s);
  EXPECT_EQ(s.block_table.size(), 2u);
  EXPECT_EQ(bm.num_free_blocks(), free_before - 1);
  // A new prompt with the generated block as prefix hits it.
  Sequence t = make_seq({1, 2, 3, 4, 9}, 4, 1);
  bm.allocate(t);
  EXPECT_EQ(t.num_cached_tokens, 4);
  EXPECT_EQ(t.block_table[0], s.block_table[0]);
}

TEST(BlockManager, BlocksToGrowCountsWhatGrowTakesFromTheFreeList) {
  BlockManager bm(8, 4);
  Sequence s = make_seq({1, 2, 3, 4, 5}, 4);  // 2 blocks
  bm.allocate(s);
  EXPECT_EQ(bm.blocks_to_grow(s, 5), 0);
  EXPECT_EQ(bm.blocks_to_grow(s, 8), 0);  // the second block holds up to 8
  EXPECT_EQ(bm.blocks_to_grow(s, 9), 1);
  EXPECT_EQ(bm.blocks_to_grow(s, 17), 3);
  EXPECT_EQ(bm.blocks_to_grow(s, 3), 0);  // never negative
  // A pending token (async scheduling) past the known ones: grow takes exactly that many.
  for (int32_t t = 6; t <= 8; ++t) s.append_token(t);
  const int free_before = bm.num_free_blocks();
  const int taken = bm.blocks_to_grow(s, s.num_tokens() + 1);
  ASSERT_EQ(taken, 1);
  s.num_pending_tokens = 1;
  bm.grow(s, s.num_tokens() + 1);
  EXPECT_EQ(bm.num_free_blocks(), free_before - taken);
  EXPECT_EQ(bm.blocks_to_grow(s, s.num_tokens() + 1), 0);
  // 3 blocks held, 5 free: 8 blocks' worth of tokens fit, one more does not.
  ASSERT_EQ(bm.num_free_blocks(), 5);
  EXPECT_TRUE(bm.can_grow(s, 8 * 4));
  EXPECT_FALSE(bm.can_grow(s, 8 * 4 + 1));
}

TEST(BlockManager, ReusingAFreedBlockDropsItsStaleHashEntry) {
  BlockManager bm(2, 2);
  Sequence s1 = make_seq({1, 2, 3}, 2, 1);
  bm.allocate(s1);
  const uint64_t h = *bm.block(s1.block_table[0]).hash;
  bm.deallocate(s1);
  ASSERT_TRUE(bm.lookup(h).has_value());
  Sequence s2 = make_seq({5, 6, 7, 8}, 2, 2);  // takes both blocks for new content
  bm.allocate(s2);
  EXPECT_FALSE(bm.lookup(h).has_value());
  bm.deallocate(s2);
  Sequence s3 = make_seq({1, 2, 3}, 2, 3);
  bm.allocate(s3);
  EXPECT_EQ(s3.num_cached_tokens, 0);
}

}  // namespace
}  // namespace nanovllm
