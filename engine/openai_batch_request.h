// OpenAI batch input lines, as `vllm run-batch` reads them:
//   {"custom_id": "...", "method": "POST", "url": "/v1/chat/completions",
//    "body": {"model": ..., "messages": [...], "max_completion_tokens": 64, ...}}
//   {"custom_id": "...", "method": "POST", "url": "/v1/completions",
//    "body": {"model": ..., "prompt": "..." or [token ids], "max_tokens": 64, ...}}
// "model" is accepted and echoed, not used to pick a model. The body takes the same
// request-only sampling fields as a native line (stop, stop_token_ids, min_tokens,
// include_stop_str_in_output, skip_special_tokens, spaces_between_special_tokens, n,
// presence_penalty, frequency_penalty, logit_bias, prompt_logprobs; vLLM reads its extra
// parameters from the body too) and repetition_penalty. logprobs is spelled as the endpoint
// does: chat, logprobs true/false with top_logprobs (0 .. 20; given without logprobs true it
// is an error, as OpenAI rules); completions, logprobs as the number of alternatives (0 ..
// 20). Body fields we cannot honour fail the line rather than being silently ignored:
// structured output (guided_*, structured_outputs, response_format other than
// {"type": "text"}), bad_words, allowed_token_ids and best_of are refused by name
// (request_fields.h); tools, stream, echo, suffix, ... are accepted only at their default.
// Explicit nulls and default values are accepted.
// max_completion_tokens wins over max_tokens when both are set (vLLM's rule).
// chat_template_kwargs.enable_thinking turns Qwen3's thinking on or off (vLLM extension,
// as are top_k, min_p, ignore_eos, repetition_penalty and prompt_logprobs).
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
