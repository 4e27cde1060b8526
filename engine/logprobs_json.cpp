#include "engine/logprobs_json.h"

#include <algorithm>
#include <cstddef>

#include "engine/tokenizer_utf8.h"

namespace nanovllm {
namespace {

// vLLM's OpenAI server writes max(logprob, -9999.0): JSON has no -inf.
double logprob_value(float logprob) {
  return std::max(static_cast<double>(logprob), -9999.0);
}

nlohmann::json text_json(int32_t id, const TokenBytes& token_bytes) {
  const std::optional<std::string> text = token_text(id, token_bytes);
  return text ? nlohmann::json(*text) : nlohmann::json(nullptr);
}

// The raw bytes as OpenAI's "bytes" list of ints; null without token bytes.
nlohmann::json bytes_json(int32_t id, const TokenBytes& token_bytes) {
  if (!token_bytes) return nullptr;
  nlohmann::json out = nlohmann::json::array();
  for (const char c : token_bytes(id)) out.push_back(static_cast<unsigned char>(c));
  return out;
}

// Code points of valid UTF-8 (what Python's len() counts).
int64_t code_points(const std::string& text) {
  return std::ranges::count_if(
      text, [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

// vLLM's Logprob dict of one position: the chosen token, then the top ones not listed yet
// (ranked 1..N by their place in the top). Keys come out in string order: nlohmann::json
// objects are sorted.
nlohmann::json position_dict(const PositionLogprobs& p, const TokenBytes& token_bytes) {
  nlohmann::json dict = nlohmann::json::object();
  const auto add = [&](int32_t id, float logprob, int32_t rank) {
    const std::string key = std::to_string(id);
    if (dict.contains(key)) return;
    dict[key] = {{"logprob", logprob_value(logprob)},
                 {"rank", rank},
                 {"decoded_token", text_json(id, token_bytes)}};
  };
  add(p.token_id, p.logprob, p.rank);
  for (size_t j = 0; j < p.top.size(); ++j)
    add(p.top[j].first, p.top[j].second, static_cast<int32_t>(j + 1));
  return dict;
}

nlohmann::json chat_entry(int32_t id, float logprob, const TokenBytes& token_bytes) {
  return {{"token", text_json(id, token_bytes)},
          {"logprob", logprob_value(logprob)},
          {"bytes", bytes_json(id, token_bytes)}};
}

// A completions top_logprobs key: the token's text, or vLLM's spelling of an id.
std::string text_key(int32_t id, const TokenBytes& token_bytes) {
  const std::optional<std::string> text = token_text(id, token_bytes);
  return text ? *text : "token_id:" + std::to_string(id);
}

}  // namespace

std::optional<std::string> token_text(int32_t id, const TokenBytes& token_bytes) {
  if (!token_bytes) return std::nullopt;
  std::string text;
  append_utf8_lossy(token_bytes(id), text);
  return text;
}

nlohmann::json native_logprobs_json(std::span<const PositionLogprobs> positions,
                                    const TokenBytes& token_bytes) {
  nlohmann::json out = nlohmann::json::array();
  for (const PositionLogprobs& p : positions) out.push_back(position_dict(p, token_bytes));
  return out;
}

nlohmann::json prompt_logprobs_json(std::span<const PositionLogprobs> positions,
                                    const TokenBytes& token_bytes) {
  nlohmann::json out = nlohmann::json::array({nullptr});
  for (const PositionLogprobs& p : positions) out.push_back(position_dict(p, token_bytes));
  return out;
}

nlohmann::json chat_logprobs_json(std::span<const PositionLogprobs> positions,
                                  const TokenBytes& token_bytes) {
  nlohmann::json content = nlohmann::json::array();
  for (const PositionLogprobs& p : positions) {
    nlohmann::json entry = chat_entry(p.token_id, p.logprob, token_bytes);
    nlohmann::json top = nlohmann::json::array();
    for (const auto& [id, logprob] : p.top) top.push_back(chat_entry(id, logprob, token_bytes));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

nlohmann::json completion_logprobs_json(std::span<const PositionLogprobs> positions,
                                        const TokenBytes& token_bytes) {
  nlohmann::json tokens = nlohmann::json::array(), token_logprobs = nlohmann::json::array(),
                 top_logprobs = nlohmann::json::array(), text_offset = nlohmann::json::array();
  int64_t offset = 0;  // code points of the token texts so far
  for (const PositionLogprobs& p : positions) {
    const std::optional<std::string> text = token_text(p.token_id, token_bytes);
    tokens.push_back(text ? nlohmann::json(*text) : nlohmann::json(nullptr));
    token_logprobs.push_back(logprob_value(p.logprob));
    text_offset.push_back(text ? nlohmann::json(offset) : nlohmann::json(nullptr));
    if (text) offset += code_points(*text);
    // OpenAI's: the sampled token and the top N (N + 1 keys at most; equal texts collapse,
    // the first kept).
    nlohmann::json top = nlohmann::json::object();
    top[text_key(p.token_id, token_bytes)] = logprob_value(p.logprob);
    for (const auto& [id, logprob] : p.top)
      top.emplace(text_key(id, token_bytes), logprob_value(logprob));
    top_logprobs.push_back(std::move(top));
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(text_offset)}};
}

}  // namespace nanovllm
