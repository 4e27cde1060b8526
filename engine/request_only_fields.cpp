#include "engine/request_only_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "engine/request_fields.h"

namespace nanovllm {

namespace {

constexpr std::string_view kRefusedFields[] = {
    "guided_json",     "guided_regex", "guided_choice",     "guided_grammar", "structured_outputs",
    "response_format", "bad_words",    "allowed_token_ids", "best_of"};
constexpr std::string_view kRequestOnlyFields[] = {"stop",
                                                   "stop_token_ids",
                                                   "include_stop_str_in_output",
                                                   "min_tokens",
                                                   "skip_special_tokens",
                                                   "spaces_between_special_tokens",
                                                   "n",
                                                   "presence_penalty",
                                                   "frequency_penalty",
                                                   "logit_bias",
                                                   "logprobs",
                                                   "prompt_logprobs"};
const std::string kLogprobsRange = "in [0, " + std::to_string(kMaxLogprobs) + "]";

std::string index_field(const std::string& field, size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

// Why the refused field `key` cannot be honoured with value `v`; "" when it asks for nothing.
std::string refusal(std::string_view key, const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (key == "response_format") {
    if (!v.is_object())
      return "must be an object; only {\"type\": \"text\"} is supported (structured output is "
             "not)";
    const nlohmann::json type = v.contains("type") ? v["type"] : nlohmann::json();
    if (type == "text") return "";
    return "structured output (response_format type " + type.dump() +
           ") is not supported; only {\"type\": \"text\"} is accepted";
  }
  if (key == "bad_words") {
    if (v.is_array() && v.empty()) return "";
    return "bad_words is not supported (no banned words)";
  }
  if (key == "allowed_token_ids")
    return "allowed_token_ids is not supported (sampling cannot be restricted to a token list)";
  if (key == "best_of") {
    if (v.is_number_integer() && v.get<int64_t>() == 1) return "";
    return "best_of is not supported; use n for several completions";
  }
  return "structured output (guided decoding) is not supported";
}

std::optional<FieldProblem> read_bool(const nlohmann::json& v, std::string field, bool& out) {
  if (!v.is_boolean()) return FieldProblem{std::move(field), "must be true or false"};
  out = v.get<bool>();
  return std::nullopt;
}

// A JSON integer in [lo, hi] (floats such as 2.0 are type errors), stored as int32.
std::optional<FieldProblem> read_bounded_int(const nlohmann::json& v, std::string field, int64_t lo,
                                             int64_t hi, const std::string& range, int32_t& out) {
  if (!v.is_number_integer()) return FieldProblem{std::move(field), "must be an integer"};
  // nlohmann stores non-negative literals as unsigned: check both bounds either way.
  const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(hi) &&
                                                     static_cast<int64_t>(v.get<uint64_t>()) >= lo
                                               : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  if (!in_range) return FieldProblem{std::move(field), "must be " + range + ", got " + v.dump()};
  out = static_cast<int32_t>(v.get<int64_t>());
  return std::nullopt;
}

std::optional<FieldProblem> read_stop(const nlohmann::json& v, const std::string& field,
                                      std::vector<std::string>& out) {
  static const std::string kEmpty = "is empty (a stop string needs at least one character)";
  out.clear();
  if (v.is_string()) {
    if (v.get_ref<const std::string&>().empty()) return FieldProblem{field, kEmpty};
    out.push_back(v.get<std::string>());
    return std::nullopt;
  }
  if (!v.is_array()) return FieldProblem{field, "must be a string or an array of strings"};
  if (v.size() > static_cast<size_t>(kMaxStopStrings))
    return FieldProblem{field, "has " + std::to_string(v.size()) + " stop strings; at most " +
                                   std::to_string(kMaxStopStrings) + " are allowed"};
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) return FieldProblem{index_field(field, i), "must be a string"};
    if (v[i].get_ref<const std::string&>().empty())
      return FieldProblem{index_field(field, i), kEmpty};
    out.push_back(v[i].get<std::string>());
  }
  return std::nullopt;
}

std::optional<FieldProblem> read_stop_token_ids(const nlohmann::json& v, const std::string& field,
                                                std::vector<int32_t>& out) {
  out.clear();
  if (!v.is_array()) return FieldProblem{field, "must be an array of token ids"};
  if (v.size() > static_cast<size_t>(kMaxStopTokenIds))
    return FieldProblem{field, "has " + std::to_string(v.size()) + " token ids; at most " +
                                   std::to_string(kMaxStopTokenIds) + " are allowed"};
  for (size_t i = 0; i < v.size(); ++i) {
    const auto& t = v[i];
    if (!t.is_number_integer())
      return FieldProblem{index_field(field, i), "must be an integer token id"};
    const bool fits =
        t.is_number_unsigned()
            ? t.get<uint64_t>() <= uint64_t{std::numeric_limits<int32_t>::max()}
            : t.get<int64_t>() >= 0 && t.get<int64_t>() <= std::numeric_limits<int32_t>::max();
    if (!fits)
      return FieldProblem{index_field(field, i),
                          "token id " + t.dump() + " is outside the vocabulary"};
    out.push_back(t.get<int32_t>());
  }
  return std::nullopt;
}

// A JSON number in [-limit, limit] (JSON has no NaN or infinity: an overflowing literal fails
// to parse), stored as float.
std::optional<FieldProblem> read_symmetric_number(const nlohmann::json& v, std::string field,
                                                  float limit, float& out) {
  if (!v.is_number()) return FieldProblem{std::move(field), "must be a number"};
  const double x = v.get<double>();
  if (!(std::fabs(x) <= limit)) {
    std::ostringstream range;
    range << "must be in [" << -limit << ", " << limit << "], got " << v.dump();
    return FieldProblem{std::move(field), range.str()};
  }
  out = static_cast<float>(x);
  return std::nullopt;
}

// A logit_bias key: a token id written as a decimal integer (OpenAI's and vLLM's keys).
std::optional<int64_t> parse_token_id_key(const std::string& key) {
  const size_t sign = key.starts_with('-') ? 1 : 0;
  if (key.size() == sign || key.size() > sign + 18 ||  // 18 digits fit int64
      !std::all_of(key.begin() + static_cast<std::ptrdiff_t>(sign), key.end(),
                   [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(key);
}

std::optional<FieldProblem> read_logit_bias(const nlohmann::json& v, const std::string& field,
                                            std::vector<std::pair<int32_t, float>>& out) {
  out.clear();
  if (!v.is_object())
    return FieldProblem{field, "must be an object mapping token ids (strings) to biases"};
  if (v.size() > static_cast<size_t>(kMaxLogitBias))
    return FieldProblem{field, "has " + std::to_string(v.size()) + " entries; at most " +
                                   std::to_string(kMaxLogitBias) + " are allowed"};
  std::set<int64_t> seen;  // "5" and "05" are one token
  for (const auto& [key, bias] : v.items()) {
    const std::string at = field + "." + key;
    const std::optional<int64_t> id = parse_token_id_key(key);
    if (!id) return FieldProblem{at, "the key must be a token id (a decimal integer)"};
    if (*id < 0 || *id > std::numeric_limits<int32_t>::max())
      return FieldProblem{at, "token id " + key + " is outside the vocabulary"};
    if (!seen.insert(*id).second)
      return FieldProblem{at, "token id " + std::to_string(*id) + " is given twice"};
    float b = 0.0f;
    if (auto p = read_symmetric_number(bias, at, kMaxAbsLogitBias, b)) return p;
    out.emplace_back(static_cast<int32_t>(*id), b);
  }
  std::ranges::sort(out);  // the keys came in string order ("10" < "9")
  return std::nullopt;
}

// Chat's spelling: logprobs true/false, the count of alternatives in top_logprobs (which,
// as OpenAI rules, needs logprobs true).
std::optional<FieldProblem> read_chat_logprobs(const nlohmann::json& object,
                                               std::string_view prefix,
                                               std::optional<int32_t>& out) {
  const nlohmann::json logprobs = object.value("logprobs", nlohmann::json());
  const nlohmann::json top = object.value("top_logprobs", nlohmann::json());
  bool on = false;
  if (!logprobs.is_null())
    if (auto p = read_bool(logprobs, join_field(prefix, "logprobs"), on)) return p;
  int32_t count = 0;
  if (!top.is_null()) {
    if (auto p = read_bounded_int(top, join_field(prefix, "top_logprobs"), 0, kMaxLogprobs,
                                  kLogprobsRange, count))
      return p;
    if (!on)
      return FieldProblem{join_field(prefix, "top_logprobs"),
                          "needs logprobs set to true (OpenAI's rule)"};
  }
  out = on ? std::optional<int32_t>(count) : std::nullopt;
  return std::nullopt;
}

}  // namespace

std::span<const std::string_view> refused_request_fields() {
  return kRefusedFields;
}

std::optional<FieldProblem> check_refused_fields(const nlohmann::json& object,
                                                 std::string_view prefix) {
  for (std::string_view key : kRefusedFields) {
    const auto it = object.find(std::string(key));
    if (it == object.end()) continue;
    if (std::string why = refusal(key, *it); !why.empty())
      return FieldProblem{join_field(prefix, key), std::move(why)};
  }
  return std::nullopt;
}

std::span<const std::string_view> request_only_fields() {
  return kRequestOnlyFields;
}

std::optional<FieldProblem> read_request_only_fields(const nlohmann::json& object,
                                                     std::string_view prefix,
                                                     RequestOnlySampling& out,
                                                     LogprobsSpelling spelling) {
  for (std::string_view key : kRequestOnlyFields) {
    if (key == "logprobs" && spelling == LogprobsSpelling::kChat) {
      if (auto p = read_chat_logprobs(object, prefix, out.logprobs)) return p;
      continue;
    }
    const auto it = object.find(std::string(key));
    if (it == object.end() || it->is_null()) continue;
    const nlohmann::json& v = *it;
    std::string field = join_field(prefix, key);
    std::optional<FieldProblem> p;
    if (key == "stop") {
      p = read_stop(v, field, out.stop);
    } else if (key == "stop_token_ids") {
      p = read_stop_token_ids(v, field, out.stop_token_ids);
    } else if (key == "include_stop_str_in_output") {
      p = read_bool(v, std::move(field), out.include_stop_str_in_output);
    } else if (key == "skip_special_tokens") {
      p = read_bool(v, std::move(field), out.skip_special_tokens);
    } else if (key == "spaces_between_special_tokens") {
      p = read_bool(v, std::move(field), out.spaces_between_special_tokens);
    } else if (key == "min_tokens") {
      p = read_bounded_int(v, std::move(field), 0, std::numeric_limits<int32_t>::max(),
                           "an integer >= 0", out.min_tokens);
    } else if (key == "n") {
      p = read_bounded_int(v, std::move(field), 1, kMaxCompletionsPerRequest,
                           "in [1, " + std::to_string(kMaxCompletionsPerRequest) + "]", out.n);
    } else if (key == "presence_penalty") {
      p = read_symmetric_number(v, std::move(field), kMaxAbsPresenceFrequencyPenalty,
                                out.presence_penalty);
    } else if (key == "frequency_penalty") {
      p = read_symmetric_number(v, std::move(field), kMaxAbsPresenceFrequencyPenalty,
                                out.frequency_penalty);
    } else if (key == "logit_bias") {
      p = read_logit_bias(v, field, out.logit_bias);
    } else {  // logprobs (a count), prompt_logprobs
      int32_t count = 0;
      if (!v.is_number_integer())
        return FieldProblem{std::move(field), "must be an integer " + kLogprobsRange +
                                                  ": the number of top alternatives per token"};
      p = read_bounded_int(v, std::move(field), 0, kMaxLogprobs, kLogprobsRange, count);
      if (!p) (key == "logprobs" ? out.logprobs : out.prompt_logprobs) = count;
    }
    if (p) return p;
  }
  return std::nullopt;
}

}  // namespace nanovllm
