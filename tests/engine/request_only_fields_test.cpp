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

std::optional<FieldProblem> read(const std::string& json, RequestOnlySampling& out,
                                 LogprobsSpelling spelling = LogprobsSpelling::kCount) {
  return read_request_only_fields(nlohmann::json::parse(json), "body", out, spelling);
}

void expect_problem(const std::string& json, const std::string& field, const std::string& words,
                    LogprobsSpelling spelling = LogprobsSpelling::kCount) {
  SCOPED_TRACE(json);
  RequestOnlySampling out;
  const auto p = read(json, out, spelling);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->field, field);
  EXPECT_NE(p->message.find(words), std::string::npos) << p->message;
}

TEST(RequestOnlyFields, PenaltiesLogitBiasAndLogprobsAreRead) {
  RequestOnlySampling out;
  ASSERT_FALSE(read(R"({"presence_penalty": -2, "frequency_penalty": 1.5, "logprobs": 20,
                        "prompt_logprobs": 0, "logit_bias": {"9": 100, "10": -100, "007": 0.5}})",
                    out)
                   .has_value());
  EXPECT_FLOAT_EQ(out.presence_penalty, -2.0f);
  EXPECT_FLOAT_EQ(out.frequency_penalty, 1.5f);
  EXPECT_EQ(out.logprobs, 20);
  EXPECT_EQ(out.prompt_logprobs, 0);
  // Ascending by id, though the object holds its keys in string order ("007" < "10" < "9").
  const std::vector<std::pair<int32_t, float>> bias = {{7, 0.5f}, {9, 100.0f}, {10, -100.0f}};
  EXPECT_EQ(out.logit_bias, bias);
}

TEST(RequestOnlyFields, AbsentOrNullLogprobsStayUnsetAndPenaltiesOff) {
  RequestOnlySampling out;
  ASSERT_FALSE(
      read(
          R"({"logprobs": null, "prompt_logprobs": null, "logit_bias": null, "presence_penalty": null})",
          out)
          .has_value());
  EXPECT_FALSE(out.logprobs.has_value());
  EXPECT_FALSE(out.prompt_logprobs.has_value());
  EXPECT_TRUE(out.logit_bias.empty());
  EXPECT_EQ(out.presence_penalty, 0.0f);
  EXPECT_EQ(out.frequency_penalty, 0.0f);
}

TEST(RequestOnlyFields, OutOfRangeValuesNameTheFieldAndTheAllowedRange) {
  expect_problem(R"({"logprobs": 25})", "body.logprobs", "must be in [0, 20], got 25");
  expect_problem(R"({"prompt_logprobs": -1})", "body.prompt_logprobs",
                 "must be in [0, 20], got -1");
  expect_problem(R"({"logprobs": 2.0})", "body.logprobs", "must be an integer in [0, 20]");
  expect_problem(R"({"logprobs": true})", "body.logprobs", "must be an integer in [0, 20]");
  expect_problem(R"({"presence_penalty": 2.5})", "body.presence_penalty",
                 "must be in [-2, 2], got 2.5");
  expect_problem(R"({"frequency_penalty": -3})", "body.frequency_penalty",
                 "must be in [-2, 2], got -3");
  expect_problem(R"({"frequency_penalty": "1"})", "body.frequency_penalty", "must be a number");
  expect_problem(R"({"logit_bias": {"5": 100.5}})", "body.logit_bias.5",
                 "must be in [-100, 100], got 100.5");
  expect_problem(R"({"logit_bias": {"5": null}})", "body.logit_bias.5", "must be a number");
}

TEST(RequestOnlyFields, LogitBiasKeysMustBeDecimalTokenIdsEachGivenOnce) {
  expect_problem(R"({"logit_bias": [[5, 1]]})", "body.logit_bias", "must be an object");
  expect_problem(R"({"logit_bias": {"abc": 1}})", "body.logit_bias.abc",
                 "must be a token id (a decimal integer)");
  expect_problem(R"({"logit_bias": {"5.0": 1}})", "body.logit_bias.5.0", "decimal integer");
  expect_problem(R"({"logit_bias": {"": 1}})", "body.logit_bias.", "decimal integer");
  expect_problem(R"({"logit_bias": {"-1": 1}})", "body.logit_bias.-1", "outside the vocabulary");
  expect_problem(R"({"logit_bias": {"4294967296": 1}})", "body.logit_bias.4294967296",
                 "outside the vocabulary");
  expect_problem(R"({"logit_bias": {"5": 1, "05": 2}})", "body.logit_bias.5",
                 "token id 5 is given twice");
}

TEST(RequestOnlyFields, LogitBiasHoldsAtMost1024Entries) {
  nlohmann::json bias = nlohmann::json::object();
  for (int i = 0; i < kMaxLogitBias; ++i) bias[std::to_string(i)] = 1;
  RequestOnlySampling out;
  ASSERT_FALSE(read(nlohmann::json{{"logit_bias", bias}}.dump(), out).has_value());
  EXPECT_EQ(out.logit_bias.size(), 1024u);
  bias["1024"] = 1;
  expect_problem(nlohmann::json{{"logit_bias", bias}}.dump(), "body.logit_bias",
                 "has 1025 entries; at most 1024 are allowed");
}

TEST(RequestOnlyFields, ChatSpellingIsABooleanWithTheCountInTopLogprobs) {
  const auto chat = LogprobsSpelling::kChat;
  RequestOnlySampling out;
  ASSERT_FALSE(read(R"({"logprobs": true, "top_logprobs": 3})", out, chat).has_value());
  EXPECT_EQ(out.logprobs, 3);
  RequestOnlySampling alone;
  ASSERT_FALSE(read(R"({"logprobs": true})", alone, chat).has_value());
  EXPECT_EQ(alone.logprobs, 0);
  RequestOnlySampling off;
  ASSERT_FALSE(read(R"({"logprobs": false, "top_logprobs": null})", off, chat).has_value());
  EXPECT_FALSE(off.logprobs.has_value());
  expect_problem(R"({"logprobs": 5})", "body.logprobs", "must be true or false", chat);
  expect_problem(R"({"top_logprobs": 2})", "body.top_logprobs", "needs logprobs set to true", chat);
  expect_problem(R"({"logprobs": false, "top_logprobs": 0})", "body.top_logprobs",
                 "needs logprobs set to true", chat);
  expect_problem(R"({"logprobs": true, "top_logprobs": 21})", "body.top_logprobs",
                 "must be in [0, 20], got 21", chat);
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
