// The sampling fields only a request sets (vLLM's stop, stop_token_ids, min_tokens, n,
// penalties, logit_bias, logprobs, ...) and the vLLM fields we refuse by name, read the same
// way on native lines and in OpenAI batch bodies; each problem is a FieldProblem naming the
// field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string_view>

#include "engine/request.h"
#include "engine/sampling_defaults.h"

namespace nanovllm {

// Fields of vLLM's requests that we cannot honour, refused by name on native lines and in
// OpenAI bodies (each with its own message, not "unknown field"): structured output
// (guided_json, guided_regex, guided_choice, guided_grammar, structured_outputs,
// response_format other than {"type": "text"}), bad_words, allowed_token_ids and best_of.
// A value that asks for nothing passes: null, response_format {"type": "text"}, bad_words [],
// best_of 1.
std::span<const std::string_view> refused_request_fields();
// The first refused field of `object` that asks for something, named "prefix.key".
std::optional<FieldProblem> check_refused_fields(const nlohmann::json& object,
                                                 std::string_view prefix);

// The request-only sampling fields (RequestOnlySampling), same names on native lines and in
// OpenAI bodies: stop, stop_token_ids, include_stop_str_in_output, min_tokens,
// skip_special_tokens, spaces_between_special_tokens, n, presence_penalty,
// frequency_penalty, logit_bias, logprobs, prompt_logprobs (chat bodies add top_logprobs).
std::span<const std::string_view> request_only_fields();

// How "logprobs" is spelled: the number of alternatives (native lines, /v1/completions), or
// chat's boolean with that number in "top_logprobs" (0 when absent; OpenAI's rule: given
// without logprobs true it is an error).
enum class LogprobsSpelling : uint8_t { kCount, kChat };

// Reads those of `object` that are present (null = unset: the default stays), checking
// types, counts (kMaxStopStrings, kMaxStopTokenIds, kMaxLogitBias) and ranges (min_tokens
// >= 0, 1 <= n <= kMaxCompletionsPerRequest, logprobs and prompt_logprobs in
// [0, kMaxLogprobs], penalties in [-2, 2], biases in [-100, 100]). logit_bias keys must be
// decimal token ids, each once; it comes out ascending by id. Problems name "prefix.key",
// "prefix.key[i]" or "prefix.logit_bias.<key>". The vocabulary bound of stop_token_ids and
// logit_bias, and min_tokens <= max_tokens, are validation's.
std::optional<FieldProblem> read_request_only_fields(
    const nlohmann::json& object, std::string_view prefix, RequestOnlySampling& out,
    LogprobsSpelling spelling = LogprobsSpelling::kCount);

}  // namespace nanovllm
