// The sampler: one token per row of logits, with per-slot parameters that stay on the device
// (the step command names each row's slot; kernels/sampler_math.h holds the arithmetic both
// backends share, so they agree token for token).
//
// Row b, slot s = slots[b] (< 0: a padding row, out_tokens[b] = 0 and nothing else written):
//   0. min_tokens, before every rule below (greedy rows included): when
//      positions[b] + 1 < min_tokens_position[s], the logit of each id in
//      min_tokens_masked_ids[s, :] counts as -inf (entries outside [0, V) are padding). The
//      CUDA sampler writes those -inf into the logits rows in place (the buffer is its input
//      and is not read after it); the CPU reference works on a copy of the row.
//   temperature[s] == 0: greedy argmax over the raw logits (lowest id wins ties).
//   otherwise l = logits / effective_temperature(temperature[s]) (-0 counts as +0), ordered by
//   (l descending, id ascending): the candidates are
//     1. the first top_k[s] of that order (no cut when top_k <= 0 or >= V);
//     2. of those, the shortest prefix whose mass reaches top_p_target(top_p[s], total), where
//        a token's mass is sampler_mass(l - l_max) and total sums the masses of step 1's
//        candidates (no cut when top_p >= 1);
//     3. of those, the ones with sampler_exp(l - l_max) >= min_p[s], plus the first (no cut
//        when min_p <= 0);
//   then Gumbel-max over the candidates: argmax of l[v] + g(v), lowest id on ties, where
//   g(v) = gumbel_from_bits(sampler_random_bits(seeds[s], v, positions[b] + 1)).
//   The draw depends only on (seed, position, v), never on the batch or the slot.
// last_tokens[s] (when given) receives row b's token: the per-slot buffer a later decode step
// can read its input from (two live rows naming one slot: either row's token lands there).
// slots[b] must be < N: the CUDA kernel traps otherwise (rank 0's allocator is broken).
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

// Sampling parameters per slot, [N] each (N = the runner's max_num_seqs).
struct SamplingSlotParams {
  TensorView temperatures;  // [N] f32
  TensorView top_k;         // [N] i32
  TensorView top_p;         // [N] f32
  TensorView min_p;         // [N] f32
  TensorView seeds;         // [N] i64 (bit pattern of a u64)
  // min_tokens (rule 0 above); both empty = nothing masked anywhere. A slot that masks nothing
  // has min_tokens_position <= 0 (its row of ids is then never read).
  TensorView min_tokens_position;    // [N] i32
  TensorView min_tokens_masked_ids;  // [N, M] i32, rows padded with -1
};

struct SamplingBatch {
  TensorView logits;     // [B, V] f32 (full vocabulary, gathered on rank 0); rows may be strided
  TensorView slots;      // [B] i32, row b's slot; < 0 = padding
  TensorView positions;  // [B] i32, position of the token whose logits row b holds
  SamplingSlotParams params;
  TensorView out_tokens;   // [B] i32
  TensorView last_tokens;  // [N] i32, written at each live row's slot; may be empty
  // Benchmark instrumentation, may be empty: [B] i32, full reads of row b's logits.
  TensorView row_passes;
};

namespace cpu {
void sample(const SamplingBatch& b);
}
namespace cuda {
// No allocation, no host synchronisation, no readback: capturable in a CUDA graph.
void sample(const SamplingBatch& b, cudaStream_t stream);
}  // namespace cuda

inline void sample(const SamplingBatch& b, const ExecContext& ctx) {
  if (b.logits.on_cpu())
    cpu::sample(b);
  else
    cuda::sample(b, ctx.stream);
}

}  // namespace nanovllm::kernels
