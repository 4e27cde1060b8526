// prompts.jsonl reading of the request-only sampling fields (stop, min_tokens, n,
// detokenization, penalties, logit_bias, logprobs) on native lines: values reach the resolved
// parameters, defaults are vLLM's, every bad value is an error naming its line and field.
#include <gtest/gtest.h>

#include <string>

#include "tests/engine/request_test_support.h"

namespace nanovllm {
namespace {

using testing::byte_validator;
using testing::expect_error;
using testing::expect_line_error;
using testing::read;
using testing::read_one;

TEST(RequestReader, RequestOnlySamplingFieldsReachTheResolvedParams) {
  const Request r = read_one(
      R"({"prompt": "x", "max_tokens": 20, "stop": ["\n", "END"], "stop_token_ids": [0, 7, 255], "include_stop_str_in_output": true, "min_tokens": 20, "skip_special_tokens": false, "spaces_between_special_tokens": false, "n": 64})");
  ASSERT_TRUE(r.ok()) << r.error->message << " at " << r.error->field;
  const SamplingParams& p = r.sampling_params;
  EXPECT_EQ(p.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{0, 7, 255}));
  EXPECT_TRUE(p.include_stop_str_in_output);
  EXPECT_EQ(p.min_tokens, 20);
  EXPECT_FALSE(p.skip_special_tokens);
  EXPECT_FALSE(p.spaces_between_special_tokens);
  EXPECT_EQ(p.n, 64);
  EXPECT_EQ(p.max_tokens, 20);
}

TEST(RequestReader, RequestOnlySamplingFieldsDefaultLikeVllmWhenAbsentOrNull) {
  for (
      const std::string line :
      {R"({"prompt": "x"})",
       R"({"prompt": "x", "stop": null, "stop_token_ids": null, "include_stop_str_in_output": null, "min_tokens": null, "skip_special_tokens": null, "spaces_between_special_tokens": null, "n": null})",
       R"({"prompt": "x", "stop": [], "stop_token_ids": []})"}) {
    SCOPED_TRACE(line);
    const Request r = read_one(line);
    ASSERT_TRUE(r.ok()) << r.error->message;
    testing::expect_vllm_request_only_defaults(r.sampling_params);
  }
}

TEST(RequestReader, StopAsASingleStringBecomesAOneElementList) {
  const Request r = read_one(R"({"prompt": "x", "stop": "###"})");
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.sampling_params.stop, (std::vector<std::string>{"###"}));
}

TEST(RequestReader, StopStringsMustBeNonEmptyStringsAndAtMost32) {
  expect_error(R"({"prompt": "x", "stop": ""})", "stop", "is empty");
  expect_error(R"({"prompt": "x", "stop": ["a", ""]})", "stop[1]", "is empty");
  expect_error(R"({"prompt": "x", "stop": ["a", "b", 3]})", "stop[2]", "must be a string");
  expect_error(R"({"prompt": "x", "stop": 3})", "stop", "a string or an array of strings");
  auto stops = [](int count) {
    nlohmann::json line = {{"prompt", "x"}, {"stop", nlohmann::json::array()}};
    for (int i = 0; i < count; ++i)
      line["stop"].push_back(std::string("s").append(std::to_string(i)));
    return line.dump();
  };
  expect_error(stops(33), "stop", "at most 32");
  const Request ok = read_one(stops(32));
  ASSERT_TRUE(ok.ok()) << ok.error->message;
  EXPECT_EQ(ok.sampling_params.stop.size(), 32u);
}

TEST(RequestReader, StopTokenIdsMustBeInTheVocabularyAndAtMost32) {
  expect_error(R"({"prompt": "x", "stop_token_ids": [1, 256]})", "stop_token_ids[1]",
               "outside the vocabulary [0, 256)");
  expect_error(R"({"prompt": "x", "stop_token_ids": [-1]})", "stop_token_ids[0]",
               "outside the vocabulary");
  expect_error(R"({"prompt": "x", "stop_token_ids": [1, 2, 2.5]})", "stop_token_ids[2]",
               "integer token id");
  expect_error(R"({"prompt": "x", "stop_token_ids": 5})", "stop_token_ids", "array");
  nlohmann::json line = {{"prompt", "x"}, {"stop_token_ids", nlohmann::json::array()}};
  for (int i = 0; i < 32; ++i) line["stop_token_ids"].push_back(i);
  EXPECT_TRUE(read_one(line.dump()).ok());
  line["stop_token_ids"].push_back(32);
  expect_error(line.dump(), "stop_token_ids", "at most 32");
}

TEST(RequestReader, PenaltiesLogitBiasAndLogprobsReachTheResolvedParams) {
  const Request r = read_one(
      R"({"prompt": "x", "presence_penalty": 0.5, "frequency_penalty": -0.25, "repetition_penalty": 1.2, "logit_bias": {"255": -100, "32": 3}, "logprobs": 5, "prompt_logprobs": 2})");
  ASSERT_TRUE(r.ok()) << r.error->message << " at " << r.error->field;
  const SamplingParams& p = r.sampling_params;
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -0.25f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.2f);
  EXPECT_EQ(p.logit_bias, (std::vector<std::pair<int32_t, float>>{{32, 3.0f}, {255, -100.0f}}));
  EXPECT_EQ(p.logprobs, 5);
  EXPECT_EQ(p.prompt_logprobs, 2);
  EXPECT_TRUE(p.penalized());
}

