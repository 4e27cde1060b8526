// Added tokens of tokenizer.json (<|im_start|>, <think>, ...). Encode finds them in the raw
// text before normalization and BPE, taking the leftmost match and, among matches starting
// there, the longest, as Hugging Face's AddedVocabulary does.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nanovllm {

struct AddedToken {
  std::string content;
  int32_t id;
  bool special;  // dropped by decode(skip_special_tokens=true)
};

struct AddedTokenMatch {
  size_t start;  // byte offset in the text
  const AddedToken* token;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  explicit AddedVocabulary(std::vector<AddedToken> tokens);

  // The first added token occurring at or after pos, longest first among equal starts.
  std::optional<AddedTokenMatch> find(std::string_view text, size_t pos) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  std::vector<AddedToken> tokens_;  // sorted by content length, longest first
  std::array<bool, 256> starts_{};  // whether any token starts with this byte
};

}  // namespace nanovllm
