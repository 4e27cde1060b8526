#include "engine/sequence.h"

#include <gtest/gtest.h>

namespace nanovllm {
namespace {

TEST(Sequence, BlocksSplitTokensByBlockSizeWithPartialLastBlock) {
  Sequence seq(7, {1, 2, 3, 4, 5}, SamplingParams{}, 2);
  EXPECT_EQ(seq.num_blocks(), 3);
  EXPECT_EQ(seq.last_block_num_tokens(), 1);
  EXPECT_EQ(std::vector<int32_t>(seq.block(1).begin(), seq.block(1).end()),
            (std::vector<int32_t>{3, 4}));
  seq.append_token(9);
  EXPECT_EQ(seq.num_blocks(), 3);
  EXPECT_EQ(seq.last_block_num_tokens(), 2);
  EXPECT_EQ(seq.num_completion_tokens(), 1);
  EXPECT_EQ(seq.last_token, 9);
}

}  // namespace
}  // namespace nanovllm
