// kernels/cuda/decode_attention_walk.h: when the split decode kernel streams a CTA's range
// through one ring. The CUDA tests run both walks against the CPU reference; these pin the rule
// that picks one, on the CPU.
#include "kernels/cuda/decode_attention_walk.h"

#include <gtest/gtest.h>

namespace nanovllm::test {
namespace {

using kernels::cuda::DecodeWalk;
using kernels::cuda::decode::streams_range;

constexpr int64_t kCtas = 528;  // 4 CTAs an SM on an H200's 132 SMs

TEST(DecodeAttentionWalk, AutoStreamsFromAsManyGroupsAsTheGridHasCtas) {
  // The 0.6B shape (8 kv heads): batch 66 is the first with 528 groups.
  EXPECT_FALSE(streams_range(DecodeWalk::kAuto, 16, 8, kCtas));
  EXPECT_FALSE(streams_range(DecodeWalk::kAuto, 64, 8, kCtas));
  EXPECT_FALSE(streams_range(DecodeWalk::kAuto, 65, 8, kCtas));
  EXPECT_TRUE(streams_range(DecodeWalk::kAuto, 66, 8, kCtas));
  EXPECT_TRUE(streams_range(DecodeWalk::kAuto, 256, 8, kCtas));
  // A --tp 4 rank's 2 kv heads need four times the batch.
  EXPECT_FALSE(streams_range(DecodeWalk::kAuto, 256, 2, kCtas));
  EXPECT_TRUE(streams_range(DecodeWalk::kAuto, 264, 2, kCtas));
  // A smaller grid (little scratch) streams sooner.
  EXPECT_TRUE(streams_range(DecodeWalk::kAuto, 4, 8, 32));
}

TEST(DecodeAttentionWalk, AChosenWalkOverridesTheRule) {
  EXPECT_TRUE(streams_range(DecodeWalk::kStream, 1, 8, kCtas));
  EXPECT_FALSE(streams_range(DecodeWalk::kPieces, 512, 8, kCtas));
}

}  // namespace
}  // namespace nanovllm::test
