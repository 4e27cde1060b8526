// Field helpers: typo suggestions, UTF-8 checks and locating a byte in JSON text.
#include "engine/request_fields.h"

#include <gtest/gtest.h>

namespace nanovllm {
namespace {

TEST(RequestFields, EditDistanceIsLevenshtein) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);  // the textbook example
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("top_p", "top_p"), 0u);
  EXPECT_EQ(edit_distance("top_k", "top_p"), 1u);
}

TEST(RequestFields, ClosestFieldSuggestsOnlyPlausibleTypos) {
  static constexpr std::string_view kKnown[] = {"temperature", "top_p", "max_tokens"};
  EXPECT_EQ(closest_field("temprature", kKnown), "temperature");
  EXPECT_EQ(closest_field("maxtokens", kKnown), "max_tokens");
  EXPECT_FALSE(closest_field("frequency_penalty", kKnown).has_value());
}

TEST(RequestFields, InvalidUtf8OffsetFindsTheFirstBadByte) {
  EXPECT_FALSE(invalid_utf8_offset("plain ascii").has_value());
  EXPECT_FALSE(invalid_utf8_offset("\xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80").has_value());
  EXPECT_EQ(invalid_utf8_offset("ab\x80"), 2u);             // lone continuation byte
  EXPECT_EQ(invalid_utf8_offset("a\xe4\xbd"), 1u);          // cut multi-byte sequence
  EXPECT_EQ(invalid_utf8_offset("\xc0\xaf"), 0u);           // overlong '/'
  EXPECT_EQ(invalid_utf8_offset("x\xf4\x90\x80\x80"), 1u);  // above U+10FFFF
}

TEST(RequestFields, JsonPathAtNamesTheEnclosingValue) {
  const std::string text = R"({"a": "x", "b": [1, {"c": "yz"}], "d": {"e": ["p", "q"]}})";
  EXPECT_EQ(json_path_at(text, text.find("x")), "a");
  EXPECT_EQ(json_path_at(text, text.find("yz") + 1), "b[1].c");
  EXPECT_EQ(json_path_at(text, text.find("q")), "d.e[1]");
  EXPECT_EQ(json_path_at(R"({"k\"ey": "v"})", 11), "k\\\"ey");  // escaped quote in a key
}

TEST(RequestFields, TokenIdsMustBeNonNegativeInt32) {
  std::vector<int32_t> ids;
  EXPECT_FALSE(read_token_ids(nlohmann::json{1, 2}, "p", ids).has_value());
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(read_token_ids(nlohmann::json{1, 4294967296LL}, "p", ids)->field, "p[1]");
  EXPECT_EQ(read_token_ids(nlohmann::json{"1"}, "p", ids)->field, "p[0]");
}

TEST(RequestFields, AlsoAcceptedNamesPassButAreNeverSuggested) {
  static constexpr std::string_view kKnown[] = {"prompt", "top_p"};
  static constexpr std::string_view kAlso[] = {"best_of"};
  EXPECT_FALSE(
      check_known_fields(nlohmann::json{{"best_of", 2}}, kKnown, "body", kAlso).has_value());
  const auto p = check_known_fields(nlohmann::json{{"best_off", 2}}, kKnown, "body", kAlso);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->field, "body.best_off");
  EXPECT_EQ(p->message.find("did you mean"), std::string::npos) << p->message;
  EXPECT_EQ(p->message.find(" best_of"), std::string::npos) << p->message;  // not listed
}

}  // namespace
}  // namespace nanovllm
