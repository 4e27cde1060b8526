// The tensors a Qwen3 / Qwen2 checkpoint holds, with Hugging Face's names and shapes
// ([out_features, in_features] for projections). One list serves the writer (what to
// generate), validate_checkpoint (what to expect) and the parameter counts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layers/model_config.h"

namespace nanovllm {

enum class TensorRole : uint8_t {
  kEmbedding,   // model.embed_tokens.weight [vocab, hidden]
  kLmHead,      // lm_head.weight [vocab, hidden] (untied models only)
  kNorm,        // every RMSNorm weight (layer norms, q/k norms, final norm)
  kProjection,  // a linear weight [out, in]
  kBias,        // q/k/v bias (Qwen2)
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  TensorRole role = TensorRole::kProjection;

  int64_t numel() const;
};

// In model order: embedding, then each layer, then final norm and (untied) lm_head.
std::vector<TensorSpec> model_tensor_specs(const ModelConfig& config);

// Parameters stored in the checkpoint (a tied lm_head counted once, as the embedding).
int64_t parameter_count(const ModelConfig& config);

std::string shape_to_string(const std::vector<int64_t>& shape);

}  // namespace nanovllm
