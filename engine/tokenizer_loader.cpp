// Reading tokenizer.json into a Tokenizer. Only the components Qwen2/Qwen3 tokenizers use are
// accepted; anything else is refused with the field that names it, rather than being
// silently tokenized differently from Hugging Face.
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/tokenizer.h"

namespace nanovllm {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& field,
                       const std::string& what) {
  throw TokenizerError(source + ": field '" + field + "': " + what);
}

const json& member(const json& j, const char* key, const std::string& source,
                   const std::string& path) {
  if (!j.is_object() || !j.contains(key)) fail(source, path + "." + key, "missing");
  return j.at(key);
}

// A falsy optional setting ("", null, false or absent) is the only value we implement.
void expect_unset(const json& j, const char* key, const std::string& source,
                  const std::string& path) {
  if (!j.contains(key)) return;
  const json& v = j.at(key);
  const bool unset = v.is_null() || (v.is_string() && v.get<std::string>().empty()) ||
                     (v.is_boolean() && !v.get<bool>());
  if (!unset) fail(source, path + "." + key, "value " + v.dump() + " is not supported");
}

std::string parse_split_pattern(const json& split, const std::string& source,
                                const std::string& path) {
  const json& pattern = member(split, "pattern", source, path);
  if (!pattern.is_object() || !pattern.contains("Regex") || !pattern["Regex"].is_string()) {
    fail(source, path + ".pattern", "only {\"Regex\": \"...\"} patterns are supported");
  }
  if (split.value("behavior", std::string()) != "Isolated") {
    fail(source, path + ".behavior", "only \"Isolated\" is supported");
  }
  expect_unset(split, "invert", source, path);
  return pattern["Regex"].get<std::string>();
}

// Sequence[Split(regex, Isolated), ByteLevel(use_regex=false)]: returns the regex.
std::string parse_pre_tokenizer(const json& pre, const std::string& source) {
  const std::string path = "pre_tokenizer";
  if (member(pre, "type", source, path) != "Sequence") {
    fail(source, path + ".type", "only a Sequence of Split and ByteLevel is supported");
  }
  const json& steps = member(pre, "pretokenizers", source, path);
  if (!steps.is_array() || steps.size() != 2) {
    fail(source, path + ".pretokenizers", "expected [Split, ByteLevel]");
  }
  const std::string split_path = path + ".pretokenizers[0]";
  const std::string byte_path = path + ".pretokenizers[1]";
  if (steps[0].value("type", std::string()) != "Split") fail(source, split_path, "expected Split");
  if (steps[1].value("type", std::string()) != "ByteLevel") {
    fail(source, byte_path, "expected ByteLevel");
  }
  expect_unset(steps[1], "add_prefix_space", source, byte_path);
  expect_unset(steps[1], "use_regex", source, byte_path);
  return parse_split_pattern(steps[0], source, split_path);
}

BpeModel parse_model(const json& model, const std::string& source) {
  const std::string path = "model";
  if (member(model, "type", source, path) != "BPE") fail(source, path + ".type", "expected BPE");
  for (const char* key : {"dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                          "byte_fallback", "ignore_merges"}) {
    expect_unset(model, key, source, path);
  }
  const json& vocab_json = member(model, "vocab", source, path);
  if (!vocab_json.is_object()) fail(source, path + ".vocab", "expected an object");
  std::vector<std::pair<std::string, int32_t>> vocab;
  vocab.reserve(vocab_json.size());
  for (const auto& [token, id] : vocab_json.items()) {
    if (!id.is_number_integer())
      fail(source, path + ".vocab[" + token + "]", "id is not an integer");
    vocab.emplace_back(token, id.get<int32_t>());
  }
  const json& merges_json = member(model, "merges", source, path);
  if (!merges_json.is_array()) fail(source, path + ".merges", "expected an array");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(merges_json.size());
  for (size_t i = 0; i < merges_json.size(); ++i) {
    const json& m = merges_json[i];
    // Two spellings exist: "left right" (older files) and ["left", "right"].
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        fail(source, path + ".merges[" + std::to_string(i) + "]", "expected \"left right\"");
      }
      merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      fail(source, path + ".merges[" + std::to_string(i) + "]", "expected a pair of strings");
    }
  }
  try {
    return BpeModel(vocab, merges);
  } catch (const TokenizerError& e) {
    throw TokenizerError(source + ": model: " + e.what());
  }
}

AddedVocabulary parse_added_tokens(const json& j, const std::string& source) {
  std::vector<AddedToken> tokens;
  if (!j.contains("added_tokens") || j["added_tokens"].is_null()) return AddedVocabulary();
  const json& list = j["added_tokens"];
  if (!list.is_array()) fail(source, "added_tokens", "expected an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = "added_tokens[" + std::to_string(i) + "]";
    const json& t = list[i];
    const json& content = member(t, "content", source, path);
    const json& id = member(t, "id", source, path);
    if (!content.is_string() || !id.is_number_integer() || id.get<int64_t>() < 0) {
      fail(source, path, "expected a string content and a non-negative integer id");
    }
    for (const char* key : {"lstrip", "rstrip", "single_word"}) expect_unset(t, key, source, path);
    // normalized=true tokens are matched in the raw text too; for NFC-stable contents (all
    // ASCII ones) that is the same thing.
    tokens.push_back({content.get<std::string>(), id.get<int32_t>(), t.value("special", false)});
  }
  return AddedVocabulary(std::move(tokens));
}

}  // namespace

Tokenizer Tokenizer::from_json(const json& j, const std::string& source) {
  if (!j.is_object()) fail(source, "(root)", "expected a JSON object");
  bool nfc = false;
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    if (j["normalizer"].value("type", std::string()) != "NFC") {
      fail(source, "normalizer.type", "only NFC (or null) is supported");
    }
    nfc = true;
  }
  const std::string pattern = parse_pre_tokenizer(member(j, "pre_tokenizer", source, ""), source);
  const json& decoder = member(j, "decoder", source, "");
  if (decoder.value("type", std::string()) != "ByteLevel") {
    fail(source, "decoder.type", "only ByteLevel is supported");
  }
  BpeModel bpe = parse_model(member(j, "model", source, ""), source);
  AddedVocabulary added = parse_added_tokens(j, source);
  try {
    return Tokenizer(std::move(bpe), RegexSplitter(pattern), nfc, std::move(added));
  } catch (const TokenizerError& e) {
    throw TokenizerError(source + ": " + e.what());
  }
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw TokenizerError("cannot open the tokenizer file " + path + ": " + std::strerror(errno));
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    throw TokenizerError(path + ": not valid JSON: " + e.what());
  }
  try {
    Tokenizer t = from_json(j, path);
    spdlog::debug("tokenizer: loaded {} ({} ids)", path, t.vocab_size());
    return t;
  } catch (const json::exception& e) {
    throw TokenizerError(path + ": unexpected value type: " + e.what());
  }
}

}  // namespace nanovllm
