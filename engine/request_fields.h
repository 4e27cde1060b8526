// Field-level helpers shared by the native and OpenAI batch readers of prompts.jsonl:
// each returns a FieldProblem naming the offending field (a dotted path) instead of
// throwing, so one bad line becomes one error result.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampling_defaults.h"

namespace nanovllm {

// "prefix.key", or "key" when prefix is empty.
std::string join_field(std::string_view prefix, std::string_view key);

// Levenshtein distance (byte-wise); used to suggest the field a typo meant.
size_t edit_distance(std::string_view a, std::string_view b);
// The known field closest to `key`, if it is close enough to be a plausible typo.
std::optional<std::string_view> closest_field(std::string_view key,
                                              std::span<const std::string_view> known);
// First key of `object` in neither `known` nor `also_accepted`: "unknown field 'x' (did you
// mean 'y'?)". Only `known` is suggested or listed (`also_accepted` holds the names read
// only to be refused, see refused_request_fields).
std::optional<FieldProblem> check_known_fields(
    const nlohmann::json& object, std::span<const std::string_view> known, std::string_view prefix,
    std::span<const std::string_view> also_accepted = {});

// Byte offset of the first invalid UTF-8 sequence in `text`, if any.
std::optional<size_t> invalid_utf8_offset(std::string_view text);
// The dotted path of the JSON string that covers byte `offset` of the (possibly
// malformed) JSON text `text`, e.g. "messages[1].content"; "" when it is in no value.
std::string json_path_at(std::string_view text, size_t offset);

// A non-empty string field.
std::optional<FieldProblem> read_nonempty_string(const nlohmann::json& v, std::string field,
                                                 std::string& out);
// A non-empty array of integers in int32 range (the vocabulary is checked later).
std::optional<FieldProblem> read_token_ids(const nlohmann::json& v, std::string field,
                                           std::vector<int32_t>& out);
// A non-empty array of {role: system|user|assistant, content: string or text parts}.
// Text parts ([{type: "text", text}], OpenAI style) are joined with "\n" as vLLM does;
// the result keeps only role and content so the chat template sees plain strings.
std::optional<FieldProblem> read_messages(const nlohmann::json& v, std::string field,
                                          nlohmann::json& out);

}  // namespace nanovllm
