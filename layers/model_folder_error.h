// The one error type for everything wrong with a model folder on disk (config.json,
// generation_config.json, safetensors files, the shard index): user input, so it is
// reported with the file and the field or tensor, never asserted.
#pragma once

#include <stdexcept>

namespace nanovllm {

struct ModelFolderError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace nanovllm
