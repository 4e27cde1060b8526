// Shared by the tests of prompts.jsonl reading (native lines and OpenAI batch lines): a byte
// "tokenizer" validator, one-line reads, and the error and default checks they all make.
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "engine/request_reader.h"

namespace nanovllm::testing {

// Obvious stand-ins for the tokenizer: one token per byte, and a chat "template" that
// writes "role: content\n" per message, then the generation prompt.
inline RequestValidator byte_validator(int32_t max_model_len = 64) {
  RequestValidator v;
  v.vocab_size = 256;
  v.max_model_len = max_model_len;
  v.encode = [](std::string_view text) {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  };
  v.render_chat = [](const nlohmann::json& messages, bool enable_thinking) {
    std::string out;
    for (const auto& m : messages)
      out += m["role"].get<std::string>() + ": " + m["content"].get<std::string>() + "\n";
    out += "assistant: ";
    if (!enable_thinking) out += "<think></think>";
    return out;
  };
  return v;
}

inline std::vector<Request> read(const std::string& text,
                                 const RequestValidator& v = byte_validator(),
                                 const SamplingLevels& levels = {}) {
  std::istringstream in(text);
  return read_requests(in, v, levels);
}

inline Request read_one(const std::string& line, const RequestValidator& v = byte_validator()) {
  auto requests = read(line + "\n", v);
  EXPECT_EQ(requests.size(), 1u);
  return requests.at(0);
}

// The error of a single-line file must name line 1 and `field`, and mention `words`.
inline void expect_error(const std::string& line, const std::string& field,
                         const std::string& words, const RequestValidator& v = byte_validator()) {
  SCOPED_TRACE(line);
  const Request r = read_one(line, v);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->line, 1);
  EXPECT_EQ(r.error->field, field);
  EXPECT_NE(r.error->message.find(words), std::string::npos) << r.error->message;
}

// vLLM's defaults of the request-only fields (stop, min_tokens, detokenization, n).
// r failed with an error naming this line (1-based) and field.
inline void expect_line_error(const Request& r, int line, const std::string& field) {
  ASSERT_FALSE(r.ok()) << "line " << line << " was accepted";
  EXPECT_EQ(r.error->line, line);
  EXPECT_EQ(r.error->field, field);
}

inline void expect_vllm_request_only_defaults(const SamplingParams& p) {
  EXPECT_TRUE(p.stop.empty());
  EXPECT_TRUE(p.stop_token_ids.empty());
  EXPECT_FALSE(p.include_stop_str_in_output);
  EXPECT_EQ(p.min_tokens, 0);
  EXPECT_TRUE(p.skip_special_tokens);
  EXPECT_TRUE(p.spaces_between_special_tokens);
  EXPECT_EQ(p.n, 1);
}

}  // namespace nanovllm::testing
