// config.json's rope scaling (transformers 4: rope_scaling; transformers 5: rope_parameters),
// read into ModelConfig::rope_scaling: plain RoPE ("default", or nothing) or YaRN with vLLM's
// meaning (the factor as given); every other rope type is refused by name.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "layers/model_config.h"

namespace nanovllm {

// rope_scaling when set (not null), else rope_parameters. YaRN fields: factor (>= 1,
// required), original_max_position_embeddings (> 0; default max_position_embeddings, as
// transformers has it), beta_fast / beta_slow (> 0), attention_factor (> 0), truncate (bool).
// Throws ModelFolderError naming config_name and the field.
std::optional<RopeScaling> parse_rope_scaling(const nlohmann::json& config,
                                              const std::string& config_name,
                                              int64_t max_position_embeddings);

}  // namespace nanovllm
