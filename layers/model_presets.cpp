#include "layers/model_presets.h"

#include <stdexcept>

namespace nanovllm {
namespace {

// What every Qwen3 dense config.json shares.
ModelConfig qwen3_base() {
  ModelConfig c;
  c.architecture = "Qwen3ForCausalLM";
  c.vocab_size = 151936;
  c.max_position_embeddings = 40960;
  c.rms_norm_eps = 1e-6f;
  c.rope_theta = 1000000.0f;
  c.attention_bias = false;
  c.qk_norm = true;
  c.dtype = DType::kBf16;
  c.bos_token_id = 151643;             // <|endoftext|>
  c.eos_token_ids = {151645, 151643};  // <|im_end|>, <|endoftext|>
  return c;
}

ModelConfig qwen3(int64_t hidden, int64_t inter, int64_t layers, int64_t q_heads, int64_t kv_heads,
                  int64_t head_dim, bool tied) {
  ModelConfig c = qwen3_base();
  c.hidden_size = hidden;
  c.intermediate_size = inter;
  c.num_hidden_layers = layers;
  c.num_attention_heads = q_heads;
  c.num_key_value_heads = kv_heads;
  c.head_dim = head_dim;
  c.tie_word_embeddings = tied;
  return c;
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      // Tests: full vocabulary (the real tokenizer works), everything else small.
      {"tiny", qwen3(256, 768, 4, 4, 2, 64, true)},
      // head_dim 128 (the real models' value) and a separate lm_head.
      {"tiny-128", qwen3(256, 768, 4, 8, 2, 128, false)},
      {"qwen3-0.6b", qwen3(1024, 3072, 28, 16, 8, 128, true)},
      {"qwen3-1.7b", qwen3(2048, 6144, 28, 16, 8, 128, true)},
      {"qwen3-4b", qwen3(2560, 9728, 36, 32, 8, 128, true)},
      {"qwen3-8b", qwen3(4096, 12288, 36, 32, 8, 128, false)},
      // The multi-GPU shapes: 14B fits one H100 in bf16 (29.5 GB), 32B one H200 (65.5 GB).
      {"qwen3-14b", qwen3(5120, 17408, 40, 40, 8, 128, false)},
      {"qwen3-32b", qwen3(5120, 25600, 64, 64, 8, 128, false)},
  };
  return presets;
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const auto& p : model_presets()) names.push_back(p.name);
  return names;
}

const ModelConfig& model_preset(const std::string& name) {
  for (const auto& p : model_presets())
    if (p.name == name) return p.config;
  std::string known;
  for (const auto& n : model_preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown preset '" + name + "' (known: " + known + ")");
}

}  // namespace nanovllm
