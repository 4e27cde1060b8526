// GPT-2's byte-level alphabet (the "ByteLevel" pre-tokenizer/decoder of tokenizer.json):
// each of the 256 byte values is shown as one printable code point, so every vocab entry is
// a printable string. Printable Latin-1 bytes stand for themselves; the other 68 bytes are
// numbered from U+0100 upwards in byte order.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nanovllm {

// Code point that byte b is written as. [256]
const std::array<char32_t, 256>& byte_level_alphabet();

// The byte a code point stands for, or nullopt when it is not in the alphabet.
std::optional<uint8_t> byte_level_byte(char32_t cp);

// Raw bytes behind a token string. As Hugging Face's ByteLevel decoder does, a string that
// holds any code point outside the alphabet is taken as-is (its own UTF-8 bytes).
std::string byte_level_decode_token(std::string_view token);

}  // namespace nanovllm
