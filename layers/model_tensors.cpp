#include "layers/model_tensors.h"

namespace nanovllm {

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<TensorSpec> model_tensor_specs(const ModelConfig& c) {
  const int64_t h = c.hidden_size;
  std::vector<TensorSpec> specs;
  specs.push_back({"model.embed_tokens.weight", {c.vocab_size, h}, TensorRole::kEmbedding});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    specs.push_back({p + "input_layernorm.weight", {h}, TensorRole::kNorm});
    specs.push_back({p + "self_attn.q_proj.weight", {c.q_size(), h}, TensorRole::kProjection});
    specs.push_back({p + "self_attn.k_proj.weight", {c.kv_size(), h}, TensorRole::kProjection});
    specs.push_back({p + "self_attn.v_proj.weight", {c.kv_size(), h}, TensorRole::kProjection});
    if (c.attention_bias) {
      specs.push_back({p + "self_attn.q_proj.bias", {c.q_size()}, TensorRole::kBias});
      specs.push_back({p + "self_attn.k_proj.bias", {c.kv_size()}, TensorRole::kBias});
      specs.push_back({p + "self_attn.v_proj.bias", {c.kv_size()}, TensorRole::kBias});
    }
    specs.push_back({p + "self_attn.o_proj.weight", {h, c.q_size()}, TensorRole::kProjection});
    if (c.qk_norm) {
      specs.push_back({p + "self_attn.q_norm.weight", {c.head_dim}, TensorRole::kNorm});
      specs.push_back({p + "self_attn.k_norm.weight", {c.head_dim}, TensorRole::kNorm});
    }
    specs.push_back({p + "post_attention_layernorm.weight", {h}, TensorRole::kNorm});
    specs.push_back(
        {p + "mlp.gate_proj.weight", {c.intermediate_size, h}, TensorRole::kProjection});
    specs.push_back({p + "mlp.up_proj.weight", {c.intermediate_size, h}, TensorRole::kProjection});
    specs.push_back(
        {p + "mlp.down_proj.weight", {h, c.intermediate_size}, TensorRole::kProjection});
  }
  specs.push_back({"model.norm.weight", {h}, TensorRole::kNorm});
  if (!c.tie_word_embeddings)
    specs.push_back({"lm_head.weight", {c.vocab_size, h}, TensorRole::kLmHead});
  return specs;
}

int64_t parameter_count(const ModelConfig& config) {
  int64_t n = 0;
  for (const TensorSpec& s : model_tensor_specs(config)) n += s.numel();
  return n;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace nanovllm
