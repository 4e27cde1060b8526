#pragma once

#include "kernels/exec_context.h"
#include "kernels/tensor.h"

namespace nanovllm::kernels {

// The smallest temperature that samples (vLLM's rule): (0, kMinTemperature) is raised to it,
// since logits / 1e-38 overflow to inf and the row's draw becomes garbage.
inline constexpr float kMinTemperature = 0.01f;
__host__ __device__ constexpr float effective_temperature(float t) {
  return t > 0.0f && t < kMinTemperature ? kMinTemperature : t;
}

// One token per row of logits. Row b:
//   temperature[b] == 0: greedy argmax (lowest index wins ties).
//   otherwise: l = logits / effective_temperature(temperature[b]); keep the top_k largest (top_k <=
//   0: all); keep the smallest prefix of the descending-sorted rest whose softmax mass reaches
//   top_p; drop tokens whose probability < min_p * max probability; then Gumbel-max: argmax over
//   kept v of l[v] + g(v), g(v) = -log(-log(u(v))), where u(v) = uniform in (0,1) from
//   Philox4x32-10 with key = seeds[b] (lo, hi 32 bits) and counter = (v, positions[b], 0, 0), first
//   output word x mapped as (x + 0.5) / 2^32. The draw depends only on (seed, position, v), never
//   on the batch.
struct SamplingBatch {
  TensorView logits;        // [B, V] f32 (full vocabulary, gathered on rank 0)
  TensorView temperatures;  // [B] f32
  TensorView top_k;         // [B] i32
  TensorView top_p;         // [B] f32
  TensorView min_p;         // [B] f32
  TensorView seeds;         // [B] i64 (bit pattern of a u64)
  TensorView positions;     // [B] i32, index of the token being sampled in its sequence
  TensorView out_tokens;    // [B] i32
};

namespace cpu {
void sample(const SamplingBatch& b);
}
namespace cuda {
void sample(const SamplingBatch& b, cudaStream_t stream);
}

inline void sample(const SamplingBatch& b, const ExecContext& ctx) {
  if (b.logits.on_cpu())
    cpu::sample(b);
  else
    cuda::sample(b, ctx.stream);
}

}  // namespace nanovllm::kernels
