// The tokenizer of a Hugging Face model folder, read from its tokenizer.json: added/special
// tokens, NFC normalizer, Split regex pre-tokenizer, byte-level BPE and the byte-level
// decoder (what Qwen2/Qwen3 use). Encode and decode give the ids and text that Hugging Face
// tokenizers gives for the same file. No Python, no network.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/bpe_model.h"
#include "engine/tokenizer_added_vocabulary.h"
#include "engine/tokenizer_error.h"
#include "engine/tokenizer_pre_tokenizer.h"

namespace nanovllm {

class Tokenizer {
 public:
  // Throws TokenizerError naming the file and the field when it cannot be read or uses a
  // component this tokenizer does not implement.
  static Tokenizer from_file(const std::string& path);
  // `source` names the JSON in error messages.
  static Tokenizer from_json(const nlohmann::json& json, const std::string& source);

  // Ids of `text` (special tokens written inline are recognised; no BOS/EOS is added).
  // Throws TokenizerError with the byte offset when `text` is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text) const;

  // Text of `ids`; byte sequences that are not valid UTF-8 become U+FFFD, unknown ids are
  // skipped, and special tokens are dropped when skip_special_tokens.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // One past the largest id, added tokens included.
  int32_t vocab_size() const { return static_cast<int32_t>(token_bytes_.size()); }
  std::optional<int32_t> token_to_id(std::string_view token) const;
  bool is_special(int32_t id) const;

  // Appends the raw bytes id stands for (nothing for unknown ids, or special ones when
  // skip_special_tokens). The building block of decode and of incremental decoding.
  void append_token_bytes(int32_t id, bool skip_special_tokens, std::string& out) const;

 private:
  Tokenizer(BpeModel bpe, RegexSplitter splitter, bool nfc, AddedVocabulary added);
  void encode_segment(std::string_view text, std::vector<int32_t>& out) const;

  BpeModel bpe_;
  RegexSplitter splitter_;
  bool nfc_;  // normalizer is NFC (else none)
  AddedVocabulary added_;
  std::vector<std::string> token_bytes_;  // raw bytes of each id; [vocab_size]
  std::vector<uint8_t> special_;          // 1 for special added tokens; [vocab_size]
};

}  // namespace nanovllm
