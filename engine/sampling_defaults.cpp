#include "engine/sampling_defaults.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace nanovllm {
namespace {

std::optional<FieldProblem> problem(std::string field, std::string message) {
  return FieldProblem{std::move(field), std::move(message)};
}

// JSON integer within [lo, hi]; floats such as 10.0 are rejected (a type error).
std::optional<FieldProblem> read_int(const nlohmann::json& v, const std::string& field, int64_t lo,
                                     int64_t hi, int64_t& out) {
  if (!v.is_number_integer()) return problem(field, "must be an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    return problem(field, "is too large");
  const int64_t x =
      v.is_number_unsigned() ? static_cast<int64_t>(v.get<uint64_t>()) : v.get<int64_t>();
  if (x < lo || x > hi) return problem(field, "is out of range");
  out = x;
  return std::nullopt;
}

// A float as a message shows it ("1.1", not 1.100000023841858).
std::string number(float x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

std::optional<FieldProblem> read_float(const nlohmann::json& v, const std::string& field,
                                       float& out) {
  if (!v.is_number()) return problem(field, "must be a number");
  out = static_cast<float>(v.get<double>());
  return std::nullopt;
}

}  // namespace

std::optional<FieldProblem> read_sampling_field(const nlohmann::json& value,
                                                std::string_view target, std::string field,
                                                SamplingOverrides& out) {
  if (value.is_null()) return std::nullopt;
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
  int64_t i = 0;
  float f = 0;
  std::optional<FieldProblem> p;
  if (target == "max_tokens") {
    if (!(p = read_int(value, field, kInt32Min, kInt32Max, i))) out.max_tokens = i;
  } else if (target == "top_k") {
    if (!(p = read_int(value, field, kInt32Min, kInt32Max, i))) out.top_k = i;
  } else if (target == "seed") {
    // Any 64-bit integer, signed or not (OpenAI allows negative seeds); stored as bits.
    // -1 means "no seed", as in vLLM: the seed is then derived as for a request without one.
    if (!value.is_number_integer()) return problem(field, "must be an integer");
    if (value.is_number_unsigned())
      out.seed = value.get<uint64_t>();
    else if (value.get<int64_t>() != -1)
      out.seed = static_cast<uint64_t>(value.get<int64_t>());
  } else if (target == "ignore_eos") {
    if (!value.is_boolean()) return problem(field, "must be true or false");
    out.ignore_eos = value.get<bool>();
  } else if (target == "temperature") {
    if (!(p = read_float(value, field, f))) out.temperature = f;
  } else if (target == "top_p") {
    if (!(p = read_float(value, field, f))) out.top_p = f;
  } else if (target == "min_p") {
    if (!(p = read_float(value, field, f))) out.min_p = f;
  } else if (target == "repetition_penalty") {
    if (!(p = read_float(value, field, f))) out.repetition_penalty = f;
  } else {
    return problem(field, "is not a sampling field");
  }
  if (p) return p;
  // Range-check only the field just read, reported under the caller's name.
  SamplingOverrides one;
  if (target == "max_tokens") one.max_tokens = out.max_tokens;
  if (target == "top_k") one.top_k = out.top_k;
  if (target == "temperature") one.temperature = out.temperature;
  if (target == "top_p") one.top_p = out.top_p;
  if (target == "min_p") one.min_p = out.min_p;
  if (target == "repetition_penalty") one.repetition_penalty = out.repetition_penalty;
  if (auto bad = check_sampling_overrides(one)) return problem(field, bad->message);
  return std::nullopt;
}

std::optional<FieldProblem> check_sampling_overrides(const SamplingOverrides& v) {
  if (v.max_tokens && *v.max_tokens < 1)
    return problem("max_tokens", "must be at least 1, got " + std::to_string(*v.max_tokens));
  if (v.temperature && (!std::isfinite(*v.temperature) || *v.temperature < 0))
    return problem("temperature", "must be a finite number >= 0 (0 = greedy)");
  if (v.top_p && (!std::isfinite(*v.top_p) || *v.top_p <= 0 || *v.top_p > 1))
    return problem("top_p", "must be in (0, 1]");
  if (v.top_k && *v.top_k < -1)
    return problem(
        "top_k", "must be -1 or 0 (disabled) or a positive count, got " + std::to_string(*v.top_k));
  if (v.min_p && (!std::isfinite(*v.min_p) || *v.min_p < 0 || *v.min_p > 1))
    return problem("min_p", "must be in [0, 1]");
  if (v.repetition_penalty && (!std::isfinite(*v.repetition_penalty) || *v.repetition_penalty <= 0))
    return problem("repetition_penalty",
                   "must be a finite number > 0 (1 = off), got " + number(*v.repetition_penalty));
  return std::nullopt;
}

SamplingOverrides generation_config_overrides(const nlohmann::json& config,
                                              std::string_view source) {
  if (!config.is_object())
    throw std::runtime_error(std::string(source) + ": expected a JSON object");
  SamplingOverrides out;
  auto fail = [&](const FieldProblem& p) {
    throw std::runtime_error(std::string(source) + ": field '" + p.field + "' " + p.message);
  };
  static constexpr std::pair<const char*, const char*> kKeys[] = {
      {"temperature", "temperature"},
      {"top_p", "top_p"},
      {"top_k", "top_k"},
      {"min_p", "min_p"},
      {"max_new_tokens", "max_tokens"},
      {"repetition_penalty", "repetition_penalty"}};
  for (const auto& [key, target] : kKeys) {
    if (!config.contains(key)) continue;
    if (auto p = read_sampling_field(config.at(key), target, key, out)) fail(*p);
  }
  if (config.contains("do_sample")) {
    const auto& ds = config.at("do_sample");
    if (!ds.is_boolean()) fail({"do_sample", "must be true or false"});
    if (!ds.get<bool>()) out.temperature = 0.0f;
  }
  return out;
}

SamplingOverrides load_generation_config(const std::filesystem::path& model_dir) {
  const auto path = model_dir / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {};
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(path.string() + ": malformed JSON: " + e.what());
  }
  return generation_config_overrides(config, path.string());
}

SamplingParams resolve_sampling(const SamplingLevels& levels, const SamplingOverrides& request,
                                int32_t prompt_len, int32_t max_model_len) {
  SamplingParams out;
  // Lowest level first; each set field of a later level overwrites.
  for (const SamplingOverrides* level : {&levels.generation_config, &levels.cli, &request}) {
    if (level->temperature) out.temperature = *level->temperature;
    if (level->top_p) out.top_p = *level->top_p;
    if (level->top_k) out.top_k = *level->top_k;
    if (level->min_p) out.min_p = *level->min_p;
    if (level->seed) out.seed = *level->seed;
    if (level->ignore_eos) out.ignore_eos = *level->ignore_eos;
    if (level->repetition_penalty) out.repetition_penalty = *level->repetition_penalty;
  }
  const int32_t room = std::max(0, max_model_len - prompt_len);
  if (request.max_tokens) {
    out.max_tokens = *request.max_tokens;
  } else if (levels.cli.max_tokens) {
    out.max_tokens = std::min(*levels.cli.max_tokens, room);
  } else if (levels.generation_config.max_tokens) {
    out.max_tokens = std::min(*levels.generation_config.max_tokens, room);
  } else {
    out.max_tokens = room;
  }
  return out;
}

void apply_request_only(const RequestOnlySampling& request, SamplingParams& out) {
  out.stop = request.stop;
  out.stop_token_ids = request.stop_token_ids;
  out.include_stop_str_in_output = request.include_stop_str_in_output;
  out.min_tokens = request.min_tokens;
  out.skip_special_tokens = request.skip_special_tokens;
  out.spaces_between_special_tokens = request.spaces_between_special_tokens;
  out.n = request.n;
  out.presence_penalty = request.presence_penalty;
  out.frequency_penalty = request.frequency_penalty;
  out.logit_bias = request.logit_bias;
  out.logprobs = request.logprobs;
  out.prompt_logprobs = request.prompt_logprobs;
}

}  // namespace nanovllm
