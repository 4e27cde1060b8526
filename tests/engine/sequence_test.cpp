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

TEST(Sequence, PromptAndCompletionSpansSplitAtPromptLength) {
  Sequence seq(1, {4, 5, 6}, SamplingParams{}, 4);
  seq.append_token(7);
  seq.append_token(8);
  EXPECT_EQ(std::vector<int32_t>(seq.prompt_token_ids().begin(), seq.prompt_token_ids().end()),
            (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(
      std::vector<int32_t>(seq.completion_token_ids().begin(), seq.completion_token_ids().end()),
      (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(seq.num_cached_blocks(), 0);
  seq.num_cached_tokens = 4;
  EXPECT_EQ(seq.num_cached_blocks(), 1);
}

TEST(Sequence, StartsWaitingUnfinishedWithoutFinishReason) {
  Sequence seq(3, {1}, SamplingParams{}, 4);
  EXPECT_EQ(seq.status, SequenceStatus::kWaiting);
  EXPECT_EQ(seq.finish_reason, FinishReason::kNone);
  EXPECT_EQ(seq.first_prefill_cached_tokens, -1);
  EXPECT_FALSE(seq.is_finished());
}

TEST(Sequence, FinishReasonNamesMatchTheResultFormat) {
  EXPECT_STREQ(to_string(FinishReason::kStop), "stop");
  EXPECT_STREQ(to_string(FinishReason::kLength), "length");
  EXPECT_STREQ(to_string(FinishReason::kNone), "");
}

}  // namespace
}  // namespace nanovllm
