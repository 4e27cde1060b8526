// OpenAI batch input lines, as `vllm run-batch` reads them:
//   {"custom_id": "...", "method": "POST", "url": "/v1/chat/completions",
//    "body": {"model": ..., "messages": [...], "max_completion_tokens": 64, ...}}
//   {"custom_id": "...", "method": "POST", "url": "/v1/completions",
//    "body": {"model": ..., "prompt": "..." or [token ids], "max_tokens": 64, ...}}
// "model" is accepted and echoed, not used to pick a model. Body fields we cannot honour
// (tools, n > 1, logprobs, stream, response_format, stop, penalties, ...) fail the line
// rather than being silently ignored; explicit nulls and default values are accepted.
// max_completion_tokens wins over max_tokens when both are set (vLLM's rule).
// chat_template_kwargs.enable_thinking turns Qwen3's thinking on or off (vLLM extension,
// as are top_k, min_p and ignore_eos).
#pragma once

#include <nlohmann/json.hpp>

#include "engine/request.h"

namespace nanovllm {

// True when the object has any of the batch envelope's fields.
bool is_openai_batch_line(const nlohmann::json& object);

// Fills `request` (id, format, kind, prompt/messages, overrides, model) from a batch
// line object, or marks it failed naming the field ("body.top_p").
void parse_openai_batch_line(const nlohmann::json& object, Request& request);

}  // namespace nanovllm
