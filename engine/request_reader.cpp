#include "engine/request_reader.h"

#include <fstream>
#include <span>
#include <stdexcept>
#include <unordered_set>
#include <vector>

#include "engine/file_error.h"
#include "engine/openai_batch_request.h"
#include "engine/request_fields.h"
#include "engine/request_only_fields.h"
#include "engine/sequence.h"

namespace nanovllm {
namespace {

constexpr std::string_view kSamplingFields[] = {
    "max_tokens", "temperature", "top_p",      "top_k",
    "min_p",      "seed",        "ignore_eos", "repetition_penalty"};
constexpr std::string_view kPromptFields[] = {"id", "prompt", "prompt_token_ids", "messages",
                                              "enable_thinking"};

// Every field a native line may have: its prompt, the levelled sampling fields and the
// request-only ones (request_only_fields.h keeps that list).
std::span<const std::string_view> native_fields() {
  static const std::vector<std::string_view> fields = [] {
    std::vector<std::string_view> f(std::begin(kPromptFields), std::end(kPromptFields));
    f.insert(f.end(), std::begin(kSamplingFields), std::end(kSamplingFields));
    const std::span<const std::string_view> request_only = request_only_fields();
    f.insert(f.end(), request_only.begin(), request_only.end());
    return f;
  }();
  return fields;
}

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// nlohmann's what() is "[json.exception.parse_error.101] parse error at line 1, column 7:
// <reason>" (we keep the reason and report our own column) or
// "[json.exception.out_of_range.406] number overflow parsing '1e999'".
std::string parse_error_reason(const nlohmann::json::exception& e) {
  std::string what = e.what();
  if (const size_t tag = what.find("] "); what.starts_with('[') && tag != std::string::npos)
    what.erase(0, tag + 2);
  if (const size_t colon = what.find(": ");
      what.starts_with("parse error") && colon != std::string::npos)
    what.erase(0, colon + 2);
  return what;
}

// A stop_token_ids entry or logit_bias key the model cannot embed, named as the user wrote it
// (up to the spelling of a logit_bias key: "05" is reported as 5).
std::optional<FieldProblem> vocabulary_problem(const SamplingParams& p, int32_t vocab_size,
                                               const std::string& prefix) {
  const auto outside = [vocab_size](int32_t id) {
    return "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
           std::to_string(vocab_size) + ")";
  };
  for (size_t i = 0; i < p.stop_token_ids.size(); ++i)
    if (p.stop_token_ids[i] >= vocab_size)
      return FieldProblem{join_field(prefix, "stop_token_ids") + "[" + std::to_string(i) + "]",
                          outside(p.stop_token_ids[i])};
  for (const auto& [id, bias] : p.logit_bias)
    if (id >= vocab_size)
      return FieldProblem{join_field(prefix, "logit_bias") + "." + std::to_string(id), outside(id)};
  return std::nullopt;
}

void parse_native_line(const nlohmann::json& object, Request& r) {
  auto fail = [&r](const FieldProblem& p) { r.fail(p.message, p.field); };
  if (auto p = check_known_fields(object, native_fields(), "", refused_request_fields()))
    return fail(*p);
  if (auto p = check_refused_fields(object, "")) return fail(*p);

  // Exactly one prompt field.
  std::vector<std::string> given;
  for (const char* key : {"prompt", "prompt_token_ids", "messages"})
    if (object.contains(key)) given.emplace_back(key);
  if (given.empty()) return r.fail("needs one of prompt, prompt_token_ids or messages", "prompt");
  if (given.size() > 1)
    return r.fail("give only one of prompt, prompt_token_ids or messages (found " + given[0] +
                      " and " + given[1] + ")",
                  given[1]);
  const std::string& key = given[0];
  if (key == "prompt") {
    r.kind = PromptKind::kText;
    if (auto p = read_nonempty_string(object[key], key, r.prompt)) return fail(*p);
  } else if (key == "prompt_token_ids") {
    r.kind = PromptKind::kTokenIds;
    if (auto p = read_token_ids(object[key], key, r.prompt_token_ids)) return fail(*p);
  } else {
    r.kind = PromptKind::kChat;
    if (auto p = read_messages(object[key], key, r.messages)) return fail(*p);
  }

  if (object.contains("enable_thinking")) {
    const auto& v = object["enable_thinking"];
    if (r.kind != PromptKind::kChat)
      return r.fail("applies only to chat requests (messages)", "enable_thinking");
    if (!v.is_boolean()) return r.fail("must be true or false", "enable_thinking");
    r.enable_thinking = v.get<bool>();
  }
  for (std::string_view field : kSamplingFields) {
    const std::string name(field);
    if (!object.contains(name)) continue;
    if (auto p = read_sampling_field(object[name], field, name, r.overrides)) return fail(*p);
  }
  if (auto p = read_request_only_fields(object, "", r.request_only)) return fail(*p);
}

// Reads the id before anything else, so that even a line failing later is answered
// under the id its author gave it.
void read_native_id(const nlohmann::json& object, Request& r) {
  if (!object.contains("id")) return;
  r.generated_id = false;
  const auto& v = object["id"];
  if (v.is_number_integer()) {
    r.id = v.dump();
  } else if (v.is_string() && !v.get_ref<const std::string&>().empty()) {
    r.id = v.get<std::string>();
  } else {
    r.fail("must be a non-empty string or an integer", "id");
  }
}

}  // namespace

Request parse_request_line(std::string_view line, int64_t line_number) {
  Request r;
  r.line = line_number;
  r.id = "line-" + std::to_string(line_number);
  r.generated_id = true;
  if (line_number == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);  // BOM
  if (auto bad = invalid_utf8_offset(line)) {
    const std::string field = json_path_at(line, *bad);
    r.fail("invalid UTF-8 at column " + std::to_string(*bad + 1) +
               (field.empty() ? std::string() : " (in " + field + ")"),
           field);
    return r;
  }
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    r.fail("malformed JSON at column " + std::to_string(e.byte) + ": " + parse_error_reason(e), "");
    return r;
  } catch (const nlohmann::json::out_of_range& e) {  // a number beyond double: 1e999
    r.fail(parse_error_reason(e) + " (the number does not fit a double)", "");
    return r;
  }
  if (!object.is_object()) {
    r.fail("expected a JSON object, got " + std::string(object.type_name()), "");
    return r;
  }
  if (is_openai_batch_line(object)) {
    parse_openai_batch_line(object, r);
  } else {
    read_native_id(object, r);
    if (r.ok()) parse_native_line(object, r);
  }
  return r;
}

