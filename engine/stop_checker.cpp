#include "engine/stop_checker.h"

#include <algorithm>

#include "kernels/check.h"

namespace nanovllm {

StopChecker::StopChecker(const Tokenizer& tokenizer, const SamplingParams& params)
    : stops_(params.stop),
      include_stop_(params.include_stop_str_in_output),
      detokenizer_(tokenizer, params.skip_special_tokens) {
  CHECK(!stops_.empty());
  for (const std::string& s : stops_) CHECK(!s.empty());
}

std::optional<StopMatch> StopChecker::append(int32_t token_id, bool search) {
  const size_t old_size = text_.size();
  text_ += detokenizer_.push(token_id);
  if (!search || text_.size() == old_size) return std::nullopt;
  std::optional<StopMatch> best;
  size_t best_start = 0;
  for (size_t i = 0; i < stops_.size(); ++i) {
    // A match must end in the new text, so it starts at most size - 1 bytes before it.
    const size_t from = old_size - std::min(old_size, stops_[i].size() - 1);
    const size_t start = text_.find(stops_[i], from);
    if (start == std::string::npos || (best && start >= best_start)) continue;
    best_start = start;
    best = StopMatch{i, include_stop_ ? start + stops_[i].size() : start};
  }
  return best;
}

}  // namespace nanovllm
