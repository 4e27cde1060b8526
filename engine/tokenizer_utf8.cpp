#include "engine/tokenizer_utf8.h"

namespace nanovllm {
namespace {

constexpr bool is_cont(uint8_t b) {
  return (b & 0xC0) == 0x80;
}

}  // namespace

Utf8Step utf8_step(std::string_view text, size_t pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data()) + pos;
  const size_t avail = text.size() - pos;
  const uint8_t b0 = p[0];
  if (b0 < 0x80) return {Utf8Status::kValid, 1, b0};
  size_t need;        // total bytes of the sequence
  uint8_t lo = 0x80;  // allowed range of the second byte (excludes overlongs/surrogates)
  uint8_t hi = 0xBF;
  char32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2, cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3, cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4, cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {Utf8Status::kInvalid, 1, 0};
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= avail) return {Utf8Status::kIncomplete, i, 0};
    const uint8_t b = p[i];
    const bool ok = i == 1 ? (b >= lo && b <= hi) : is_cont(b);
    if (!ok) return {Utf8Status::kInvalid, i, 0};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {Utf8Status::kValid, need, cp};
}

std::optional<size_t> find_invalid_utf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    // ASCII fast path: most text is mostly ASCII.
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Utf8Step s = utf8_step(text, pos);
    if (s.status != Utf8Status::kValid) return pos;
    pos += s.length;
  }
  return std::nullopt;
}

void append_utf8_lossy(std::string_view bytes, std::string& out) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Utf8Step s = utf8_step(bytes, pos);
    if (s.status == Utf8Status::kValid) {
      out.append(bytes.substr(pos, s.length));
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD
    }
    pos += s.length;
  }
}

size_t utf8_settled_prefix(std::string_view bytes) {
  // Only the last (up to 3) bytes can belong to a sequence that is still open.
  const size_t start = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (size_t pos = start; pos < bytes.size(); ++pos) {
    const auto b = static_cast<uint8_t>(bytes[pos]);
    if (b < 0xC2 || b > 0xF4) continue;  // not a lead byte that can open a sequence
    if (utf8_step(bytes, pos).status == Utf8Status::kIncomplete) return pos;
  }
  return bytes.size();
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace nanovllm
