// A completion's text as its tokens arrive, searched for the request's stop strings (vLLM's
// detokenizer + check_stop_strings): only generated text is searched, never the prompt; a
// match may span token boundaries and multi-byte characters (text is only emitted once a
// character is complete). The earliest match wins; at equal starts, the stop string listed
// first. Each search covers the new text plus a stop string's length less one before it, so
// the cost per token does not grow with the completion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/incremental_detokenizer.h"
#include "engine/sampling_params.h"
#include "engine/tokenizer.h"

namespace nanovllm {

struct StopMatch {
  size_t stop_index = 0;  // which of the request's stop strings
  size_t text_end = 0;    // the completion text ends here: before the stop string, or after it
                          // with include_stop_str_in_output
};

class StopChecker {
 public:
  // `tokenizer` must outlive this object; params.stop must not be empty.
  StopChecker(const Tokenizer& tokenizer, const SamplingParams& params);

  // Adds token_id's text. When `search` (vLLM: once more than min_tokens tokens exist),
  // returns the match the new text completes, if any; text before that point is not searched
  // again, so a stop string made complete while searching was off is not found later.
  std::optional<StopMatch> append(int32_t token_id, bool search);

  // The completion's text so far (a character still incomplete is held back).
  const std::string& text() const { return text_; }
  // The text the completion returns when `match` ended it.
  std::string text_until(const StopMatch& match) const { return text_.substr(0, match.text_end); }
  const std::string& stop_string(const StopMatch& match) const { return stops_[match.stop_index]; }

 private:
  std::vector<std::string> stops_;  // [<= kMaxStopStrings] non-empty
  bool include_stop_;
  IncrementalDetokenizer detokenizer_;
  std::string text_;
};

}  // namespace nanovllm
