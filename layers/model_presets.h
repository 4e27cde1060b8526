// Named model shapes for nanovllm-mkmodel: the real Qwen3 dense models (exact
// hyper-parameters of the published config.json files) and two tiny ones for tests.
#pragma once

#include <string>
#include <vector>

#include "layers/model_config.h"

namespace nanovllm {

struct ModelPreset {
  std::string name;
  ModelConfig config;
};

// tiny, tiny-128, qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b.
const std::vector<ModelPreset>& model_presets();
std::vector<std::string> model_preset_names();

// Throws std::invalid_argument listing the known names.
const ModelConfig& model_preset(const std::string& name);

}  // namespace nanovllm
