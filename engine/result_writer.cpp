#include "engine/result_writer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <utility>

#include "engine/file_error.h"
#include "engine/logprobs_json.h"
#include "engine/reasoning_parser.h"
#include "kernels/check.h"

namespace nanovllm {
namespace {

nlohmann::json optional_string(const std::optional<std::string>& s) {
  return s ? nlohmann::json(*s) : nlohmann::json(nullptr);
}

std::string random_tag() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

int64_t unix_time(const ResultWriterOptions& o) {
  if (o.unix_time) return o.unix_time();
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string model_name(const Request& r, const ResultWriterOptions& o) {
  return r.model.empty() ? o.served_model : r.model;
}

nlohmann::json error_object(const RequestError& e) {
  return {{"message", e.message},
          {"line", e.line},
          {"field", e.field.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.field)}};
}

std::string tagged(std::string_view prefix, const ResultWriterOptions& o, uint64_t serial) {
  return std::string(prefix) + o.run_tag + "-" + std::to_string(serial);
}

// A list of positions as JSON by `shape`, or null when the engine gave none.
nlohmann::json logprobs_or_null(const std::optional<std::vector<PositionLogprobs>>& positions,
                                nlohmann::json (*shape)(std::span<const PositionLogprobs>,
                                                        const TokenBytes&),
                                const ResultWriterOptions& o) {
  return positions ? shape(*positions, o.token_bytes) : nlohmann::json(nullptr);
}

nlohmann::json openai_choice(const Request& r, const CompletionOutput& out,
                             const ResultWriterOptions& o) {
  const bool chat = r.format == RequestFormat::kOpenAIChat;
  nlohmann::json choice = {
      {"index", out.index},
      {"logprobs",
       logprobs_or_null(out.logprobs, chat ? chat_logprobs_json : completion_logprobs_json, o)},
      {"finish_reason", to_string(out.finish_reason)},
      {"stop_reason", stop_reason_json(out)}};
  if (chat) {
    const ReasoningSplit split = split_reasoning(out.text, r.enable_thinking);
    choice["message"] = {{"role", "assistant"},
                         {"content", optional_string(split.content)},
                         {"reasoning_content", optional_string(split.reasoning_content)}};
  } else {
    choice["text"] = out.text;
  }
  return choice;
}

// `outs` ordered by index.
nlohmann::json openai_body(const Request& r, std::span<const CompletionOutput* const> outs,
                           const ResultWriterOptions& o, uint64_t serial) {
  nlohmann::json choices = nlohmann::json::array();
  int64_t completion_tokens = 0;
  for (const CompletionOutput* out : outs) {
    choices.push_back(openai_choice(r, *out, o));
    completion_tokens += static_cast<int64_t>(out->token_ids.size());
  }
  // The prompt is counted once (vLLM's usage for n > 1); its cache hits are completion 0's.
  const CompletionOutput& first = *outs.front();
  const bool chat = r.format == RequestFormat::kOpenAIChat;
  nlohmann::json body = {{"id", tagged(chat ? "chatcmpl-" : "cmpl-", o, serial)},
                         {"object", chat ? "chat.completion" : "text_completion"},
                         {"created", unix_time(o)},
                         {"model", model_name(r, o)},
                         {"choices", std::move(choices)},
                         {"usage",
                          {{"prompt_tokens", first.prompt_tokens},
                           {"completion_tokens", completion_tokens},
                           {"total_tokens", first.prompt_tokens + completion_tokens},
                           {"prompt_tokens_details", {{"cached_tokens", first.cached_tokens}}}}}};
  // vLLM's extra key, completion 0's; left out unless asked, so other bodies keep their shape.
  if (r.sampling_params.prompt_logprobs)
    body["prompt_logprobs"] = logprobs_or_null(first.prompt_logprobs, prompt_logprobs_json, o);
  return body;
}

// The native line's logprobs keys, each only when the request asked for it (null when the
// engine gave none: prompt_logprobs come on completion 0's line only).
void add_native_logprobs(const Request& r, const CompletionOutput& out,
                         const ResultWriterOptions& o, nlohmann::json& j) {
  if (r.sampling_params.logprobs) {
    j["logprobs"] = logprobs_or_null(out.logprobs, native_logprobs_json, o);
    j["cumulative_logprob"] =
        out.cumulative_logprob ? nlohmann::json(*out.cumulative_logprob) : nlohmann::json(nullptr);
  }
  if (r.sampling_params.prompt_logprobs)
    j["prompt_logprobs"] = logprobs_or_null(out.prompt_logprobs, prompt_logprobs_json, o);
}

nlohmann::json openai_record(const Request& r, std::span<const CompletionOutput* const> outs,
                             const ResultWriterOptions& o, uint64_t serial) {
  return {{"id", tagged("batch_req_", o, serial)},
          {"custom_id", r.id},
          {"response",
           {{"status_code", 200},
            {"request_id", tagged("req_", o, serial)},
            {"body", openai_body(r, outs, o, serial)}}},
          {"error", nullptr}};
}

}  // namespace

nlohmann::json stop_reason_json(const CompletionOutput& out) {
  if (out.stop_string) return *out.stop_string;
  if (out.stop_token_id) return *out.stop_token_id;
  return nullptr;
}

nlohmann::json result_json(const Request& r, const CompletionOutput& out,
                           const ResultWriterOptions& o, uint64_t serial) {
  CHECK(r.ok());
  if (r.format != RequestFormat::kNative) {
    const CompletionOutput* const outs[] = {&out};
    return openai_record(r, outs, o, serial);
  }
  nlohmann::json j = {{"id", r.id}, {"index", out.index}};
  if (r.splits_reasoning()) {
    const ReasoningSplit split = split_reasoning(out.text, r.enable_thinking);
    j["text"] = optional_string(split.content);
    j["reasoning_content"] = optional_string(split.reasoning_content);
  } else {
    j["text"] = out.text;
  }
  j["token_ids"] = out.token_ids;
  j["finish_reason"] = to_string(out.finish_reason);
  j["stop_reason"] = stop_reason_json(out);
  j["prompt_tokens"] = out.prompt_tokens;
  j["completion_tokens"] = out.token_ids.size();
  j["cached_tokens"] = out.cached_tokens;
  add_native_logprobs(r, out, o, j);
  return j;
}

nlohmann::json result_json(const Request& r, std::span<const CompletionOutput> outputs,
                           const ResultWriterOptions& o, uint64_t serial) {
  CHECK(r.ok());
  CHECK(r.format != RequestFormat::kNative);
  CHECK(!outputs.empty());
  std::vector<const CompletionOutput*> outs;
  outs.reserve(outputs.size());
  for (const CompletionOutput& out : outputs) outs.push_back(&out);
  std::ranges::sort(outs, {}, &CompletionOutput::index);
  return openai_record(r, outs, o, serial);
}

nlohmann::json error_json(const Request& r, const ResultWriterOptions& o, uint64_t serial) {
  CHECK(!r.ok());
  if (r.format != RequestFormat::kNative) {
    nlohmann::json error = error_object(*r.error);
    error["code"] = "invalid_request";
    return {{"id", tagged("batch_req_", o, serial)},
            {"custom_id", r.id},
            {"response",
             {{"status_code", 400}, {"request_id", tagged("req_", o, serial)}, {"body", nullptr}}},
            {"error", std::move(error)}};
  }
  // The keys of a result line, so every native line has the same shape; one per request.
  return {{"id", r.id},
          {"index", 0},
          {"text", ""},
          {"token_ids", nlohmann::json::array()},
          {"finish_reason", "error"},
          {"stop_reason", nullptr},
          {"prompt_tokens", r.prompt_token_ids.size()},
          {"completion_tokens", 0},
          {"cached_tokens", 0},
          {"error", error_object(*r.error)}};
}

bool is_successful_result(const nlohmann::json& line, std::string& id) {
  if (!line.is_object()) return false;
  const auto error = line.find("error");
  if (error != line.end() && !error->is_null()) return false;
  if (line.contains("custom_id")) {  // OpenAI batch record
    const auto& response = line.value("response", nlohmann::json());
    if (!line["custom_id"].is_string() || !response.is_object() ||
        response.value("status_code", 0) != 200)
      return false;
    id = line["custom_id"].get<std::string>();
    return true;
  }
  if (!line.contains("id") || !line["id"].is_string()) return false;
  if (line.value("finish_reason", std::string("error")) == "error") return false;
  id = line["id"].get<std::string>();
  return true;
}

ResultWriter::ResultWriter(std::ostream& out, ResultWriterOptions options)
    : out_(&out), name_("<stdout>"), options_(std::move(options)) {
  if (options_.run_tag.empty()) options_.run_tag = random_tag();
}

std::unique_ptr<ResultWriter> ResultWriter::open(const std::filesystem::path& path, bool append,
                                                 ResultWriterOptions options) {
  auto file = std::make_unique<std::ofstream>(
      path, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
  if (!*file) throw file_error("cannot open the output file", path);
  auto writer = std::make_unique<ResultWriter>(*file, std::move(options));
  writer->name_ = path.string();
  writer->file_ = std::move(file);
  return writer;
}

void ResultWriter::write(const Request& request, const CompletionOutput& output) {
  write_line(result_json(request, output, options_, serial_++));
  ++num_ok_;
}

void ResultWriter::write(const Request& request, std::span<const CompletionOutput> outputs) {
  if (request.format == RequestFormat::kNative) {
    for (const CompletionOutput& output : outputs) write(request, output);
    return;
  }
  write_line(result_json(request, outputs, options_, serial_++));
  ++num_ok_;
}

void ResultWriter::write_error(const Request& request) {
  write_line(error_json(request, options_, serial_++));
  ++num_failed_;
}

void ResultWriter::write_line(const nlohmann::json& line) {
  // Invalid UTF-8 from a partial multi-byte token becomes U+FFFD rather than an exception.
  std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text += '\n';
  // One write and a flush per line: a crash leaves at most one partial last line.
  const auto write = [&] {
    out_->write(text.data(), static_cast<std::streamsize>(text.size()));
    out_->flush();
  };
  if (options_.exclusive_write)
    options_.exclusive_write(write);
  else
    write();
  if (!*out_) throw file_error("cannot write a result line to", name_);
}

}  // namespace nanovllm