std::vector<Request> parse_requests(std::istream& in) {
  std::vector<Request> requests;
  std::unordered_set<std::string> ids;  // every id given so far
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (is_blank(line)) continue;
    Request r = parse_request_line(line, number);
    if (!r.generated_id && !ids.insert(r.id).second) {
      // Results are keyed by id; a second line with it would be indistinguishable.
      const bool batch = r.format != RequestFormat::kNative;
      r.error.reset();
      r.fail("duplicate id '" + r.id + "' (ids must be unique)", batch ? "custom_id" : "id");
    }
    requests.push_back(std::move(r));
  }
  // Generated ids step aside for given ones ("line-2" given on another line): never a
  // collision, and the same file always gives the same ids (--resume relies on it).
  for (Request& r : requests) {
    if (!r.generated_id) continue;
    const std::string base = r.id;
    for (int k = 1; !ids.insert(r.id).second; ++k) r.id = base + "." + std::to_string(k);
  }
  return requests;
}

void validate_request(Request& r, const RequestValidator& v, const SamplingLevels& levels) {
  if (!r.ok()) return;
  const bool native = r.format == RequestFormat::kNative;
  const std::string prompt_field = r.kind == PromptKind::kChat                 ? "messages"
                                   : r.kind == PromptKind::kTokenIds && native ? "prompt_token_ids"
                                                                               : "prompt";
  const std::string prefix = native ? "" : "body";
  try {
    if (r.kind == PromptKind::kText) {
      r.prompt_token_ids = v.encode(r.prompt);
    } else if (r.kind == PromptKind::kChat) {
      r.prompt_token_ids = v.encode(v.render_chat(r.messages, r.enable_thinking));
    }
  } catch (const std::exception& e) {
    return r.fail(std::string("cannot tokenize: ") + e.what(), join_field(prefix, prompt_field));
  }
  if (r.prompt_token_ids.empty())
    return r.fail("tokenizes to no tokens", join_field(prefix, prompt_field));
  for (size_t i = 0; i < r.prompt_token_ids.size(); ++i) {
    const int32_t t = r.prompt_token_ids[i];
    if (t < 0 || t >= v.vocab_size)
      return r.fail("token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                        std::to_string(v.vocab_size) + ")",
                    join_field(prefix, prompt_field) + "[" + std::to_string(i) + "]");
  }
  const auto prompt_len = static_cast<int64_t>(r.prompt_token_ids.size());
  if (std::string room = prompt_room_error(prompt_len, v.max_model_len); !room.empty())
    return r.fail(room, join_field(prefix, prompt_field));
  r.sampling_params =
      resolve_sampling(levels, r.overrides, static_cast<int32_t>(prompt_len), v.max_model_len);
  // logits / 1e-38 overflow: vLLM raises tiny temperatures to its minimum, and so do the
  // samplers (kernels/sampler.h); the job warns once, naming the lines.
  float& t = r.sampling_params.temperature;
  if (t > 0.0f && t < kMinSamplingTemperature) {
    t = kMinSamplingTemperature;
    r.temperature_raised = true;
  }
  if (r.overrides.max_tokens && prompt_len + *r.overrides.max_tokens > v.max_model_len)
    return r.fail("max_tokens " + std::to_string(*r.overrides.max_tokens) + " plus the " +
                      std::to_string(prompt_len) + "-token prompt exceeds max_model_len " +
                      std::to_string(v.max_model_len),
                  join_field(prefix, r.max_tokens_field));
  apply_request_only(r.request_only, r.sampling_params);
  if (auto p = vocabulary_problem(r.sampling_params, v.vocab_size, prefix))
    return r.fail(p->message, p->field);
  // vLLM's check, against max_tokens as resolved (a default is the context room left).
  const int32_t max_tokens = r.sampling_params.max_tokens;
  if (r.sampling_params.min_tokens > max_tokens)
    return r.fail("min_tokens must be less than or equal to " + r.max_tokens_field + "=" +
                      std::to_string(max_tokens) + ", got " +
                      std::to_string(r.sampling_params.min_tokens) +
                      (r.overrides.max_tokens
                           ? std::string()
                           : std::string(" (max_tokens not given: the default, capped to the "
                                         "context room left)")),
                  join_field(prefix, "min_tokens"));
}

