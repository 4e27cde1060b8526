// Streaming decode: every piece is valid UTF-8, a split character is held back until complete,
// and the pieces always add up to the one-shot decode.
#include "engine/incremental_detokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "engine/tokenizer_byte_level.h"
#include "engine/tokenizer_utf8.h"
#include "tests/engine/tokenizer_test_support.h"

namespace nanovllm {
namespace {

int32_t byte_token(const Tokenizer& tok, uint8_t b) {
  std::string s;
  append_utf8(byte_level_alphabet()[b], s);
  return *tok.token_to_id(s);
}

// Streams ids one at a time; checks each piece and returns their concatenation.
std::string stream(const Tokenizer& tok, std::span<const int32_t> ids, bool skip) {
  IncrementalDetokenizer detok(tok, skip);
  std::string all;
  for (const int32_t id : ids) {
    const std::string piece = detok.push(id);
    EXPECT_EQ(find_invalid_utf8(piece), std::nullopt);
    EXPECT_LE(detok.pending_bytes(), 3u);
    all += piece;
  }
  const std::string tail = detok.flush();
  EXPECT_EQ(find_invalid_utf8(tail), std::nullopt);
  EXPECT_EQ(detok.pending_bytes(), 0u);
  return all + tail;
}

TEST(IncrementalDetokenizer, HoldsBackACharacterSplitAcrossTokens) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  IncrementalDetokenizer detok(tok, false);
  EXPECT_EQ(detok.push(byte_token(tok, 0xE4)), "");  // U+4F60 = E4 BD A0
  EXPECT_EQ(detok.push(byte_token(tok, 0xBD)), "");
  EXPECT_EQ(detok.pending_bytes(), 2u);
  EXPECT_EQ(detok.push(byte_token(tok, 0xA0)), "\u4F60");
  EXPECT_EQ(detok.push(byte_token(tok, 0xFF)), "\uFFFD");  // can never become valid
  EXPECT_EQ(detok.push(byte_token(tok, 0xF0)), "");
  EXPECT_EQ(detok.flush(), "\uFFFD");  // unfinished at the end of the sequence
}

TEST(IncrementalDetokenizer, PiecesAddUpToDecodeOnFixtureIds) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  const auto cases = testing::read_json(testing::fixture_path("encode_cases.json"))["cases"];
  for (const auto& c : cases) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    for (const bool skip : {false, true}) {
      ASSERT_EQ(stream(tok, ids, skip), tok.decode(ids, skip)) << c["text"].dump();
    }
  }
}

TEST(IncrementalDetokenizer, RandomIdStreamsNeverEmitBrokenUtf8) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  std::mt19937 gen(1234);
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<int32_t> ids(1 + gen() % 20);
    for (auto& id : ids) {
      // Mostly single-byte tokens (where the split characters are), some of the rest.
      const uint32_t r = gen() % 10;
      id = r < 6 ? byte_token(tok, gen() % 256) : static_cast<int32_t>(gen() % tok.vocab_size());
    }
    const bool skip = trial % 2;
    ASSERT_EQ(stream(tok, ids, skip), tok.decode(ids, skip));
  }
}

}  // namespace
}  // namespace nanovllm
