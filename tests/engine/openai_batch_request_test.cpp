// OpenAI batch input lines (vllm run-batch shape) read from prompts.jsonl.
#include "engine/openai_batch_request.h"

#include <gtest/gtest.h>

#include "tests/engine/request_test_support.h"

namespace nanovllm {
namespace {

// The reader tests' byte tokenizer, with a longer context and a template of contents only.
RequestValidator openai_validator() {
  RequestValidator v = testing::byte_validator(128);
  v.render_chat = [](const nlohmann::json& messages, bool) {
    std::string out;
    for (const auto& m : messages) out += m["content"].get<std::string>();
    return out;
  };
  return v;
}

Request read_one(const std::string& line) {
  return testing::read_one(line, openai_validator());
}

std::string chat_line(const std::string& body_extra) {
  return R"({"custom_id": "req-1", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "Qwen/Qwen3-0.6B", "messages": [{"role": "user", "content": "hi"}])" +
         body_extra + "}}";
}

std::string completion_line(const std::string& body_extra) {
  return R"({"custom_id": "c-1", "method": "POST", "url": "/v1/completions", "body": {"prompt": "ab")" +
         body_extra + "}}";
}

void expect_error(const std::string& line, const std::string& field, const std::string& words) {
  testing::expect_error(line, field, words, openai_validator());
}

TEST(OpenAIBatchRequest, ChatLineBecomesAChatRequest) {
  const Request r = read_one(chat_line(
      R"(, "temperature": 0.5, "top_p": 0.9, "seed": 3, "max_tokens": 7, "chat_template_kwargs": {"enable_thinking": false}, "user": "me", "n": 1, "stream": false, "logprobs": false, "stop": null)"));
  ASSERT_TRUE(r.ok()) << r.error->message << " at " << r.error->field;
  EXPECT_EQ(r.id, "req-1");
  EXPECT_EQ(r.format, RequestFormat::kOpenAIChat);
  EXPECT_EQ(r.kind, PromptKind::kChat);
  EXPECT_EQ(r.model, "Qwen/Qwen3-0.6B");
  EXPECT_FALSE(r.enable_thinking);
  EXPECT_EQ(r.prompt_token_ids, (std::vector<int32_t>{'h', 'i'}));
  EXPECT_FLOAT_EQ(r.sampling_params.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling_params.top_p, 0.9f);
  EXPECT_EQ(r.sampling_params.seed, 3u);
  EXPECT_EQ(r.sampling_params.max_tokens, 7);
}

TEST(OpenAIBatchRequest, MaxCompletionTokensWinsOverMaxTokens) {
  const Request r = read_one(chat_line(R"(, "max_tokens": 7, "max_completion_tokens": 9)"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.sampling_params.max_tokens, 9);
  expect_error(chat_line(R"(, "max_completion_tokens": 1000)"), "body.max_completion_tokens",
               "exceeds max_model_len");
}

TEST(OpenAIBatchRequest, CompletionLineTakesTextOrTokenIds) {
  const Request text = read_one(
      R"({"custom_id": "c", "method": "POST", "url": "/v1/completions", "body": {"prompt": "ab"}})");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text.format, RequestFormat::kOpenAICompletion);
  EXPECT_EQ(text.kind, PromptKind::kText);
  EXPECT_EQ(text.prompt, "ab");
  const Request ids = read_one(
      R"({"custom_id": "c", "method": "POST", "url": "/v1/completions", "body": {"prompt": [3, 4]}})");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids.kind, PromptKind::kTokenIds);
  EXPECT_EQ(ids.prompt_token_ids, (std::vector<int32_t>{3, 4}));
  expect_error(
      R"({"custom_id": "c", "method": "POST", "url": "/v1/completions", "body": {"prompt": [3, 400]}})",
      "body.prompt[1]", "vocabulary");
  expect_error(
      R"({"custom_id": "c", "method": "POST", "url": "/v1/completions", "body": {"prompt": ["a", "b"]}})",
      "body.prompt", "one prompt per line");
}

TEST(OpenAIBatchRequest, EnvelopeIsChecked) {
  expect_error(R"({"custom_id": "x", "method": "GET", "url": "/v1/completions", "body": {}})",
               "method", "POST");
  expect_error(R"({"custom_id": "x", "method": "POST", "url": "/v1/embeddings", "body": {}})",
               "url", "/v1/chat/completions");
  expect_error(R"({"method": "POST", "url": "/v1/completions", "body": {"prompt": "a"}})",
               "custom_id", "missing");
  expect_error(R"({"custom_id": "x", "method": "POST", "url": "/v1/completions"})", "body",
               "missing");
  expect_error(R"({"custom_id": "x", "method": "POST", "url": "/v1/completions", "bdy": {}})",
               "bdy", "did you mean 'body'");
}

TEST(OpenAIBatchRequest, ErrorsKeepTheCustomIdAndTheEndpointShape) {
  const Request r = read_one(
      R"({"custom_id": "keep-me", "method": "POST", "url": "/v1/completions", "body": {"prompt": ""}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.id, "keep-me");
  EXPECT_EQ(r.format, RequestFormat::kOpenAICompletion);
  EXPECT_EQ(r.error->field, "body.prompt");
}

TEST(OpenAIBatchRequest, UnsupportedBodyFieldsFailTheLine) {
  expect_error(chat_line(R"(, "stream": true)"), "body.stream", "streaming");
  expect_error(chat_line(R"(, "tools": [{"type": "function"}])"), "body.tools", "not supported");
  expect_error(chat_line(R"(, "response_format": {"type": "json_object"})"), "body.response_format",
               "not supported");
  expect_error(chat_line(R"(, "chat_template_kwargs": {"foo": 1})"),
               "body.chat_template_kwargs.foo", "unknown field");
}

TEST(OpenAIBatchRequest, EchoAndSuffixStayRefused) {
  expect_error(completion_line(R"(, "echo": true)"), "body.echo", "not supported");
  expect_error(completion_line(R"(, "suffix": "x")"), "body.suffix", "not supported");
  EXPECT_TRUE(read_one(completion_line(R"(, "echo": false, "suffix": null)")).ok());
}

TEST(OpenAIBatchRequest, ChatLogprobsTrueTakesTopLogprobsAsTheCount) {
  const Request r = read_one(chat_line(R"(, "logprobs": true, "top_logprobs": 4)"));
  ASSERT_TRUE(r.ok()) << r.error->message << " at " << r.error->field;
  EXPECT_EQ(r.sampling_params.logprobs, 4);
  EXPECT_EQ(read_one(chat_line(R"(, "logprobs": true)")).sampling_params.logprobs, 0);
  EXPECT_FALSE(read_one(chat_line(R"(, "logprobs": false)")).sampling_params.logprobs.has_value());
}

TEST(OpenAIBatchRequest, ChatTopLogprobsWithoutLogprobsTrueIsAnError) {
  expect_error(chat_line(R"(, "top_logprobs": 3)"), "body.top_logprobs",
               "needs logprobs set to true");
  expect_error(chat_line(R"(, "logprobs": true, "top_logprobs": 25)"), "body.top_logprobs",
               "must be in [0, 20], got 25");
  expect_error(chat_line(R"(, "logprobs": 3)"), "body.logprobs", "must be true or false");
}

TEST(OpenAIBatchRequest, CompletionLogprobsIsTheNumberOfAlternatives) {
  const Request r = read_one(completion_line(R"(, "logprobs": 5)"));
  ASSERT_TRUE(r.ok()) << r.error->message << " at " << r.error->field;
  EXPECT_EQ(r.sampling_params.logprobs, 5);
  expect_error(completion_line(R"(, "logprobs": 25)"), "body.logprobs",
               "must be in [0, 20], got 25");
  expect_error(completion_line(R"(, "logprobs": true)"), "body.logprobs",
               "must be an integer in [0, 20]");
  // top_logprobs is chat's spelling only.
  expect_error(completion_line(R"(, "top_logprobs": 2)"), "body.top_logprobs", "unknown field");
}

TEST(OpenAIBatchRequest, PenaltiesLogitBiasAndPromptLogprobsAreReadFromEitherBody) {
  for (auto line : {chat_line, completion_line}) {
    const Request r = read_one(line(
        R"(, "presence_penalty": 0.5, "frequency_penalty": -1, "repetition_penalty": 1.1, "logit_bias": {"200": 2.5, "3": -100}, "prompt_logprobs": 1)"));
    ASSERT_TRUE(r.ok()) << r.error->message << " at " << r.error->field;
    const SamplingParams& p = r.sampling_params;
    EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
    EXPECT_FLOAT_EQ(p.frequency_penalty, -1.0f);
    EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
    EXPECT_EQ(p.logit_bias, (std::vector<std::pair<int32_t, float>>{{3, -100.0f}, {200, 2.5f}}));
    EXPECT_EQ(p.prompt_logprobs, 1);
    expect_error(line(R"(, "presence_penalty": 3)"), "body.presence_penalty",
                 "must be in [-2, 2], got 3");
    expect_error(line(R"(, "repetition_penalty": 0)"), "body.repetition_penalty", "> 0");
    expect_error(line(R"(, "logit_bias": {"256": 1})"), "body.logit_bias.256",
                 "outside the vocabulary [0, 256)");
    expect_error(line(R"(, "logit_bias": {"1": -101})"), "body.logit_bias.1",
                 "must be in [-100, 100], got -101");
  }
}

TEST(OpenAIBatchRequest, BodyValuesAreRangeCheckedUnderTheirBodyName) {
  expect_error(chat_line(R"(, "top_p": 0)"), "body.top_p", "(0, 1]");
  expect_error(chat_line(R"(, "temperature": -1)"), "body.temperature", "finite");
  expect_error(chat_line(R"(, "max_token": 5)"), "body.max_token", "did you mean 'max_tokens'");
  expect_error(chat_line(R"(, "max_completion_tokens": 0)"), "body.max_completion_tokens",
               "at least 1");
}

TEST(OpenAIBatchRequest, ExplicitNullsMeanUnset) {
  const Request r = read_one(chat_line(
      R"(, "temperature": null, "max_tokens": null, "max_completion_tokens": null, "tools": null, "response_format": null, "n": null)"));
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_FLOAT_EQ(r.sampling_params.temperature, SamplingParams{}.temperature);
  EXPECT_EQ(r.sampling_params.max_tokens, 128 - 2);
}

constexpr const char* kAllRequestOnlyFields =
    R"(, "stop": ["\n", "END"], "stop_token_ids": [0, 9, 255], "include_stop_str_in_output": true, "min_tokens": 4, "skip_special_tokens": false, "spaces_between_special_tokens": false, "n": 5)";

void expect_all_request_only_fields(const Request& r) {
  ASSERT_TRUE(r.ok()) << r.error->message << " at " << r.error->field;
  const SamplingParams& p = r.sampling_params;
  EXPECT_EQ(p.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{0, 9, 255}));
  EXPECT_TRUE(p.include_stop_str_in_output);
  EXPECT_EQ(p.min_tokens, 4);
  EXPECT_FALSE(p.skip_special_tokens);
  EXPECT_FALSE(p.spaces_between_special_tokens);
  EXPECT_EQ(p.n, 5);
}

TEST(OpenAIBatchRequest, ChatBodyReadsStopMinTokensDetokenizationFlagsAndN) {
  expect_all_request_only_fields(read_one(chat_line(kAllRequestOnlyFields)));
}

TEST(OpenAIBatchRequest, CompletionBodyReadsStopMinTokensDetokenizationFlagsAndN) {
  const Request r = read_one(completion_line(kAllRequestOnlyFields));
  EXPECT_EQ(r.format, RequestFormat::kOpenAICompletion);
  expect_all_request_only_fields(r);
}

TEST(OpenAIBatchRequest, BodyWithoutTheNewFieldsGetsVllmDefaults) {
  for (const std::string& line :
       {chat_line(""), completion_line(""),
        chat_line(R"(, "stop": null, "n": null, "min_tokens": null, "stop_token_ids": null)")}) {
    SCOPED_TRACE(line);
    const Request r = read_one(line);
    ASSERT_TRUE(r.ok()) << r.error->message;
    testing::expect_vllm_request_only_defaults(r.sampling_params);
  }
}

TEST(OpenAIBatchRequest, StopAsAStringBecomesAOneElementList) {
  const Request chat = read_one(chat_line(R"(, "stop": "\n\n")"));
  ASSERT_TRUE(chat.ok()) << chat.error->message;
  EXPECT_EQ(chat.sampling_params.stop, (std::vector<std::string>{"\n\n"}));
  const Request completion = read_one(completion_line(R"(, "stop": "Q:")"));
  ASSERT_TRUE(completion.ok()) << completion.error->message;
  EXPECT_EQ(completion.sampling_params.stop, (std::vector<std::string>{"Q:"}));
}

TEST(OpenAIBatchRequest, BadStopFieldsAreNamedUnderBody) {
  expect_error(chat_line(R"(, "stop": ["a", ""])"), "body.stop[1]", "is empty");
  expect_error(completion_line(R"(, "stop": [1])"), "body.stop[0]", "must be a string");
  expect_error(completion_line(R"(, "stop": "")"), "body.stop", "is empty");
  nlohmann::json stops = nlohmann::json::array();
  for (int i = 0; i < 33; ++i) stops.push_back(std::to_string(i));
  expect_error(chat_line(R"(, "stop": )" + stops.dump()), "body.stop", "at most 32");
  expect_error(chat_line(R"(, "stop_token_ids": [3, 256])"), "body.stop_token_ids[1]",
               "outside the vocabulary [0, 256)");
  expect_error(completion_line(R"(, "stop_token_ids": ["3"])"), "body.stop_token_ids[0]",
               "integer token id");
  nlohmann::json ids = nlohmann::json::array();
  for (int i = 0; i < 33; ++i) ids.push_back(i);
  expect_error(completion_line(R"(, "stop_token_ids": )" + ids.dump()), "body.stop_token_ids",
               "at most 32");
}

TEST(OpenAIBatchRequest, MinTokensAboveMaxTokensIsRefusedNamingTheBodysSpelling) {
  expect_error(chat_line(R"(, "max_completion_tokens": 9, "min_tokens": 10)"), "body.min_tokens",
               "min_tokens must be less than or equal to max_completion_tokens=9, got 10");
  expect_error(completion_line(R"(, "max_tokens": 3, "min_tokens": 4)"), "body.min_tokens",
               "less than or equal to max_tokens=3");
  expect_error(completion_line(R"(, "min_tokens": -2)"), "body.min_tokens", ">= 0");
  EXPECT_TRUE(read_one(completion_line(R"(, "max_tokens": 3, "min_tokens": 3)")).ok());
}

TEST(OpenAIBatchRequest, NIsReadFromOneTo64) {
  EXPECT_EQ(read_one(chat_line(R"(, "n": 2)")).sampling_params.n, 2);
  EXPECT_EQ(read_one(completion_line(R"(, "n": 64)")).sampling_params.n, 64);
  expect_error(chat_line(R"(, "n": 65)"), "body.n", "in [1, 64], got 65");
  expect_error(completion_line(R"(, "n": 0)"), "body.n", "in [1, 64], got 0");
  expect_error(chat_line(R"(, "n": "2")"), "body.n", "integer");
}

TEST(OpenAIBatchRequest, BooleanExtrasAreTypeCheckedUnderBody) {
  expect_error(chat_line(R"(, "skip_special_tokens": "yes")"), "body.skip_special_tokens",
               "true or false");
  expect_error(completion_line(R"(, "include_stop_str_in_output": 1)"),
               "body.include_stop_str_in_output", "true or false");
  expect_error(
      completion_line(R"(, "spaces_between_special_tokens": null, "skip_special_tokens": [])"),
      "body.skip_special_tokens", "true or false");
}

TEST(OpenAIBatchRequest, StructuredOutputAndOtherUnsupportedVllmFieldsAreRefusedByName) {
  for (auto line : {chat_line, completion_line}) {
    expect_error(line(R"(, "guided_json": {"type": "object"})"), "body.guided_json",
                 "structured output (guided decoding) is not supported");
    expect_error(line(R"(, "structured_outputs": {"choice": ["a"]})"), "body.structured_outputs",
                 "structured output (guided decoding) is not supported");
    expect_error(line(R"(, "response_format": {"type": "json_schema", "json_schema": {}})"),
                 "body.response_format",
                 "structured output (response_format type \"json_schema\")");
    expect_error(line(R"(, "bad_words": ["x"])"), "body.bad_words", "bad_words is not supported");
    expect_error(line(R"(, "allowed_token_ids": [1])"), "body.allowed_token_ids",
                 "allowed_token_ids is not supported");
    expect_error(line(R"(, "best_of": 3)"), "body.best_of",
                 "best_of is not supported; use n for several completions");
  }
}

TEST(OpenAIBatchRequest, ResponseFormatTextAndBestOfOneAreAcceptedAndIgnored) {
  for (auto line : {chat_line, completion_line}) {
    const Request r = read_one(line(R"(, "response_format": {"type": "text"}, "best_of": 1)"));
    EXPECT_TRUE(r.ok()) << r.error->message << " at " << r.error->field;
    EXPECT_EQ(r.sampling_params.n, 1);
  }
}

TEST(OpenAIBatchRequest, NativeLinesAreNotBatchLines) {
  EXPECT_FALSE(is_openai_batch_line(nlohmann::json{{"prompt", "x"}, {"id", "a"}}));
  EXPECT_TRUE(is_openai_batch_line(nlohmann::json{{"custom_id", "a"}}));
}

}  // namespace
}  // namespace nanovllm
