// Result lines, written by rank 0 as results finish and flushed at once, so a crash loses
// nothing that was finished.
//
// Native result, one line per completion (a request with n > 1 gets n lines, each as its
// completion finishes, in any order):
//                 {"id", "index" (completion index in [0, n)), "text", "token_ids"
//                  (completion), "finish_reason": "stop"|"length", "stop_reason" (null, the
//                  stop string, or the stop_token_ids entry as an integer: vLLM's),
//                  "prompt_tokens" (on every line), "completion_tokens", "cached_tokens"}
//   chat requests also carry "reasoning_content" and their "text" is the answer after
//   </think> (see reasoning_parser.h; either may be null). A request asking for logprobs adds
//   "logprobs" and "cumulative_logprob", one asking for prompt_logprobs "prompt_logprobs"
//   (completion 0's line; null on the others): vLLM's shapes, see logprobs_json.h.
// Native error:   one line per request, the same keys: {"id", "index": 0, "text": "",
//                  "token_ids": [], "finish_reason": "error", "stop_reason": null, token counts
//                  0 (prompt_tokens when known), "error": {"message", "line", "field"|null}}
// OpenAI batch:   one record per request, written once all n completions finished:
//                 {"id": "batch_req_...", "custom_id", "response": {"status_code": 200,
//                  "request_id", "body": chat.completion | text_completion}, "error": null}
//   body.choices[i] ordered by index, each with "index", "finish_reason", "stop_reason",
//   "logprobs" (null unless asked; the endpoint's shape, logprobs_json.h) and the message
//   (chat, reasoning split per choice) or "text"; usage counts the prompt once and sums
//   completion_tokens over the choices; cached_tokens is completion 0's. A request asking for
//   prompt_logprobs adds body.prompt_logprobs (vLLM's, completion 0's).
//   On error      {"id", "custom_id", "response": {"status_code": 400, "request_id",
//                  "body": null}, "error": {"code", "message", "line", "field"}}
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/position_logprobs.h"
#include "engine/request.h"
#include "engine/sequence.h"

namespace nanovllm {

// What the engine produced for one completion of a request.
struct CompletionOutput {
  int32_t index = 0;               // completion index in [0, n)
  std::string text;                // detokenized completion (cut at a stop string)
  std::vector<int32_t> token_ids;  // [completion_tokens] completion token ids
  FinishReason finish_reason = FinishReason::kStop;
  std::optional<std::string> stop_string;  // stop_reason: the stop string that ended it, or
  std::optional<int32_t> stop_token_id;    // the stop_token_ids entry; neither: null
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens whose KV came from the prefix cache
  // RequestOutput's: set when the request asked for them (prompt_logprobs: entry i is prompt
  // token i + 1).
  std::optional<std::vector<PositionLogprobs>> logprobs;  // [completion_tokens]
  std::optional<double> cumulative_logprob;
  std::optional<std::vector<PositionLogprobs>> prompt_logprobs;  // [prompt_tokens - 1]
};

struct ResultWriterOptions {
  std::string served_model;            // OpenAI "model" when the request named none
  std::string run_tag;                 // makes OpenAI ids unique per run; empty = random hex
  std::function<int64_t()> unix_time;  // OpenAI "created"; empty = the system clock
  // A token's raw bytes (Tokenizer::append_token_bytes, specials included), for the token
  // texts of logprobs; empty: texts are null.
  std::function<std::string(int32_t)> token_bytes;
  // Runs a line's write and flush; data parallelism passes one that holds a lock shared by
  // every replica writing the same output, so lines never interleave. Empty: write directly.
  std::function<void(const std::function<void()>& write)> exclusive_write;
};

// The JSON of one result line (pure functions, so tests check them without a stream).
// `serial` numbers the answers of one run and is part of the OpenAI ids.
// One completion: a native line, or an OpenAI record with that one choice.
nlohmann::json result_json(const Request& request, const CompletionOutput& output,
                           const ResultWriterOptions& options, uint64_t serial);
// An OpenAI record answering with every completion of the request (non-empty, distinct
// indexes, in any order: choices come out ordered by index). Not for native requests.
nlohmann::json result_json(const Request& request, std::span<const CompletionOutput> outputs,
                           const ResultWriterOptions& options, uint64_t serial);
// "stop_reason": null, the stop string, or the stop token id (an integer).
nlohmann::json stop_reason_json(const CompletionOutput& output);
nlohmann::json error_json(const Request& request, const ResultWriterOptions& options,
                          uint64_t serial);

// True when a result line (either shape) answered its request without error;
// `id` receives its id / custom_id. False for errors and for lines not shaped as results.
bool is_successful_result(const nlohmann::json& line, std::string& id);

class ResultWriter {
 public:
  // Writes to a stream it does not own (stdout).
  ResultWriter(std::ostream& out, ResultWriterOptions options);
  // Writes to a file, appending (resume) or truncating; throws naming the file.
  static std::unique_ptr<ResultWriter> open(const std::filesystem::path& path, bool append,
                                            ResultWriterOptions options);

  // One completion: a native line (or an OpenAI record with one choice).
  void write(const Request& request, const CompletionOutput& output);
  // Completions of one request: native, one line each; OpenAI, one record with every choice
  // (pass all n of them).
  void write(const Request& request, std::span<const CompletionOutput> outputs);
  // For a request whose `error` is set (validation or an engine rejection).
  void write_error(const Request& request);

  int64_t num_ok() const { return num_ok_; }  // result lines (not completions) without error
  int64_t num_failed() const { return num_failed_; }

 private:
  void write_line(const nlohmann::json& line);

  std::unique_ptr<std::ofstream> file_;  // set when the writer owns its file
  std::ostream* out_;
  std::string name_;  // for error messages
  ResultWriterOptions options_;
  uint64_t serial_ = 0;
  int64_t num_ok_ = 0;
  int64_t num_failed_ = 0;
};

}  // namespace nanovllm
