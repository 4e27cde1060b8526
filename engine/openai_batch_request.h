// OpenAI batch input lines, as `vllm run-batch` reads them:
//   {"custom_id": "...", "method": "POST", "url": "/v1/chat/completions",
//    "body": {"model": ..., "messages": [...], "max_completion_tokens": 64, ...}}
//   {"custom_id": "...", "method": "POST", "url": "/v1/completions",
//    "body": {"model": ..., "prompt": "..." or [token ids], "max_tokens": 64, ...}}
// "model" is accepted and echoed, not used to pick a model. The body takes the same
// request-only sampling fields as a native line (stop, stop_token_ids, min_tokens,
// include_stop_str_in_output, skip_special_tokens, spaces_between_special_tokens, n; vLLM
// reads its extra parameters from the body too). Body fields we cannot honour fail the line
// rather than being silently ignored: structured output (guided_*, structured_outputs,
// response_format other than {"type": "text"}), bad_words, allowed_token_ids and best_of are
// refused by name (request_fields.h); tools, logprobs, stream, penalties, ... are accepted
// only at their default. Explicit nulls and default values are accepted.
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
