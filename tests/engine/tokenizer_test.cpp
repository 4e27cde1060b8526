// Unit tests of the tokenizer's parts against independent references: the Unicode standard's
// examples for UTF-8 repair, GPT-2's published byte alphabet, a naive BPE written here, and
// error messages for bad input.
#include "engine/tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "engine/tokenizer_byte_level.h"
#include "engine/tokenizer_normalizer.h"
#include "engine/tokenizer_utf8.h"
#include "tests/engine/tokenizer_test_support.h"

namespace nanovllm {
namespace {

using nlohmann::json;

std::string lossy(std::string_view bytes) {
  std::string out;
  append_utf8_lossy(bytes, out);
  return out;
}

TEST(Utf8, LossyRepairReplacesEachMaximalSubpartOnce) {
  // Unicode Standard ch. 3, "U+FFFD Substitution of Maximal Subparts" example.
  EXPECT_EQ(lossy("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a\uFFFD\uFFFD\uFFFDb\uFFFDc\uFFFD\uFFFDd");
  EXPECT_EQ(lossy("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");  // a surrogate is 3 subparts
  EXPECT_EQ(lossy("\xC0\xAF"), "\uFFFD\uFFFD");            // overlong
  EXPECT_EQ(lossy("\xF0\x9F\x98"), "\uFFFD");              // cut-off emoji
  EXPECT_EQ(lossy("h\xC3\xA9!"), "h\u00E9!");
}

TEST(Utf8, FindInvalidReportsFirstBadByteOffset) {
  EXPECT_EQ(find_invalid_utf8("plain ascii"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("\u4F60\u597D\U0001F600"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("ab\xFF"), 2u);
  EXPECT_EQ(find_invalid_utf8("\xE4\xBD"), 0u);  // truncated sequence at the end
}

TEST(Utf8, SettledPrefixHoldsBackOnlyAnOpenSequence) {
  EXPECT_EQ(utf8_settled_prefix("abc"), 3u);
  EXPECT_EQ(utf8_settled_prefix("ab\xE4\xBD"), 2u);
  EXPECT_EQ(utf8_settled_prefix("ab\xE4\xBD\xA0"), 5u);
  EXPECT_EQ(utf8_settled_prefix("ab\xFF"), 3u);    // never valid: settle it now
  EXPECT_EQ(utf8_settled_prefix("\xE4\x41"), 2u);  // broken by 'A': settled
}

TEST(ByteLevel, AlphabetMatchesGpt2Table) {
  const auto& a = byte_level_alphabet();
  EXPECT_EQ(a[' '], U'\u0120');   // 'Ġ'
  EXPECT_EQ(a['\n'], U'\u010A');  // 'Ċ'
  EXPECT_EQ(a['A'], U'A');
  EXPECT_EQ(a[0x00], U'\u0100');
  EXPECT_EQ(a[0xAD], U'\u0143');  // soft hyphen: the last byte outside the printable set
  for (int b = 0; b < 256; ++b) EXPECT_EQ(byte_level_byte(a[b]), b);
  EXPECT_EQ(byte_level_decode_token("\u0120hello\u010A"), " hello\n");
  EXPECT_EQ(byte_level_decode_token("two words"), "two words");  // ' ' is not in the alphabet
}

// A byte-level BPE tokenizer.json over a tiny alphabet, with every byte token present.
json tiny_tokenizer(const std::vector<std::pair<std::string, std::string>>& merges) {
  json vocab = json::object();
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    append_utf8(byte_level_alphabet()[b], s);
    vocab[s] = next++;
  }
  json merge_list = json::array();
  for (const auto& [l, r] : merges) {
    if (!vocab.contains(l + r)) vocab[l + r] = next++;
    merge_list.push_back(json::array({l, r}));
  }
  return json{
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array(
             {{{"type", "Split"},
               {"pattern", {{"Regex", "\\s+|\\S+"}}},
               {"behavior", "Isolated"},
               {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens", json::array({{{"id", 999}, {"content", "<s>"}, {"special", true}}})}};
}

// The textbook BPE loop: merge the lowest-ranked adjacent pair (leftmost on ties) until none.
std::vector<std::string> naive_bpe(const std::string& word,
                                   const std::vector<std::pair<std::string, std::string>>& merges) {
  std::vector<std::string> sym;
  for (char c : word) sym.emplace_back(1, c);
  while (true) {
    size_t best_rank = merges.size(), best = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      for (size_t r = 0; r < best_rank; ++r) {
        if (merges[r].first == sym[i] && merges[r].second == sym[i + 1]) {
          best_rank = r, best = i;
          break;
        }
      }
    }
    if (best_rank == merges.size()) return sym;
    sym[best] += sym[best + 1];
    sym.erase(sym.begin() + best + 1);
  }
}

TEST(BpeModel, MergesInRankOrderLikeTheTextbookLoop) {
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"a", "b"},   {"b", "c"}, {"ab", "c"},  {"c", "c"},  {"a", "a"},
      {"aa", "aa"}, {"b", "a"}, {"cc", "ab"}, {"ba", "b"}, {"aa", "b"}};
  const json j = tiny_tokenizer(merges);
  const Tokenizer tok = Tokenizer::from_json(j, "tiny");
  std::mt19937 gen(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::string word;
    const int len = 1 + gen() % 24;
    for (int i = 0; i < len; ++i) word += "abc"[gen() % 3];
    std::vector<int32_t> want;
    for (const auto& s : naive_bpe(word, merges))
      want.push_back(j["model"]["vocab"][s].get<int32_t>());
    ASSERT_EQ(tok.encode(word), want) << word;
  }
}

TEST(Tokenizer, RejectsInvalidUtf8NamingTheByte) {
  const Tokenizer tok = Tokenizer::from_json(tiny_tokenizer({}), "tiny");
  try {
    tok.encode("ok\xC3\x28");
    FAIL() << "no error";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("byte 2 (0xC3)"), std::string::npos) << e.what();
  }
}

TEST(Tokenizer, SpecialTokenInlineIsOneIdAndSkippedOnRequest) {
  const Tokenizer tok = Tokenizer::from_json(tiny_tokenizer({{"a", "b"}}), "tiny");
  const auto ids = tok.encode("ab<s>ab");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], 999);
  EXPECT_EQ(ids[0], ids[2]);
  EXPECT_EQ(tok.decode(ids, false), "ab<s>ab");
  EXPECT_EQ(tok.decode(ids, true), "abab");
  EXPECT_EQ(tok.token_to_id("<s>"), 999);
  EXPECT_EQ(tok.token_to_id("no such token"), std::nullopt);
  EXPECT_EQ(tok.vocab_size(), 1000);
}

TEST(Tokenizer, LoaderErrorsNameTheField) {
  json j = tiny_tokenizer({});
  j.erase("model");
  EXPECT_THROW(
      {
        try {
          Tokenizer::from_json(j, "x.json");
        } catch (const TokenizerError& e) {
          EXPECT_NE(std::string(e.what()).find("x.json: field '.model'"), std::string::npos)
              << e.what();
          throw;
        }
      },
      TokenizerError);
  j = tiny_tokenizer({});
  j["normalizer"] = {{"type", "NFKC"}};
  EXPECT_THROW(Tokenizer::from_json(j, "x.json"), TokenizerError);
  j = tiny_tokenizer({{"a", "q"}});
  j["model"]["merges"].push_back(json::array({"zz", "yy"}));
  EXPECT_THROW(Tokenizer::from_json(j, "x.json"), TokenizerError);
  EXPECT_THROW(Tokenizer::from_file("/nonexistent/tokenizer.json"), TokenizerError);
}

TEST(Normalizer, NfcComposesAndReordersMarks) {
  EXPECT_EQ(nfc_normalize("e\u0301"), "\u00E9");
  EXPECT_EQ(nfc_normalize("\u212B"), "\u00C5");                // ANGSTROM SIGN -> Å
  EXPECT_EQ(nfc_normalize("a\u0323\u0302"), "\u1EAD");         // ậ
  EXPECT_EQ(nfc_normalize("q\u0307\u0323"), "q\u0323\u0307");  // canonical order
  EXPECT_EQ(nfc_normalize("\u1100\u1161\u11A8"), "\uAC01");    // Hangul jamo -> 각
  EXPECT_TRUE(nfc_fast_path("plain ascii \u00E9\u00FF"));
  EXPECT_FALSE(nfc_fast_path("e\u0301"));
}

TEST(Tokenizer, Qwen3TokenizerSizesAndSpecialIds) {
  NANOVLLM_REQUIRE_QWEN3_TOKENIZER();
  EXPECT_EQ(tok.vocab_size(), 151669);  // 151643 BPE entries + 26 added tokens
  EXPECT_EQ(tok.token_to_id("<|endoftext|>"), 151643);
  EXPECT_EQ(tok.token_to_id("<|im_end|>"), 151645);
  EXPECT_TRUE(tok.is_special(151645));
  EXPECT_FALSE(tok.is_special(151667));  // <think> is added but not special
}

}  // namespace
}  // namespace nanovllm
