// The one error type the tokenizer throws for bad user input (text, messages) and bad
// tokenizer files. Callers catch it and report it against the request or file at hand.
#pragma once

#include <stdexcept>
#include <string>

namespace nanovllm {

struct TokenizerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace nanovllm
