// Stop strings searched in a completion's text as its tokens arrive (vLLM's semantics), on
// Qwen3's real tokenizer: matches across token boundaries and inside multi-byte characters,
// the earliest of overlapping stops, include_stop_str_in_output, special tokens, min_tokens.
#include "engine/stop_checker.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "engine/tokenizer_byte_level.h"
#include "engine/tokenizer_utf8.h"
#include "tests/engine/tokenizer_test_support.h"

namespace nanovllm {
namespace {

SamplingParams with_stops(std::vector<std::string> stops, bool include = false,
                          bool skip_special = true) {
  SamplingParams p;
  p.stop = std::move(stops);
  p.include_stop_str_in_output = include;
  p.skip_special_tokens = skip_special;
  return p;
}

struct Fed {
  int tokens = 0;  // tokens appended until the match (all of them when none)
  std::optional<StopMatch> match;
  std::string text;  // the text the completion returns
};

// Appends ids until a stop string matches.
Fed feed(StopChecker& checker, const std::vector<int32_t>& ids) {
  Fed fed;
  for (const int32_t id : ids) {
    ++fed.tokens;
    fed.match = checker.append(id, /*search=*/true);
    if (fed.match) {
      fed.text = checker.text_until(*fed.match);
      return fed;
    }
  }
  fed.text = checker.text();
  return fed;
}

int32_t byte_token(const Tokenizer& tok, uint8_t b) {
  std::string s;
  append_utf8(byte_level_alphabet()[b], s);
  return *tok.token_to_id(s);
}

TEST(StopChecker, FindsAStopSpanningTokenBoundaries) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  const std::vector<int32_t> ids = tok.encode("Hello world, and goodbye");
  ASSERT_GE(ids.size(), 3u);
  StopChecker checker(tok, with_stops({"lo wor"}));  // "Hello" | " world"
  const Fed fed = feed(checker, ids);
  ASSERT_TRUE(fed.match);
  EXPECT_EQ(fed.tokens, 2);  // found on " world", not before
  EXPECT_EQ(fed.text, "Hel");
  EXPECT_EQ(checker.stop_string(*fed.match), "lo wor");
}

TEST(StopChecker, MatchesAMultiByteCharacterOnlyOnceItIsComplete) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  // "a你好" streamed byte by byte: 你 = E4 BD A0, 好 = E5 A5 BD.
  const std::vector<int32_t> ids = {
      byte_token(tok, 'a'),  byte_token(tok, 0xE4), byte_token(tok, 0xBD), byte_token(tok, 0xA0),
      byte_token(tok, 0xE5), byte_token(tok, 0xA5), byte_token(tok, 0xBD)};
  StopChecker whole(tok, with_stops({"好"}));
  const Fed fed = feed(whole, ids);
  ASSERT_TRUE(fed.match);
  EXPECT_EQ(fed.tokens, 7);
  EXPECT_EQ(fed.text, "a你");
  // Held-back bytes are not text yet: 你 matches on its third byte's token.
  StopChecker first(tok, with_stops({"你"}));
  const Fed fed_first = feed(first, ids);
  ASSERT_TRUE(fed_first.match);
  EXPECT_EQ(fed_first.tokens, 4);
  EXPECT_EQ(fed_first.text, "a");
  // Spanning the boundary between two multi-byte characters.
  StopChecker across(tok, with_stops({"你好"}));
  const Fed both = feed(across, ids);
  ASSERT_TRUE(both.match);
  EXPECT_EQ(both.tokens, 7);
  EXPECT_EQ(both.text, "a");
}

TEST(StopChecker, TheEarliestOfOverlappingStopsWins) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  const std::vector<int32_t> ids = tok.encode("Hello world");
  // Both complete on " world"; "lo w" starts first although it is listed second.
  StopChecker checker(tok, with_stops({"world", "lo w"}));
  const Fed fed = feed(checker, ids);
  ASSERT_TRUE(fed.match);
  EXPECT_EQ(checker.stop_string(*fed.match), "lo w");
  EXPECT_EQ(fed.text, "Hel");
  // Equal starts: the one listed first.
  StopChecker tie(tok, with_stops({"wor", "world"}));
  const Fed tied = feed(tie, ids);
  ASSERT_TRUE(tied.match);
  EXPECT_EQ(tie.stop_string(*tied.match), "wor");
}

TEST(StopChecker, IncludeStopStrInOutputCutsAfterTheStop) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  const std::vector<int32_t> ids = tok.encode("Hello world, and goodbye");
  StopChecker checker(tok, with_stops({"lo wo"}, /*include=*/true));
  const Fed fed = feed(checker, ids);
  ASSERT_TRUE(fed.match);
  EXPECT_EQ(fed.text, "Hello wo");  // the rest of " world" is cut too
  EXPECT_EQ(checker.text(), "Hello world");
}

TEST(StopChecker, SpecialTokensAreSearchedOnlyWhenKeptInTheText) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  std::vector<int32_t> ids = tok.encode("Answer");
  const std::optional<int32_t> im_end = tok.token_to_id("<|im_end|>");
  ASSERT_TRUE(im_end && tok.is_special(*im_end));
  ids.push_back(*im_end);
  for (const int32_t id : tok.encode(" tail")) ids.push_back(id);
  StopChecker skipped(tok, with_stops({"<|im_end|>"}, false, /*skip_special=*/true));
  EXPECT_FALSE(feed(skipped, ids).match);
  EXPECT_EQ(skipped.text(), "Answer tail");
  StopChecker kept(tok, with_stops({"<|im_end|>"}, false, /*skip_special=*/false));
  const Fed fed = feed(kept, ids);
  ASSERT_TRUE(fed.match);
  EXPECT_EQ(fed.text, "Answer");
}

TEST(StopChecker, AStopInsideTheReasoningPartEndsGenerationToo) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  // <think> is an added token that is not special: it stays in the text, and so does the
  // reasoning that follows it.
  const std::vector<int32_t> ids = tok.encode("<think>\nLet me halt here.\n</think>\n\nDone.");
  StopChecker checker(tok, with_stops({"halt"}));
  const Fed fed = feed(checker, ids);
  ASSERT_TRUE(fed.match);
  EXPECT_EQ(fed.text, "<think>\nLet me ");
}

TEST(StopChecker, TextBeforeSearchingStartsIsNotSearchedLater) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  // vLLM checks stop strings only once more than min_tokens tokens exist, and each check looks
  // at the new text: a stop completed earlier is not found afterwards.
  const std::vector<int32_t> ids = tok.encode("Hello world, and goodbye");
  StopChecker checker(tok, with_stops({"Hello"}));
  EXPECT_FALSE(checker.append(ids[0], /*search=*/false));
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_FALSE(checker.append(ids[i], true)) << i;
  // One that ends in text appended while searching is found, even if it began before.
  StopChecker late(tok, with_stops({"lo wor"}));
  EXPECT_FALSE(late.append(ids[0], /*search=*/false));
  EXPECT_TRUE(late.append(ids[1], /*search=*/true));
}

TEST(StopChecker, TextMatchesTheOneShotDecode) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  const std::vector<int32_t> ids = tok.encode("Grüße, 世界! <think>x</think> done");
  for (const bool skip : {false, true}) {
    StopChecker checker(tok, with_stops({"never appears"}, false, skip));
    EXPECT_FALSE(feed(checker, ids).match);
    EXPECT_EQ(checker.text(), tok.decode(ids, skip)) << skip;
  }
}

}  // namespace
}  // namespace nanovllm
