#include "engine/openai_batch_request.h"

#include <string>
#include <string_view>

#include "engine/request_fields.h"
#include "engine/request_only_fields.h"
#include "engine/sampling_defaults.h"

namespace nanovllm {
namespace {

constexpr std::string_view kEnvelopeFields[] = {"custom_id", "method", "url", "body"};
constexpr std::string_view kChatUrl = "/v1/chat/completions";
constexpr std::string_view kCompletionUrl = "/v1/completions";

// Body fields we read; "model" and "user" are accepted and not used. The request-only
// sampling fields (stop, n, logprobs, ...) and the refused ones (refused_request_fields) come
// on top.
constexpr std::string_view kChatFields[] = {
    "messages", "model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k",
    "min_p", "seed", "ignore_eos", "repetition_penalty", "chat_template_kwargs", "user", "stop",
    "stop_token_ids", "include_stop_str_in_output", "min_tokens", "skip_special_tokens",
    "spaces_between_special_tokens", "n", "presence_penalty", "frequency_penalty", "logit_bias",
    "logprobs", "top_logprobs", "prompt_logprobs",
    // Accepted only at their default (checked below):
    "stream", "tools", "tool_choice", "functions", "function_call", "parallel_tool_calls",
    "stream_options"};
constexpr std::string_view kCompletionFields[] = {
    "prompt", "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "ignore_eos",
    "repetition_penalty", "user", "stop", "stop_token_ids", "include_stop_str_in_output",
    "min_tokens", "skip_special_tokens", "spaces_between_special_tokens", "n", "presence_penalty",
    "frequency_penalty", "logit_bias", "logprobs", "prompt_logprobs",
    // Accepted only at their default (checked below):
    "stream", "echo", "suffix", "stream_options"};

// A field we know but cannot honour: fine when null or at its no-op value.
bool at_default(std::string_view key, const nlohmann::json& v) {
  if (v.is_null()) return true;
  if (key == "stream" || key == "echo" || key == "parallel_tool_calls")
    return v.is_boolean() && !v.get<bool>();
  if (key == "tools" || key == "functions") return v.is_array() && v.empty();
  if (key == "tool_choice" || key == "function_call") return v == "none";
  return false;
}

std::string unsupported_message(std::string_view key) {
  if (key == "stream") return "streaming is not supported in batch mode";
  return "is not supported";
}

void read_body(const nlohmann::json& body, bool chat, Request& r) {
  auto fail = [&r](const FieldProblem& p) { r.fail(p.message, p.field); };
  if (chat) {
    if (auto p = check_known_fields(body, kChatFields, "body", refused_request_fields()))
      return fail(*p);
  } else {
    if (auto p = check_known_fields(body, kCompletionFields, "body", refused_request_fields()))
      return fail(*p);
  }
  if (auto p = check_refused_fields(body, "body")) return fail(*p);
  static constexpr std::string_view kDefaultOnly[] = {
      "stream",        "echo",   "parallel_tool_calls", "tools", "functions", "tool_choice",
      "function_call", "suffix", "stream_options"};
  for (std::string_view key : kDefaultOnly) {
    const std::string name(key);
    if (body.contains(name) && !at_default(key, body[name]))
      return r.fail(unsupported_message(key), "body." + name);
  }

  if (body.contains("model")) {
    if (!body["model"].is_string()) return r.fail("must be a string", "body.model");
    r.model = body["model"].get<std::string>();
  }
  if (chat) {
    r.kind = PromptKind::kChat;
    if (!body.contains("messages")) return r.fail("is missing", "body.messages");
    if (auto p = read_messages(body["messages"], "body.messages", r.messages)) return fail(*p);
    if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
      const auto& kw = body["chat_template_kwargs"];
      static constexpr std::string_view kKwargs[] = {"enable_thinking"};
      if (!kw.is_object()) return r.fail("must be an object", "body.chat_template_kwargs");
      if (auto p = check_known_fields(kw, kKwargs, "body.chat_template_kwargs")) return fail(*p);
      if (kw.contains("enable_thinking")) {
        if (!kw["enable_thinking"].is_boolean())
          return r.fail("must be true or false", "body.chat_template_kwargs.enable_thinking");
        r.enable_thinking = kw["enable_thinking"].get<bool>();
      }
    }
  } else {
    if (!body.contains("prompt")) return r.fail("is missing", "body.prompt");
    const auto& prompt = body["prompt"];
    if (prompt.is_array() && !prompt.empty() && !prompt[0].is_number_integer())
      return r.fail("only one prompt per line is supported (a string or one token id array)",
                    "body.prompt");
    if (prompt.is_array()) {
      r.kind = PromptKind::kTokenIds;
      if (auto p = read_token_ids(prompt, "body.prompt", r.prompt_token_ids)) return fail(*p);
    } else {
      r.kind = PromptKind::kText;
      if (auto p = read_nonempty_string(prompt, "body.prompt", r.prompt)) return fail(*p);
    }
  }

  static constexpr std::string_view kSampling[] = {
      "temperature", "top_p",      "top_k",      "min_p",
      "seed",        "ignore_eos", "max_tokens", "repetition_penalty"};
  for (std::string_view key : kSampling) {
    const std::string name(key);
    if (!body.contains(name)) continue;
    if (auto p = read_sampling_field(body[name], key, "body." + name, r.overrides)) return fail(*p);
  }
  if (chat && body.contains("max_completion_tokens") && !body["max_completion_tokens"].is_null()) {
    if (auto p = read_sampling_field(body["max_completion_tokens"], "max_tokens",
                                     "body.max_completion_tokens", r.overrides))
      return fail(*p);
    r.max_tokens_field = "max_completion_tokens";
  }
  const LogprobsSpelling logprobs = chat ? LogprobsSpelling::kChat : LogprobsSpelling::kCount;
  if (auto p = read_request_only_fields(body, "body", r.request_only, logprobs)) return fail(*p);
}

}  // namespace

bool is_openai_batch_line(const nlohmann::json& object) {
  for (std::string_view key : kEnvelopeFields)
    if (object.contains(std::string(key))) return true;
  return false;
}

void parse_openai_batch_line(const nlohmann::json& object, Request& r) {
  // The chat shape until the url says otherwise, so errors are answered as the client expects.
  r.format = RequestFormat::kOpenAIChat;
  if (object.contains("custom_id")) {
    const auto& id = object["custom_id"];
    if (!id.is_string() || id.get_ref<const std::string&>().empty())
      return r.fail("must be a non-empty string", "custom_id");
    r.id = id.get<std::string>();
  }
  if (auto p = check_known_fields(object, kEnvelopeFields, "")) return r.fail(p->message, p->field);
  if (!object.contains("custom_id")) return r.fail("is missing", "custom_id");
  if (!object.contains("method")) return r.fail("is missing", "method");
  if (object["method"] != "POST") return r.fail("must be \"POST\"", "method");
  if (!object.contains("url")) return r.fail("is missing", "url");
  const auto& url = object["url"];
  if (url == kChatUrl) {
    r.format = RequestFormat::kOpenAIChat;
  } else if (url == kCompletionUrl) {
    r.format = RequestFormat::kOpenAICompletion;
  } else {
    return r.fail("must be \"/v1/chat/completions\" or \"/v1/completions\"", "url");
  }
  if (!object.contains("body")) return r.fail("is missing", "body");
  if (!object["body"].is_object()) return r.fail("must be an object", "body");
  read_body(object["body"], r.format == RequestFormat::kOpenAIChat, r);
}

}  // namespace nanovllm
