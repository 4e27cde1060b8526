// Pins where Debian 12's Unicode tables disagree with Hugging Face tokenizers 0.23.2:
// PCRE2 10.42 knows Unicode 14.0 (so \p{L}/\p{N} miss letters/digits added later) and
// utf8proc 2.8 knows Unicode 15.0 (NFC lacks later combining classes), while the reference
// uses newer tables. tests/fixtures/tokenizer/unicode_disagreements.json lists the ranges
// (77 ranges, about 9,500 code points, all assigned in Unicode 14-16); each pin below is
// one probe string per range with the reference's ids. If a pin starts to match, Debian's
// tables caught up: drop that range from the fixture.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <gtest/gtest.h>
#include <pcre2.h>
#include <utf8proc.h>

#include "tests/engine/tokenizer_test_support.h"

namespace nanovllm {
namespace {

TEST(TokenizerUnicodeTables, DebianLibrariesHaveTheTablesThePinsAssume) {
  char version[32];
  pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, version);
  EXPECT_STREQ(version, "14.0.0");
  EXPECT_STREQ(utf8proc_unicode_version(), "15.0.0");
}

TEST(TokenizerUnicodeTables, PinnedCodePointsStillDifferFromTheReference) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  const auto j = testing::read_json(testing::fixture_path("unicode_disagreements.json"));
  ASSERT_EQ(j["pins"].size(), j["ranges"].size());
  for (const auto& pin : j["pins"]) {
    const auto text = pin["text"].get<std::string>();
    const auto ids = tok.encode(text);
    EXPECT_NE(ids, pin["ids"].get<std::vector<int32_t>>()) << "now agrees: " << pin["text"].dump();
    // Whatever the split, the text itself survives.
    EXPECT_EQ(tok.decode(ids, false).size(),
              tok.decode(pin["ids"].get<std::vector<int32_t>>(), false).size());
  }
}

}  // namespace
}  // namespace nanovllm