TEST(RequestReader, WithoutTheNewFieldsNothingIsPenalizedBiasedOrLogged) {
  const Request r = read_one(R"({"prompt": "x", "repetition_penalty": null, "logprobs": null})");
  ASSERT_TRUE(r.ok()) << r.error->message;
  const SamplingParams& p = r.sampling_params;
  EXPECT_FALSE(p.penalized());
  EXPECT_TRUE(p.logit_bias.empty());
  EXPECT_FALSE(p.logprobs.has_value());
  EXPECT_FALSE(p.prompt_logprobs.has_value());
}

TEST(RequestReader, LogprobsAbove20IsAnErrorNamingLineFieldAndRange) {
  expect_error(R"({"prompt": "x", "logprobs": 25})", "logprobs", "must be in [0, 20], got 25");
  expect_error(R"({"prompt": "x", "prompt_logprobs": 21})", "prompt_logprobs",
               "must be in [0, 20], got 21");
}

TEST(RequestReader, PenaltiesOutsideTheirRangesAreErrors) {
  expect_error(R"({"prompt": "x", "presence_penalty": -2.01})", "presence_penalty",
               "must be in [-2, 2]");
  expect_error(R"({"prompt": "x", "frequency_penalty": 9})", "frequency_penalty",
               "must be in [-2, 2], got 9");
  expect_error(R"({"prompt": "x", "repetition_penalty": 0})", "repetition_penalty",
               "must be a finite number > 0 (1 = off), got 0");
  expect_error(R"({"prompt": "x", "repetition_penalty": -1.5})", "repetition_penalty", "got -1.5");
  expect_error(R"({"prompt": "x", "repetition_penalty": true})", "repetition_penalty",
               "must be a number");
}

TEST(RequestReader, LogitBiasIdOutsideTheVocabularyIsFoundAtValidation) {
  // Parsing alone cannot know the vocabulary: only a non-negative int32 is required there.
  EXPECT_TRUE(parse_request_line(R"({"prompt": "x", "logit_bias": {"300": 1}})", 1).ok());
  expect_error(R"({"prompt": "x", "logit_bias": {"7": 1, "300": 1}})", "logit_bias.300",
               "token id 300 is outside the vocabulary [0, 256)");
  expect_error(R"({"prompt": "x", "logit_bias": {"x7": 1}})", "logit_bias.x7", "decimal integer");
}

TEST(RequestReader, NumberTooLargeForADoubleFailsItsLineOnly) {
  const auto rs = read("{\"prompt\": \"x\", \"presence_penalty\": 1e999}\n{\"prompt\": \"y\"}\n");
  ASSERT_EQ(rs.size(), 2u);
  ASSERT_FALSE(rs[0].ok());
  EXPECT_EQ(rs[0].error->line, 1);
  EXPECT_NE(rs[0].error->message.find("number overflow"), std::string::npos)
      << rs[0].error->message;
  EXPECT_TRUE(rs[1].ok());
}

TEST(RequestReader, BadLogprobsLineFailsAloneBesideGoodOnes) {
  const auto rs = read(
      "{\"prompt\": \"a\", \"logprobs\": 2}\n{\"prompt\": \"b\", \"logprobs\": 25}\n"
      "{\"prompt\": \"c\", \"logit_bias\": {\"1\": 5}}\n");
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_TRUE(rs[0].ok());
  expect_line_error(rs[1], 2, "logprobs");
  EXPECT_TRUE(rs[2].ok());
}

