#include "engine/tokenizer.h"

#include <cstdio>

#include "engine/tokenizer_byte_level.h"
#include "engine/tokenizer_normalizer.h"
#include "engine/tokenizer_utf8.h"

namespace nanovllm {

Tokenizer::Tokenizer(BpeModel bpe, RegexSplitter splitter, bool nfc, AddedVocabulary added)
    : bpe_(std::move(bpe)), splitter_(std::move(splitter)), nfc_(nfc), added_(std::move(added)) {
  int32_t limit = bpe_.id_limit();
  for (const AddedToken& t : added_.tokens()) limit = std::max(limit, t.id + 1);
  token_bytes_.resize(limit);
  special_.assign(limit, 0);
  for (int32_t id = 0; id < bpe_.id_limit(); ++id) {
    token_bytes_[id] = byte_level_decode_token(bpe_.id_to_token(id));
  }
  // The decoder sees an added token's content like any token string.
  for (const AddedToken& t : added_.tokens()) {
    token_bytes_[t.id] = byte_level_decode_token(t.content);
    special_[t.id] = t.special;
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  if (const auto bad = find_invalid_utf8(text)) {
    char byte[8];
    std::snprintf(byte, sizeof(byte), "0x%02X", static_cast<unsigned>(uint8_t(text[*bad])));
    throw TokenizerError("text is not valid UTF-8: byte " + std::to_string(*bad) + " (" + byte +
                         ") does not start or continue a well-formed sequence");
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  size_t pos = 0;
  while (pos < text.size()) {
    const auto match = added_.find(text, pos);
    const size_t segment_end = match ? match->start : text.size();
    encode_segment(text.substr(pos, segment_end - pos), ids);
    if (!match) break;
    ids.push_back(match->token->id);
    pos = match->start + match->token->content.size();
  }
  return ids;
}

// Normalize and pre-tokenize one stretch between added tokens: regex lookarounds never see
// across an added token, as in Hugging Face's pipeline.
void Tokenizer::encode_segment(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::string normalized;
  if (nfc_ && !nfc_fast_path(text)) {
    normalized = nfc_normalize(text);
    text = normalized;
  }
  splitter_.split(text, [&](std::string_view word) { bpe_.tokenize(word, out); });
}

void Tokenizer::append_token_bytes(int32_t id, bool skip_special_tokens, std::string& out) const {
  if (id < 0 || id >= vocab_size()) return;
  if (skip_special_tokens && special_[id]) return;
  out += token_bytes_[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (const int32_t id : ids) append_token_bytes(id, skip_special_tokens, bytes);
  std::string text;
  text.reserve(bytes.size());
  append_utf8_lossy(bytes, text);
  return text;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  for (const AddedToken& t : added_.tokens()) {
    if (t.content == token) return t.id;
  }
  return bpe_.token_to_id(token);
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && special_[id];
}

}  // namespace nanovllm
