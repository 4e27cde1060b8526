// OpenAI batch input lines (vllm run-batch shape) read from prompts.jsonl.
#include "engine/openai_batch_request.h"

#include <gtest/gtest.h>

#include <sstream>

#include "engine/request_reader.h"

namespace nanovllm {
namespace {

RequestValidator byte_validator() {
  RequestValidator v;
  v.vocab_size = 256;
  v.max_model_len = 128;
  v.encode = [](std::string_view text) {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  };
  v.render_chat = [](const nlohmann::json& messages, bool) {
    std::string out;
    for (const auto& m : messages) out += m["content"].get<std::string>();
    return out;
  };
  return v;
}

Request read_one(const std::string& line) {
  std::istringstream in(line + "\n");
  auto rs = read_requests(in, byte_validator(), {});
  EXPECT_EQ(rs.size(), 1u);
  return rs.at(0);
}

std::string chat_line(const std::string& body_extra) {
  return R"({"custom_id": "req-1", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "Qwen/Qwen3-0.6B", "messages": [{"role": "user", "content": "hi"}])" +
         body_extra + "}}";
}

void expect_error(const std::string& line, const std::string& field, const std::string& words) {
  SCOPED_TRACE(line);
  const Request r = read_one(line);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->line, 1);
  EXPECT_EQ(r.error->field, field);
  EXPECT_NE(r.error->message.find(words), std::string::npos) << r.error->message;
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
  expect_error(chat_line(R"(, "n": 2)"), "body.n", "one completion");
  expect_error(chat_line(R"(, "stream": true)"), "body.stream", "streaming");
  expect_error(chat_line(R"(, "logprobs": true)"), "body.logprobs", "not supported");
  expect_error(chat_line(R"(, "tools": [{"type": "function"}])"), "body.tools", "not supported");
  expect_error(chat_line(R"(, "response_format": {"type": "json_object"})"), "body.response_format",
               "not supported");
  expect_error(chat_line(R"(, "stop": ["\n"])"), "body.stop", "stop strings");
  expect_error(chat_line(R"(, "presence_penalty": 0.5)"), "body.presence_penalty", "not supported");
  expect_error(chat_line(R"(, "chat_template_kwargs": {"foo": 1})"),
               "body.chat_template_kwargs.foo", "unknown field");
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

TEST(OpenAIBatchRequest, NativeLinesAreNotBatchLines) {
  EXPECT_FALSE(is_openai_batch_line(nlohmann::json{{"prompt", "x"}, {"id", "a"}}));
  EXPECT_TRUE(is_openai_batch_line(nlohmann::json{{"custom_id", "a"}}));
}

}  // namespace
}  // namespace nanovllm
