#include "engine/tokenizer_added_vocabulary.h"

#include <algorithm>

namespace nanovllm {

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  std::erase_if(tokens_, [](const AddedToken& t) { return t.content.empty(); });
  std::stable_sort(tokens_.begin(), tokens_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  for (const AddedToken& t : tokens_) starts_[static_cast<uint8_t>(t.content[0])] = true;
}

std::optional<AddedTokenMatch> AddedVocabulary::find(std::string_view text, size_t pos) const {
  if (tokens_.empty()) return std::nullopt;
  for (size_t i = pos; i < text.size(); ++i) {
    if (!starts_[static_cast<uint8_t>(text[i])]) continue;
    const std::string_view rest = text.substr(i);
    for (const AddedToken& t : tokens_) {
      if (rest.starts_with(t.content)) return AddedTokenMatch{i, &t};
    }
  }
  return std::nullopt;
}

}  // namespace nanovllm
