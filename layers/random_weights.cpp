#include "layers/random_weights.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/check.h"

namespace nanovllm {
namespace {

// splitmix64's finaliser: a bijective 64-bit mix with full avalanche.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t stream_key(uint64_t seed, std::string_view name) {
  return mix64(mix64(seed) ^ fnv1a(name));
}

// Sum of four 16-bit uniforms minus its mean: variance 4 * 65536^2 / 12 (approximately).
int32_t centered_sum(uint64_t key, uint64_t index) {
  const uint64_t h = mix64(key + (index + 1) * 0x9e3779b97f4a7c15ULL);
  const int32_t s = static_cast<int32_t>(h & 0xffff) + static_cast<int32_t>((h >> 16) & 0xffff) +
                    static_cast<int32_t>((h >> 32) & 0xffff) + static_cast<int32_t>(h >> 48);
  return s - 2 * 65535;
}

constexpr float kUnitScale = 1.7320508f / 65536.0f;  // sqrt(3) / 65536: std of the sum -> 1

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

// Why these scales. A model with N(0, 0.02) weights (transformers' init) gives almost
// uniform next-token distributions whose argmax flips with any rounding, and the last
// position barely depends on earlier tokens. Tests that compare two implementations need
// the opposite, so:
//  - embeddings have std 1: with the final RMSNorm output of RMS ~1, logits = h . E^T have
//    std ~sqrt(hidden) (16 for hidden 256), and the current token's own embedding, still in
//    the residual stream, gives its own logit a large structured lead. Measured with
//    transformers on the tiny preset (fp32 vs bf16): argmax agreed at 100% of positions,
//    top-1/top-2 gap >= 12 nats at 99% of positions. The price: the argmax is usually the
//    current token, so greedy continuations tend to repeat it.
//  - an untied lm_head is the embedding plus independent noise (kLmHeadNoise): still a
//    separate tensor (using the embedding instead moves logits by ~0.5 sqrt(hidden)), with
//    the same stability (random rows alone gave only 93% bf16/fp32 argmax agreement).
//  - q_norm / k_norm weights are ~kQkNormGain: each head's q and k then have RMS ~gain
//    and q.k/sqrt(d) has std ~gain^2, so attention is sharp and content-dependent:
//    changing token 1 of a prompt moved the last position's top-5 logprobs by 4-27 nats.
//  - other projections have unit gain (std 1/sqrt(fan_in)); layer norms weight ~1 with a
//    little jitter so a missing or misplaced norm weight is visible.
//  - Qwen2 biases are small (kBiasStd) but non-zero so a missing bias is visible.
constexpr float kEmbeddingStd = 1.0f;
constexpr float kLmHeadNoise = 0.5f;
constexpr float kNormJitter = 0.1f;
constexpr float kQkNormGain = 2.0f;
constexpr float kBiasStd = 0.1f;

WeightInit weight_init(const TensorSpec& spec, const ModelConfig& config) {
  (void)config;
  switch (spec.role) {
    case TensorRole::kEmbedding:
      return {0.0f, kEmbeddingStd};
    case TensorRole::kLmHead:
      return {0.0f, kLmHeadNoise};  // plus the embedding
    case TensorRole::kBias:
      return {0.0f, kBiasStd};
    case TensorRole::kNorm:
      if (ends_with(spec.name, "q_norm.weight") || ends_with(spec.name, "k_norm.weight"))
        return {kQkNormGain, kQkNormGain * kNormJitter};
      return {1.0f, kNormJitter};
    case TensorRole::kProjection: {
      CHECK_EQ(spec.shape.size(), 2u);
      const float fan_in = static_cast<float>(spec.shape[1]);
      return {0.0f, 1.0f / std::sqrt(fan_in)};
    }
  }
  return {};
}

float unit_normal(uint64_t seed, std::string_view tensor_name, uint64_t index) {
  return static_cast<float>(centered_sum(stream_key(seed, tensor_name), index)) * kUnitScale;
}

void generate_weights(const TensorSpec& spec, const ModelConfig& config, uint64_t seed,
                      uint64_t first, std::span<uint16_t> out, int threads) {
  const WeightInit init = weight_init(spec, config);
  const uint64_t key = stream_key(seed, spec.name);
  const float scale = init.std * kUnitScale;
  // lm_head = embedding + noise, element by element (same index = same [row, col]).
  const bool plus_embedding = spec.role == TensorRole::kLmHead;
  const uint64_t embed_key = stream_key(seed, "model.embed_tokens.weight");
  const float embed_scale = kEmbeddingStd * kUnitScale;
  auto fill = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      float v = static_cast<float>(centered_sum(key, first + i)) * scale + init.mean;
      if (plus_embedding) v += static_cast<float>(centered_sum(embed_key, first + i)) * embed_scale;
      out[i] = float_to_bf16(v);
    }
  };
  const size_t n = out.size();
  const size_t workers = std::clamp<size_t>(static_cast<size_t>(std::max(threads, 1)), 1,
                                            std::max<size_t>(n / (1 << 16), 1));
  std::vector<std::thread> pool;
  const size_t chunk = (n + workers - 1) / workers;
  for (size_t w = 1; w < workers; ++w)
    pool.emplace_back(fill, std::min(n, w * chunk), std::min(n, (w + 1) * chunk));
  fill(0, std::min(n, chunk));
  for (auto& t : pool) t.join();
}

}  // namespace nanovllm
