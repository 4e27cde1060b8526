// The committed fixture (tests/fixtures/tokenizer/encode_cases.json, made by Hugging Face
// tokenizers 0.23.2 from Qwen3's tokenizer.json): exact ids and decode round trips.
#include <gtest/gtest.h>

#include "engine/tokenizer_normalizer.h"
#include "tests/engine/tokenizer_test_support.h"

namespace nanovllm {
namespace {

using testing::fixture_path;
using testing::read_json;

TEST(TokenizerFixture, EncodeMatchesHuggingFaceForEveryFixtureString) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  const auto cases = read_json(fixture_path("encode_cases.json"))["cases"];
  ASSERT_GE(cases.size(), 300u);
  size_t matched = 0;
  for (const auto& c : cases) {
    const auto text = c["text"].get<std::string>();
    const auto want = c["ids"].get<std::vector<int32_t>>();
    const auto got = tok.encode(text);
    if (got == want) {
      ++matched;
    } else {
      ADD_FAILURE() << "ids differ for " << nlohmann::json(text).dump();
    }
  }
  EXPECT_EQ(matched, cases.size());
  std::printf("encode fixture: %zu / %zu exact matches\n", matched, cases.size());
}

TEST(TokenizerFixture, DecodeOfFixtureIdsRoundTripsToNfcText) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  const auto cases = read_json(fixture_path("encode_cases.json"))["cases"];
  for (const auto& c : cases) {
    const auto text = c["text"].get<std::string>();
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const std::string decoded = tok.decode(ids, false);
    EXPECT_EQ(decoded, c["decoded"].get<std::string>()) << nlohmann::json(text).dump();
    // Byte-level BPE is lossless up to the NFC normalizer.
    EXPECT_EQ(decoded, nfc_normalize(text)) << nlohmann::json(text).dump();
  }
}

}  // namespace
}  // namespace nanovllm
