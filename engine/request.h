// One line of prompts.jsonl after reading and validation: what to generate, with which
// sampling settings, and how to answer it (native result line or OpenAI batch record).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/sampling_params.h"

namespace nanovllm {

// Which shape the answer takes: a native result line, or an OpenAI batch output record
// for the endpoint the line named (vLLM's run-batch).
enum class RequestFormat : uint8_t { kNative, kOpenAIChat, kOpenAICompletion };

enum class PromptKind : uint8_t { kText, kTokenIds, kChat };

// A user input problem that stops one request; it becomes that request's error result.
struct RequestError {
  std::string message;
  int64_t line = 0;   // 1-based line of prompts.jsonl
  std::string field;  // dotted path of the offending field ("body.top_p"); "" = whole line
};

// Sampling values one level sets (generation_config.json, the command line, or the
// request); unset fields fall through to the level below.
struct SamplingOverrides {
  std::optional<int32_t> max_tokens;
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int32_t> top_k;
  std::optional<float> min_p;
  std::optional<uint64_t> seed;
  std::optional<bool> ignore_eos;
  std::optional<float> repetition_penalty;  // not a flag: generation_config.json or requests
};

// Sampling fields only a request sets (generation_config.json and the command line have no
// say); validation copies them into Request::sampling_params as given (vLLM's meanings, see
// SamplingParams). Read values are type-, count- and range-checked; the vocabulary bound of
// stop_token_ids and logit_bias and min_tokens <= max_tokens are checked at validation.
struct RequestOnlySampling {
  std::vector<std::string> stop;        // a lone string becomes one entry
  std::vector<int32_t> stop_token_ids;  // each >= 0 until the vocabulary is known
  bool include_stop_str_in_output = false;
  int32_t min_tokens = 0;
  bool skip_special_tokens = true;
  bool spaces_between_special_tokens = true;
  int32_t n = 1;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;  // ascending unique ids, each >= 0
  std::optional<int32_t> logprobs;                    // chat: top_logprobs when logprobs is true
  std::optional<int32_t> prompt_logprobs;
};

struct Request {
  std::string id;             // the line's id / custom_id; default: "line-<N>" (generated_id)
  bool generated_id = false;  // the line named none: its id depends on its line number
  int64_t line = 0;           // 1-based line of prompts.jsonl
  RequestFormat format = RequestFormat::kNative;
  PromptKind kind = PromptKind::kText;

  std::string prompt;           // kText
  nlohmann::json messages;      // kChat: [{role, content: string}], content parts joined
  bool enable_thinking = true;  // kChat only; Qwen3's template defaults to thinking on
  std::string model;            // OpenAI body "model", echoed in the answer (else "")

  // kTokenIds: as given; otherwise filled by validation (tokenized text / rendered chat).
  std::vector<int32_t> prompt_token_ids;

  SamplingOverrides overrides;                  // this request's own sampling fields
  RequestOnlySampling request_only;             // ... and those no lower level sets
  std::string max_tokens_field = "max_tokens";  // its spelling there, named in errors
  SamplingParams sampling_params;   // resolved by validation (all levels + context room)
  bool temperature_raised = false;  // a temperature in (0, 0.01) was raised to 0.01 (vLLM)

  std::optional<RequestError> error;

  bool ok() const { return !error.has_value(); }
  // Output of chat requests goes through the Qwen3 reasoning split (<think>...</think>).
  bool splits_reasoning() const { return kind == PromptKind::kChat; }
  void fail(std::string message, std::string field);
};

}  // namespace nanovllm
