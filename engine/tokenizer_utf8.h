// UTF-8 scanning shared by encode (validation), decode (lossy repair) and the incremental
// detokenizer (hold back an unfinished tail). The lossy repair follows the Unicode
// "maximal subpart" rule, which is what Rust's String::from_utf8_lossy (and so Hugging Face
// tokenizers' decode) does: each maximal invalid subpart becomes one U+FFFD.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nanovllm {

enum class Utf8Status : uint8_t {
  kValid,       // a complete well-formed sequence of `length` bytes
  kInvalid,     // a maximal invalid subpart of `length` bytes (>= 1)
  kIncomplete,  // `length` bytes that are a valid prefix cut off by the end of the buffer
};

struct Utf8Step {
  Utf8Status status;
  size_t length;
  char32_t code_point;  // meaningful for kValid only
};

// Classifies the sequence starting at text[pos] (pos < text.size()).
Utf8Step utf8_step(std::string_view text, size_t pos);

// Offset of the first byte that is not part of well-formed UTF-8, or nullopt when valid.
std::optional<size_t> find_invalid_utf8(std::string_view text);

// Appends `bytes` to `out`, each maximal invalid subpart (an unfinished tail included)
// replaced by U+FFFD.
void append_utf8_lossy(std::string_view bytes, std::string& out);

// Length of the longest prefix of `bytes` that ends outside any sequence that more bytes
// could still complete: everything before it can be emitted (repaired) now.
size_t utf8_settled_prefix(std::string_view bytes);

// Appends the UTF-8 encoding of a valid code point.
void append_utf8(char32_t cp, std::string& out);

}  // namespace nanovllm
