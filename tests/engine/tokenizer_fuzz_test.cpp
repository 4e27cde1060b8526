// Random-byte fuzzing: encode either rejects the bytes with a TokenizerError (exactly when they
// are not valid UTF-8) or returns ids that decode back to the NFC text; no crash, no hang.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "engine/incremental_detokenizer.h"
#include "engine/tokenizer_normalizer.h"
#include "engine/tokenizer_utf8.h"
#include "tests/engine/tokenizer_test_support.h"

namespace nanovllm {
namespace {

TEST(TokenizerFuzz, RandomBytesAreRejectedOrRoundTrip) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  std::mt19937 gen(99);
  const auto start = std::chrono::steady_clock::now();
  int rejected = 0, accepted = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string s(gen() % 64, '\0');
    // Bias towards bytes that form (or almost form) multi-byte sequences.
    for (auto& c : s) c = static_cast<char>(gen() % 3 ? gen() % 256 : 0x80 + gen() % 0x40);
    if (trial % 2) {  // make about half valid by repairing them
      std::string repaired;
      append_utf8_lossy(s, repaired);
      s = repaired;
    }
    const bool valid = !find_invalid_utf8(s).has_value();
    try {
      const auto ids = tok.encode(s);
      ASSERT_TRUE(valid);
      ASSERT_EQ(tok.decode(ids, false), nfc_normalize(s));
      ++accepted;
    } catch (const TokenizerError&) {
      ASSERT_FALSE(valid);
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(accepted, 1000);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST(TokenizerFuzz, IncrementalDecoderSurvivesArbitraryIds) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  std::mt19937 gen(5);
  IncrementalDetokenizer detok(tok, true);
  std::string all;
  std::vector<int32_t> ids;
  for (int i = 0; i < 50000; ++i) {
    // Includes negative and out-of-range ids, which decode skips.
    const int32_t id = static_cast<int32_t>(gen() % (tok.vocab_size() + 200)) - 100;
    ids.push_back(id);
    const std::string piece = detok.push(id);
    ASSERT_FALSE(find_invalid_utf8(piece).has_value());
    all += piece;
  }
  all += detok.flush();
  EXPECT_EQ(all, tok.decode(ids, true));
}

}  // namespace
}  // namespace nanovllm
