// Which path an all-reduce takes (rank/peer_communicator.h): the measured crossovers, and NCCL
// wherever the peer path cannot or must not run.
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

TEST(AllReduceChoice, NcclWhereThePeerPathIsOffOrTheGroupIsOneRank) {
  EXPECT_EQ(choose_all_reduce(2, 8 * kKiB, kStaging, false), AllReducePath::kNccl);
  EXPECT_EQ(choose_all_reduce(4, 8 * kKiB, 0, true), AllReducePath::kNccl);  // no staging
  EXPECT_EQ(choose_all_reduce(1, 8 * kKiB, kStaging, true), AllReducePath::kNccl);
}

}  // namespace
}  // namespace nanovllm
