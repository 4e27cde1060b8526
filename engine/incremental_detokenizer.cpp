#include "engine/incremental_detokenizer.h"

#include "engine/tokenizer_utf8.h"

namespace nanovllm {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  tokenizer_->append_token_bytes(id, skip_special_tokens_, pending_);
  return take_settled();
}

std::string IncrementalDetokenizer::push(std::span<const int32_t> ids) {
  for (const int32_t id : ids) tokenizer_->append_token_bytes(id, skip_special_tokens_, pending_);
  return take_settled();
}

std::string IncrementalDetokenizer::flush() {
  std::string text;
  append_utf8_lossy(pending_, text);
  pending_.clear();
  return text;
}

// Repairing the settled prefix alone gives the same text as repairing the whole stream later:
// a maximal invalid subpart never extends past a point where no sequence is open.
std::string IncrementalDetokenizer::take_settled() {
  const size_t settled = utf8_settled_prefix(pending_);
  std::string text;
  append_utf8_lossy(std::string_view(pending_).substr(0, settled), text);
  pending_.erase(0, settled);
  return text;
}

}  // namespace nanovllm