TEST(RequestReader, MinTokensMustBeNonNegativeAndAtMostMaxTokens) {
  expect_error(R"({"prompt": "x", "min_tokens": -1})", "min_tokens", ">= 0");
  expect_error(R"({"prompt": "x", "min_tokens": 1.5})", "min_tokens", "integer");
  expect_error(R"({"prompt": "x", "max_tokens": 5, "min_tokens": 6})", "min_tokens",
               "min_tokens must be less than or equal to max_tokens=5, got 6");
  // Without max_tokens the bound is the resolved default: the 63 tokens left of 64.
  expect_error(R"({"prompt": "x", "min_tokens": 64})", "min_tokens",
               "less than or equal to max_tokens=63");
  EXPECT_TRUE(read_one(R"({"prompt": "x", "max_tokens": 5, "min_tokens": 5})").ok());
  EXPECT_EQ(read_one(R"({"prompt": "x", "min_tokens": 63})").sampling_params.min_tokens, 63);
}

TEST(RequestReader, NMustBeAnIntegerFromOneTo64) {
  expect_error(R"({"prompt": "x", "n": 0})", "n", "in [1, 64], got 0");
  expect_error(R"({"prompt": "x", "n": 65})", "n", "in [1, 64], got 65");
  expect_error(R"({"prompt": "x", "n": 2.0})", "n", "integer");
  EXPECT_EQ(read_one(R"({"prompt": "x", "n": 3})").sampling_params.n, 3);
}

TEST(RequestReader, DetokenizationAndStopFlagsMustBeBooleans) {
  expect_error(R"({"prompt": "x", "include_stop_str_in_output": 1})", "include_stop_str_in_output",
               "true or false");
  expect_error(R"({"prompt": "x", "skip_special_tokens": "no"})", "skip_special_tokens",
               "true or false");
  expect_error(R"({"prompt": "x", "spaces_between_special_tokens": 0})",
               "spaces_between_special_tokens", "true or false");
}

TEST(RequestReader, UnsupportedVllmFieldsAreRefusedByNameWithTheirReason) {
  expect_error(R"({"prompt": "x", "guided_json": {"type": "object"}})", "guided_json",
               "structured output (guided decoding) is not supported");
  expect_error(R"({"prompt": "x", "structured_outputs": {"regex": "a+"}})", "structured_outputs",
               "structured output (guided decoding) is not supported");
  expect_error(R"({"prompt": "x", "response_format": {"type": "json_object"}})", "response_format",
               "structured output (response_format type \"json_object\")");
  expect_error(R"({"prompt": "x", "bad_words": ["foo"]})", "bad_words",
               "bad_words is not supported");
  expect_error(R"({"prompt": "x", "allowed_token_ids": [1, 2]})", "allowed_token_ids",
               "allowed_token_ids is not supported");
  expect_error(R"({"prompt": "x", "best_of": 2})", "best_of",
               "best_of is not supported; use n for several completions");
}

TEST(RequestReader, RefusedFieldsThatAskForNothingAreAccepted) {
  const Request r = read_one(
      R"({"prompt": "x", "response_format": {"type": "text"}, "best_of": 1, "bad_words": [], "guided_json": null, "allowed_token_ids": null})");
  EXPECT_TRUE(r.ok()) << r.error->message << " at " << r.error->field;
}

TEST(RequestReader, RefusedFieldNamesAreNotSuggestedForTypos) {
  // "n" and "stop" are known; a refused name never appears in the known-field list.
  const Request r = read_one(R"({"prompt": "x", "colour": 5})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error->message.find(" stop_token_ids"), std::string::npos) << r.error->message;
  EXPECT_EQ(r.error->message.find("guided_json"), std::string::npos) << r.error->message;
  expect_error(R"({"prompt": "x", "min_token": 1})", "min_token", "did you mean 'min_tokens'");
}

TEST(RequestReader, RequestOnlyFieldErrorsNameTheirOwnLine) {
  const auto rs = read(
      "{\"prompt\": \"a\", \"stop\": \"x\"}\n\n{\"prompt\": \"b\", \"stop\": [\"ok\", \"\"]}\n"
      "{\"prompt\": \"c\", \"stop_token_ids\": [300]}\n");
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_TRUE(rs[0].ok());
  expect_line_error(rs[1], 3, "stop[1]");
  expect_line_error(rs[2], 4, "stop_token_ids[0]");
}

}  // namespace
}  // namespace nanovllm
