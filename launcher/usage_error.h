// A usage or configuration error (exit status 2), as opposed to a failure of the environment
// (exit status 1): a bad flag, a flag that does not fit the model, an unusable model folder.
#pragma once

#include <stdexcept>

namespace nanovllm {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr int kExitUsage = 2;

}  // namespace nanovllm
