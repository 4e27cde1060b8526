// Streaming decode: feed the ids of one sequence as they are generated and get the text they
// add. A multi-byte character split across tokens is held back until it is complete, so no
// piece ever ends in a broken UTF-8 sequence; bytes that can never complete are emitted as
// U+FFFD once that is certain. The concatenation of everything returned (flush included)
// equals tokenizer.decode(all ids).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "engine/tokenizer.h"

namespace nanovllm {

class IncrementalDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens);

  // Text made final by `id` (possibly empty); always valid UTF-8.
  std::string push(int32_t id);
  std::string push(std::span<const int32_t> ids);

  // At end of sequence: the held-back bytes (an unfinished character becomes U+FFFD).
  std::string flush();

  // Bytes held back waiting for the rest of a character (0 to 3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  std::string take_settled();

  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;  // raw bytes not yet emitted; only an unfinished tail stays here
};

}  // namespace nanovllm
