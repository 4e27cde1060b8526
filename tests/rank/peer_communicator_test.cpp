// Which path an all-reduce takes (rank/peer_communicator.h): the measured crossovers, where a
// one-shot message goes as a push, and NCCL wherever the peer path cannot or must not run.
#include "rank/peer_communicator.h"

#include <gtest/gtest.h>

namespace nanovllm {
namespace {

constexpr size_t kKiB = 1024, kMiB = 1024 * 1024, kStaging = 8 * kMiB;

TEST(AllReduceChoice, TwoRanksTakeTheOneShotUpToTheStagingBuffer) {
  for (const size_t bytes : {2 * kKiB, 256 * kKiB, 2 * kMiB, 8 * kMiB})
    EXPECT_EQ(choose_all_reduce(2, bytes, kStaging, true), AllReducePath::kOneShot) << bytes;
  EXPECT_EQ(choose_all_reduce(2, 8 * kMiB + 2, kStaging, true), AllReducePath::kNccl);
}

TEST(AllReduceChoice, FourRanksFollowTheMeasuredCrossovers) {
  EXPECT_EQ(choose_all_reduce(4, 8 * kKiB, kStaging, true), AllReducePath::kOneShot);
  EXPECT_EQ(choose_all_reduce(4, 512 * kKiB, kStaging, true), AllReducePath::kOneShot);
  EXPECT_EQ(choose_all_reduce(4, 1 * kMiB, kStaging, true), AllReducePath::kTwoShot);
  EXPECT_EQ(choose_all_reduce(4, 2 * kMiB, kStaging, true), AllReducePath::kTwoShot);
  EXPECT_EQ(choose_all_reduce(4, 4 * kMiB, kStaging, true), AllReducePath::kTwoShot);
  EXPECT_EQ(choose_all_reduce(4, 8 * kMiB, kStaging, true), AllReducePath::kNccl);
}

TEST(AllReduceChoice, TwoRanksLaunch512ThreadsABlockAndMoreRanks256) {
  EXPECT_EQ(peer_launch_shape(2).threads, 512);
  EXPECT_EQ(peer_launch_shape(4).threads, 256);
  EXPECT_EQ(peer_launch_shape(8).threads, 256);
  EXPECT_EQ(peer_launch_shape(4).max_blocks, kernels::kPeerAllReduceMaxBlocks);
}

TEST(AllReduceChoice, TwoRanksPushUpTo512KiBFourUpTo64KiBAndEightNever) {
  constexpr size_t kInbox = 2 * kMiB;
  for (const size_t bytes : {2 * kKiB, 8 * kKiB, 512 * kKiB})
    EXPECT_TRUE(takes_push(2, bytes, kInbox, true)) << bytes;
  EXPECT_FALSE(takes_push(2, 512 * kKiB + 16, kInbox, true));  // 8B decode at batch 256: 2 MiB
  EXPECT_FALSE(takes_push(2, 2 * kMiB, kInbox, true));
  EXPECT_FALSE(takes_push(2, 256 * kKiB, 128 * kKiB, true));  // beyond a small inbox
  EXPECT_FALSE(takes_push(2, 8 * kKiB, kInbox, false));       // NANOVLLM_PEER_PUSH=off, or no inbox
  EXPECT_FALSE(takes_push(2, 8 * kKiB, 0, true));
  EXPECT_TRUE(takes_push(4, 8 * kKiB, kInbox, true));  // 8B decode at batch 1
  EXPECT_TRUE(takes_push(4, 64 * kKiB, kInbox, true));
  EXPECT_FALSE(takes_push(4, 64 * kKiB + 16, kInbox, true));
  EXPECT_FALSE(takes_push(8, 8 * kKiB, kInbox, true));
  EXPECT_TRUE(push_fuses_norm(8 * kKiB));
  EXPECT_TRUE(push_fuses_norm(256 * kKiB));
  EXPECT_FALSE(push_fuses_norm(256 * kKiB + 16));
}

// The two-shot range of 4 ranks (above 512 KiB) is pushed in both phases while its parts fit an
// inbox slot; 2 ranks (one-shot there) and 8 (not measured) never, nor with the push off.
TEST(AllReduceChoice, FourRanksPushTheirTwoShotMessagesWhosePartsFitASlot) {
  constexpr size_t kSlot = 1 * kMiB;
  EXPECT_EQ(choose_all_reduce(4, 2 * kMiB, kStaging, true), AllReducePath::kTwoShot);
  EXPECT_TRUE(takes_push_two_shot(4, 2 * kMiB, kSlot, true));  // 8B decode at batch 256
  EXPECT_TRUE(takes_push_two_shot(4, 512 * kKiB + 16, kSlot, true));
  EXPECT_TRUE(takes_push_two_shot(4, 4 * kMiB, kSlot, true));        // four whole slots
  EXPECT_FALSE(takes_push_two_shot(4, 4 * kMiB + 16, kSlot, true));  // a part one vector over
  EXPECT_FALSE(takes_push_two_shot(4, 2 * kMiB, kSlot, false));      // NANOVLLM_PEER_PUSH=off
  EXPECT_FALSE(takes_push_two_shot(4, 2 * kMiB, 0, true));           // no inbox
  EXPECT_FALSE(takes_push_two_shot(2, 2 * kMiB, kSlot, true));
  EXPECT_FALSE(takes_push_two_shot(8, 2 * kMiB, kSlot, true));
}

// The copy engines sum prefill pieces on 2 and 4 ranks (8 not measured), in slots of 2,048 rows
// of the 8B shape: half of its 4,096-row prefill chunk.
TEST(AllReduceChoice, TwoAndFourRanksGetACopyEngineSlotAndItHoldsHalfAFourKChunk) {
  EXPECT_EQ(PeerMemory::copy_engine_slot_bytes(2), size_t{2048} * 4096 * 2);
  EXPECT_EQ(PeerMemory::copy_engine_slot_bytes(4), size_t{2048} * 4096 * 2);
  EXPECT_EQ(PeerMemory::copy_engine_slot_bytes(8), 0u);
}

TEST(AllReduceChoice, NcclWhereThePeerPathIsOffOrTheGroupIsOneRank) {
  EXPECT_EQ(choose_all_reduce(2, 8 * kKiB, kStaging, false), AllReducePath::kNccl);
  EXPECT_EQ(choose_all_reduce(4, 8 * kKiB, 0, true), AllReducePath::kNccl);  // no staging
  EXPECT_EQ(choose_all_reduce(1, 8 * kKiB, kStaging, true), AllReducePath::kNccl);
}

}  // namespace
}  // namespace nanovllm
