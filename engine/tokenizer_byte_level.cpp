#include "engine/tokenizer_byte_level.h"

#include "engine/tokenizer_utf8.h"

namespace nanovllm {
namespace {

constexpr bool stands_for_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

std::array<char32_t, 256> make_alphabet() {
  std::array<char32_t, 256> a{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) a[b] = stands_for_itself(b) ? char32_t(b) : next++;
  return a;
}

// Inverse of the alphabet over U+0000..U+01FF (every alphabet code point is below U+0144).
// -1 marks code points outside the alphabet. [512]
std::array<int16_t, 512> make_inverse() {
  std::array<int16_t, 512> inv;
  inv.fill(-1);
  const auto& a = byte_level_alphabet();
  for (int b = 0; b < 256; ++b) inv[a[b]] = static_cast<int16_t>(b);
  return inv;
}

}  // namespace

const std::array<char32_t, 256>& byte_level_alphabet() {
  static const std::array<char32_t, 256> alphabet = make_alphabet();
  return alphabet;
}

std::optional<uint8_t> byte_level_byte(char32_t cp) {
  static const std::array<int16_t, 512> inverse = make_inverse();
  if (cp >= inverse.size() || inverse[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(inverse[cp]);
}

std::string byte_level_decode_token(std::string_view token) {
  std::string bytes;
  size_t pos = 0;
  while (pos < token.size()) {
    const Utf8Step s = utf8_step(token, pos);
    const auto b = s.status == Utf8Status::kValid ? byte_level_byte(s.code_point) : std::nullopt;
    if (!b) return std::string(token);
    bytes.push_back(static_cast<char>(*b));
    pos += s.length;
  }
  return bytes;
}

}  // namespace nanovllm
