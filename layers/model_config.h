// The model's hyper-parameters, read from a Hugging Face folder's config.json (and the
// eos_token_id of generation_config.json when present; its sampling defaults are read by
// engine/sampling_defaults.h). Only dense Qwen3 / Qwen2 decoders are accepted;
// anything that would change the math and that we do not implement (MoE,
// quantization, sliding window, rope types other than default and YaRN) is refused with a
// "not supported" error instead of producing a silently wrong model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernels/tensor.h"
#include "layers/model_folder_error.h"

namespace nanovllm {

// YaRN rope scaling (config.json rope_scaling, or rope_parameters in transformers 5, with
// rope_type "yarn"), vLLM's meaning: the factor as given.
struct RopeScaling {
  double factor = 1.0;                           // > 1
  int64_t original_max_position_embeddings = 0;  // > 0
  double beta_fast = 32.0, beta_slow = 1.0;      // the correction range's rotations
  std::optional<double> attention_factor;        // unset: 0.1 ln(factor) + 1
  bool truncate = true;                          // floor/ceil the correction range
};

struct ModelConfig {
  std::string architecture;  // "Qwen3ForCausalLM" or "Qwen2ForCausalLM"
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_hidden_layers = 0,
          num_attention_heads = 0, num_key_value_heads = 0, head_dim = 0,
          max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  float rope_theta = 1e6f;
  std::optional<RopeScaling> rope_scaling;  // unset: plain RoPE
  bool tie_word_embeddings = false;
  bool attention_bias = false;          // q/k/v projections have bias (Qwen2)
  bool qk_norm = true;                  // per-head q_norm/k_norm (Qwen3)
  DType dtype = DType::kBf16;           // torch_dtype / dtype
  std::vector<int32_t> eos_token_ids;   // generation_config.json eos_token_id, else config.json
  std::optional<int32_t> bos_token_id;  // config.json, when present

  // The longest context the model is meant for: original_max_position_embeddings x factor
  // with YaRN, else max_position_embeddings (0: unknown).
  int64_t max_context_len() const {
    if (rope_scaling)
      return static_cast<int64_t>(
          static_cast<double>(rope_scaling->original_max_position_embeddings) *
          rope_scaling->factor);
    return max_position_embeddings;
  }
  int64_t q_size() const { return num_attention_heads * head_dim; }   // q_proj rows
  int64_t kv_size() const { return num_key_value_heads * head_dim; }  // k_proj / v_proj rows
};

// Reads <model_dir>/config.json and, when present, <model_dir>/generation_config.json (for
// eos_token_id only). Throws ModelFolderError naming the file and the field. overrides (a JSON
// object, vLLM's --hf-overrides): its top-level keys replace config.json's before parsing.
ModelConfig load_model_config(const std::filesystem::path& model_dir,
                              const nlohmann::json* overrides = nullptr);

// The same from already-parsed JSON; config_name / generation_name are used in messages.
// generation may be null (no generation_config.json).
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& config_name,
                               const nlohmann::json* generation,
                               const std::string& generation_name);

// Reads a JSON file; a missing file or a syntax error throws ModelFolderError naming the
// file (and line/column from the parser).
nlohmann::json read_json_file(const std::filesystem::path& path);

}  // namespace nanovllm