std::vector<Request> read_requests(std::istream& in, const RequestValidator& validator,
                                   const SamplingLevels& levels, const RequestShard& shard) {
  std::vector<Request> requests = parse_requests(in);
  if (shard.count > 1) {  // after the id checks, which span the whole file
    std::vector<Request> mine;
    for (size_t i = 0; i < requests.size(); ++i)
      if (shard.holds(static_cast<int64_t>(i))) mine.push_back(std::move(requests[i]));
    requests = std::move(mine);
  }
  for (Request& r : requests) validate_request(r, validator, levels);
  return requests;
}

bool has_request_lines(const std::filesystem::path& path, const RequestShard& shard) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw file_error("cannot open the prompts file", path);
  int64_t index = 0;
  for (std::string line; std::getline(in, line);)
    if (!is_blank(line) && shard.holds(index++)) return true;
  return false;
}

std::vector<Request> read_requests_file(const std::filesystem::path& path,
                                        const RequestValidator& validator,
                                        const SamplingLevels& levels, const RequestShard& shard) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw file_error("cannot open the prompts file", path);
  return read_requests(in, validator, levels, shard);
}

int64_t count_failed(const std::vector<Request>& requests) {
  int64_t n = 0;
  for (const Request& r : requests) n += r.ok() ? 0 : 1;
  return n;
}

}  // namespace nanovllm
