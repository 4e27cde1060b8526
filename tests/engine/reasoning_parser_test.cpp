// The Qwen3 reasoning split, case by case against vLLM's documented rule.
#include "engine/reasoning_parser.h"

#include <gtest/gtest.h>

namespace nanovllm {
namespace {

TEST(ReasoningParser, ThinkBlockSplitsReasoningFromContent) {
  const auto s = split_reasoning("<think>\nweigh it\n</think>\n\nThe answer is 4.", true);
  EXPECT_EQ(s.reasoning_content, "\nweigh it\n");
  EXPECT_EQ(s.content, "\n\nThe answer is 4.");
}

TEST(ReasoningParser, OnlyTheClosingTagStillSplits) {
  // Templates that put <think> in the prompt leave only </think> in the output.
  const auto s = split_reasoning("weigh it</think>4", true);
  EXPECT_EQ(s.reasoning_content, "weigh it");
  EXPECT_EQ(s.content, "4");
}

TEST(ReasoningParser, NoClosingTagWithThinkingOnIsAllReasoning) {
  const auto s = split_reasoning("<think>\nstill thinking when max_tokens ran out", true);
  EXPECT_EQ(s.reasoning_content, "\nstill thinking when max_tokens ran out");
  EXPECT_FALSE(s.content.has_value());
}

TEST(ReasoningParser, NoClosingTagWithThinkingOffIsAllContent) {
  const auto s = split_reasoning("Just the answer.", false);
  EXPECT_FALSE(s.reasoning_content.has_value());
  EXPECT_EQ(s.content, "Just the answer.");
}

TEST(ReasoningParser, ClosingTagSplitsEvenWithThinkingOff) {
  const auto s = split_reasoning("a</think>b", false);
  EXPECT_EQ(s.reasoning_content, "a");
  EXPECT_EQ(s.content, "b");
}

TEST(ReasoningParser, NothingAfterTheClosingTagMeansNoContent) {
  const auto s = split_reasoning("<think>x</think>", true);
  EXPECT_EQ(s.reasoning_content, "x");
  EXPECT_FALSE(s.content.has_value());
}

TEST(ReasoningParser, OnlyTheFirstClosingTagSplits) {
  const auto s = split_reasoning("r</think>c1</think>c2", true);
  EXPECT_EQ(s.reasoning_content, "r");
  EXPECT_EQ(s.content, "c1</think>c2");
}

TEST(ReasoningParser, EmptyOutputWithThinkingOnIsEmptyReasoning) {
  const auto s = split_reasoning("", true);
  EXPECT_EQ(s.reasoning_content, "");
  EXPECT_FALSE(s.content.has_value());
}

}  // namespace
}  // namespace nanovllm
