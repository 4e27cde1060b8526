// The request-only sampling fields and the vLLM fields refused by name, read with their
// prefix (native lines: none, OpenAI bodies: "body").
#include "engine/request_only_fields.h"

#include <gtest/gtest.h>

namespace nanovllm {
namespace {

TEST(RequestOnlyFields, RequestOnlyFieldsAreReadWithTheirPrefix) {
  RequestOnlySampling out;
  const auto body = nlohmann::json::parse(
      R"({"stop": "x", "stop_token_ids": [4], "include_stop_str_in_output": true, "min_tokens": 2,
          "skip_special_tokens": false, "spaces_between_special_tokens": false, "n": 3,
          "temperature": 7})");
  ASSERT_FALSE(read_request_only_fields(body, "body", out).has_value());
  EXPECT_EQ(out.stop, (std::vector<std::string>{"x"}));
  EXPECT_EQ(out.stop_token_ids, (std::vector<int32_t>{4}));
  EXPECT_TRUE(out.include_stop_str_in_output);
  EXPECT_EQ(out.min_tokens, 2);
  EXPECT_FALSE(out.skip_special_tokens);
  EXPECT_FALSE(out.spaces_between_special_tokens);
  EXPECT_EQ(out.n, 3);
  RequestOnlySampling bad;
  const auto p =
      read_request_only_fields(nlohmann::json::parse(R"({"stop": ["a", null]})"), "body", bad);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->field, "body.stop[1]");
  EXPECT_EQ(read_request_only_fields(nlohmann::json::parse(R"({"n": 4294967297})"), "", bad)->field,
            "n");
  EXPECT_EQ(read_request_only_fields(nlohmann::json::parse(R"({"stop_token_ids": [4294967296]})"),
                                     "", bad)
                ->field,
            "stop_token_ids[0]");
}

TEST(RequestOnlyFields, RefusedFieldsPassOnlyWhenTheyAskForNothing) {
  EXPECT_FALSE(
      check_refused_fields(
          nlohmann::json::parse(
              R"({"guided_json": null, "response_format": {"type": "text"}, "bad_words": [], "best_of": 1})"),
          "body")
          .has_value());
  const auto p = check_refused_fields(nlohmann::json::parse(R"({"response_format": "json"})"), "");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->field, "response_format");
  EXPECT_NE(p->message.find("{\"type\": \"text\"}"), std::string::npos) << p->message;
  EXPECT_EQ(check_refused_fields(nlohmann::json::parse(R"({"guided_regex": "a+"})"), "body")->field,
            "body.guided_regex");
}

}  // namespace
}  // namespace nanovllm
