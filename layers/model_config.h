// The model's hyper-parameters, read from a Hugging Face folder's config.json (and the
// eos_token_id of generation_config.json when present; its sampling defaults are read by
// engine/sampling_defaults.h). Only dense Qwen3 / Qwen2 decoders are accepted;
// anything that would change the math and that we do not implement (rope scaling, MoE,
// quantization, sliding window) is refused with a "not supported" error instead of
// producing a silently wrong model.
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

struct ModelConfig {
  std::string architecture;  // "Qwen3ForCausalLM" or "Qwen2ForCausalLM"
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_hidden_layers = 0,
          num_attention_heads = 0, num_key_value_heads = 0, head_dim = 0,
          max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  float rope_theta = 1e6f;
  bool tie_word_embeddings = false;
  bool attention_bias = false;          // q/k/v projections have bias (Qwen2)
  bool qk_norm = true;                  // per-head q_norm/k_norm (Qwen3)
  DType dtype = DType::kBf16;           // torch_dtype / dtype
  std::vector<int32_t> eos_token_ids;   // generation_config.json eos_token_id, else config.json
  std::optional<int32_t> bos_token_id;  // config.json, when present

  int64_t q_size() const { return num_attention_heads * head_dim; }   // q_proj rows
  int64_t kv_size() const { return num_key_value_heads * head_dim; }  // k_proj / v_proj rows
};

// Reads <model_dir>/config.json and, when present, <model_dir>/generation_config.json (for
// eos_token_id only). Throws ModelFolderError naming the file and the field.
ModelConfig load_model_config(const std::filesystem::path& model_dir);

// The same from already-parsed JSON; config_name / generation_name are used in messages.
// generation may be null (no generation_config.json).
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& config_name,
                               const nlohmann::json* generation,
                               const std::string& generation_name);

// Reads a JSON file; a missing file or a syntax error throws ModelFolderError naming the
// file (and line/column from the parser).
nlohmann::json read_json_file(const std::filesystem::path& path);

}  // namespace nanovllm
