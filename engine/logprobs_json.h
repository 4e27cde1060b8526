// The JSON of logprobs / prompt_logprobs in a result, in the shapes vLLM returns them:
//   native:            [{"<id>": {"logprob", "rank", "decoded_token"}, ...} per position],
//                      the chosen token first, then the top N not already listed;
//                      prompt_logprobs has a null in front (prompt token 0 has none);
//   OpenAI chat:       {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token",
//                      "logprob", "bytes"}] (the top N)}], "refusal": null};
//   OpenAI completion: {"tokens", "token_logprobs", "top_logprobs": [{"<text>": logprob}
//                      (the sampled token, then the top N)], "text_offset"}.
// Token texts come from the token's raw bytes, invalid UTF-8 (part of a character) as U+FFFD,
// so the JSON always dumps; "bytes" keeps the raw values. Without a TokenBytes function the
// texts are null ("token_id:<id>" where a text is a key, as vLLM spells ids it cannot show).
// A logprob of -inf is written as -9999.0, as vLLM's OpenAI server does.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>

#include "engine/position_logprobs.h"

namespace nanovllm {

// A token's raw bytes (ResultWriterOptions::token_bytes); may be empty.
using TokenBytes = std::function<std::string(int32_t)>;

// The text of token `id`: its bytes with each maximal invalid UTF-8 subpart as U+FFFD;
// nullopt when `token_bytes` is empty.
std::optional<std::string> token_text(int32_t id, const TokenBytes& token_bytes);

// Native "logprobs": one dict per completion token.
nlohmann::json native_logprobs_json(std::span<const PositionLogprobs> positions,
                                    const TokenBytes& token_bytes);
// Native and OpenAI "prompt_logprobs": null, then one dict per prompt token after the first.
nlohmann::json prompt_logprobs_json(std::span<const PositionLogprobs> positions,
                                    const TokenBytes& token_bytes);
// OpenAI chat choices[i].logprobs.
nlohmann::json chat_logprobs_json(std::span<const PositionLogprobs> positions,
                                  const TokenBytes& token_bytes);
// OpenAI completions choices[i].logprobs.
nlohmann::json completion_logprobs_json(std::span<const PositionLogprobs> positions,
                                        const TokenBytes& token_bytes);

}  // namespace nanovllm
