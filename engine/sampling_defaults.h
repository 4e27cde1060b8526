// Sampling settings come from three levels, lowest first: the model's
// generation_config.json, the command-line flags, then each request's own fields.
// A set field of a higher level wins; max_tokens defaults to the rest of the context.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "engine/request.h"
#include "engine/sampling_params.h"

namespace nanovllm {

// A bad value: the field's name as the user wrote it and what is wrong with it.
struct FieldProblem {
  std::string field;
  std::string message;
};

// The two levels below the request.
struct SamplingLevels {
  SamplingOverrides generation_config;
  SamplingOverrides cli;
};

// Stores one JSON value into the overrides field named `target` (one of max_tokens,
// temperature, top_p, top_k, min_p, seed, ignore_eos, repetition_penalty), checking its JSON
// type and range.
// `field` is the name reported in a problem (the user's spelling, e.g. "body.top_p").
// A JSON null leaves the field unset (OpenAI clients send explicit nulls).
std::optional<FieldProblem> read_sampling_field(const nlohmann::json& value,
                                                std::string_view target, std::string field,
                                                SamplingOverrides& out);

// Range checks of every set field (the command line uses this for its flags).
// Field names in problems are the SamplingOverrides member names.
std::optional<FieldProblem> check_sampling_overrides(const SamplingOverrides& values);

// Defaults from a generation_config.json object: temperature, top_p, top_k, min_p,
// repetition_penalty (vLLM reads it there too), max_new_tokens (-> max_tokens), and
// do_sample == false (-> temperature 0, greedy, as transformers' generate() does), checked
// as the command line's and requests' are. This is the one reader of the file's sampling
// settings; its eos_token_id is the model's (read with config.json by the launcher, into
// EngineConfig::eos_token_ids). Other keys are ignored.
// Throws std::runtime_error naming `source` and the field on a bad value.
SamplingOverrides generation_config_overrides(const nlohmann::json& config,
                                              std::string_view source);
// Reads <model_dir>/generation_config.json; a missing file means no defaults.
// Throws std::runtime_error naming the file on unreadable or malformed JSON.
SamplingOverrides load_generation_config(const std::filesystem::path& model_dir);

// Merges the levels over SamplingParams' built-in defaults. max_tokens: the request's own
// value as given (validation rejects one that does not fit the context), else the lower
// levels' value capped to the room left, else the room left (max_model_len - prompt_len).
SamplingParams resolve_sampling(const SamplingLevels& levels, const SamplingOverrides& request,
                                int32_t prompt_len, int32_t max_model_len);

// Copies the request-only fields (stop strings and ids, min_tokens, detokenization flags, n,
// presence / frequency penalties, logit_bias, logprobs, prompt_logprobs) into resolved
// parameters; no lower level sets them, so the request's values (or
// SamplingParams' defaults, which RequestOnlySampling's mirror) are final.
void apply_request_only(const RequestOnlySampling& request, SamplingParams& out);

}  // namespace nanovllm
