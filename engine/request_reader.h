// Reads prompts.jsonl: one request per line, in nanovllm's native shape or as an OpenAI
// batch line (vLLM run-batch), validated completely before any weights load.
//
// Native line: {"id"?, one of "prompt" | "prompt_token_ids" | "messages",
//   "enable_thinking"? (messages only), max_tokens?, temperature?, top_p?, top_k?, min_p?,
//   seed?, ignore_eos?, repetition_penalty? (> 0), stop? (a string or <= 32 non-empty
//   strings), stop_token_ids? (<= 32 ids in the vocabulary), include_stop_str_in_output?,
//   min_tokens? (0 .. max_tokens), skip_special_tokens?, spaces_between_special_tokens?,
//   n? (1 .. 64), presence_penalty?, frequency_penalty? (-2 .. 2), logit_bias? ({"<token
//   id>": -100 .. 100}, <= 1024 ids in the vocabulary), logprobs?, prompt_logprobs? (0 .. 20)}
//   (vLLM's SamplingParams meanings; null = unset). guided_json and the other structured
//   output fields, response_format other than {"type": "text"}, bad_words,
//   allowed_token_ids and best_of (other than 1) are refused by name (request_fields.h).
// Batch line: {"custom_id", "method": "POST", "url": "/v1/chat/completions" |
//   "/v1/completions", "body": {...}} (see openai_batch_request.h).
//
// A bad line becomes a Request with `error` set (message, line, field); it is answered
// with an error result and the other lines still run. Blank lines are skipped but keep
// their line number; an empty file gives no requests. Every request id (given, or the
// line number) must be unique, because results and --resume are keyed by it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "engine/sampling_defaults.h"

namespace nanovllm {

// What validation needs from the model and its tokenizer (the tokenizer plugs in here;
// tests use fakes). encode / render_chat may throw: the message becomes the line's error.
struct RequestValidator {
  int32_t vocab_size = 0;
  int32_t max_model_len = 0;
  std::function<std::vector<int32_t>(std::string_view text)> encode;
  // Qwen3's chat template with add_generation_prompt = true.
  std::function<std::string(const nlohmann::json& messages, bool enable_thinking)> render_chat;
};

// Syntax and field checks of one line (no tokenizer). `line_number` is 1-based.
Request parse_request_line(std::string_view line, int64_t line_number);

// All lines of a stream: skips blank lines, checks ids are unique.
std::vector<Request> parse_requests(std::istream& in);

// Tokenizes (or renders the chat of) a parsed request, checks its token ids against the
// vocabulary and its length against the context, and resolves its sampling parameters.
// Does nothing to a request that already failed.
void validate_request(Request& request, const RequestValidator& validator,
                      const SamplingLevels& levels);

// --shard K/N: the part of a prompts file one of N launchers answers. Request i (0-based,
// counting non-blank lines, bad ones included) belongs to shard i mod N, so N launchers
// together answer every line once, and each request keeps the id it has in the whole file.
struct RequestShard {
  int index = 0;  // K, in [0, count)
  int count = 1;  // N >= 1; 1: the whole file
  bool holds(int64_t request_index) const { return request_index % count == index; }
};

// parse_requests + validate_request for every line of `shard` (ids are checked for
// uniqueness over the whole stream; only the shard's requests are tokenized and returned).
std::vector<Request> read_requests(std::istream& in, const RequestValidator& validator,
                                   const SamplingLevels& levels, const RequestShard& shard = {});
// True when the file holds at least one non-blank line of `shard` (a request, good or bad).
// The launcher asks before it forks or loads anything: an empty input is not worth a model.
// Throws std::runtime_error naming the file when it cannot be read.
bool has_request_lines(const std::filesystem::path& path, const RequestShard& shard = {});

// read_requests on a file; throws std::runtime_error naming the file when it cannot be read.
std::vector<Request> read_requests_file(const std::filesystem::path& path,
                                        const RequestValidator& validator,
                                        const SamplingLevels& levels,
                                        const RequestShard& shard = {});

// How many requests failed validation (non-zero: the run's exit status is non-zero).
int64_t count_failed(const std::vector<Request>& requests);

}  // namespace nanovllm
