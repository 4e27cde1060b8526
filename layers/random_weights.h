// Deterministic pseudo-random weights for a model's tensors. Element i of tensor `name` is
// a function of (seed, hash(name), i) only (counter-based hashing), so any number of
// threads, any shard layout and any machine give the same bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "layers/model_config.h"
#include "layers/model_tensors.h"

namespace nanovllm {

// mean + std * N(0,1)-ish for one tensor. Chosen so that the random model behaves like a
// trained one where tests need it (see the comment in model_writer.cpp).
struct WeightInit {
  float mean = 0.0f;
  float std = 1.0f;
};
WeightInit weight_init(const TensorSpec& spec, const ModelConfig& config);

// Approximately N(0, 1) (Irwin-Hall of four 16-bit uniforms, |x| <= 3.47), exactly
// reproducible: integer hashing and one int->float conversion.
float unit_normal(uint64_t seed, std::string_view tensor_name, uint64_t index);

// Fills out[i] = bf16(mean + std * unit_normal(seed, spec.name, first + i)); an lm_head
// also adds the embedding's element first + i (see weight_init's comment).
void generate_weights(const TensorSpec& spec, const ModelConfig& config, uint64_t seed,
                      uint64_t first, std::span<uint16_t> out, int threads);

}  // namespace nanovllm
