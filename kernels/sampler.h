// The sampler: one token per row of logits, with per-slot parameters that stay on the device
// (the step command names each row's slot; kernels/sampler_math.h holds the arithmetic both
// backends share, so they agree token for token).
//
// Row b, slot s = slots[b] (< 0: a padding row, out_tokens[b] = 0 and nothing else written):
//   P. processing (vLLM's order), for a row where row_is_processed(s, positions[b]): the rules
//      below read x' = processed[b, :] instead of the logits row, which is never written (it
//      stays raw for logprobs):
//        x'[v] = penalized_logit(x[v] + bias(s, v), token_state[s, v], repetition_penalty[s],
//                                presence_penalty[s], frequency_penalty[s])
//      (sampler_math.h; bias(s, v) = logit_bias_values[s, j] where logit_bias_ids[s, j] == v
//      for j < logit_bias_count[s], else 0; ids appear once per slot), then -inf for each
//      min_tokens masked id when positions[b] + 1 < min_tokens_position[s] (entries of
//      min_tokens_masked_ids outside [0, V) are padding). A row is processed when its slot's
//      penalties are active (penalties_active), it has bias entries, or min_tokens masks it.
//   temperature[s] == 0: greedy argmax over x' (lowest id wins ties).
//   otherwise l = x' / effective_temperature(temperature[s]) (-0 counts as +0), ordered by
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
// After the draw, with token t:
//   - last_tokens[s] = t (when given): the per-slot buffer a later decode step can read its
//     input from (two live rows naming one slot: either row's token lands there);
//   - token_state[s, t] = token_state_after_sample(it) where the slot's penalties are active;
//   - logprobs (when `logprobs` is given): kernels/logprobs.h on the raw logits row with
//     target t and num_logprobs[s] alternatives (rows of slots with num_logprobs -1 skipped).
// slots[b] must be < N: the CUDA kernel traps otherwise (rank 0's allocator is broken).
#pragma once

#include "kernels/exec_context.h"
#include "kernels/logprobs.h"
#include "kernels/tensor.h"

namespace nanovllm::kernels {

// The smallest temperature that samples (vLLM's rule): (0, kMinTemperature) is raised to it,
// since logits / 1e-38 overflow to inf and the row's draw becomes garbage.
inline constexpr float kMinTemperature = 0.01f;
__host__ __device__ constexpr float effective_temperature(float t) {
  return t > 0.0f && t < kMinTemperature ? kMinTemperature : t;
}

// Sampling parameters per slot (N = the runner's max_num_seqs).
struct SamplingSlotParams {
  TensorView temperatures;  // [N] f32
  TensorView top_k;         // [N] i32
  TensorView top_p;         // [N] f32
  TensorView min_p;         // [N] f32
  TensorView seeds;         // [N] i64 (bit pattern of a u64)
  // min_tokens (rule P above); both empty = nothing masked anywhere. A slot that masks nothing
  // has min_tokens_position <= 0 (its row of ids is then never read).
  TensorView min_tokens_position;    // [N] i32
  TensorView min_tokens_masked_ids;  // [N, M] i32, rows padded with -1
  // Penalties (rule P), all four or none (none: no slot is penalized). token_state rows of
  // slots whose penalties are off are never read or written.
  TensorView repetition_penalty;  // [N] f32, 1 = off
  TensorView presence_penalty;    // [N] f32, 0 = off
  TensorView frequency_penalty;   // [N] f32, 0 = off
  TensorView token_state;         // [N, V] u16 (sampler_math.h: prompt bit, generated count)
  // logit_bias (rule P), all three or none.
  TensorView logit_bias_count;   // [N] i32, entries used in the slot's row
  TensorView logit_bias_ids;     // [N, K] i32
  TensorView logit_bias_values;  // [N, K] f32, in [-100, 100]
  // Alternatives each slot's sampled tokens report (-1: no logprobs); empty: none anywhere.
  TensorView num_logprobs;  // [N] i32 in [-1, kMaxLogprobs]
};

// The sampled tokens' logprobs (kernels/logprobs.h's outputs for the batch's rows).
struct SampledLogprobs {
  TensorView logprob;       // [B] f32
  TensorView rank;          // [B] i32
  TensorView top_ids;       // [B, W] i32, W >= kMaxLogprobs
  TensorView top_logprobs;  // [B, W] f32
};

struct SamplingBatch {
  TensorView logits;     // [B, V] f32 (full vocabulary, gathered on rank 0); rows may be strided
  TensorView slots;      // [B] i32, row b's slot; < 0 = padding
  TensorView positions;  // [B] i32, position of the token whose logits row b holds
  SamplingSlotParams params;
  // [B, V] f32 scratch, contiguous: rule P's processed rows (only those rows are written).
  // May be empty when no slot can be processed (no penalties, bias or min_tokens given).
  TensorView processed;
  TensorView out_tokens;   // [B] i32
  TensorView last_tokens;  // [N] i32, written at each live row's slot; may be empty
  // Written for the rows whose slot asks for logprobs; all empty: none computed (needs
  // params.num_logprobs).
  SampledLogprobs logprobs;
  // Benchmark instrumentation, may be empty: [B] i32, full reads of row b's logits.
  TensorView row_passes;
};

// The draw parameters (temperatures, top_k, top_p, min_p, seeds): present, [N] each, their
// dtypes, contiguous, on `device`. What every sampler kernel reads (the shard sampler's too).
void check_draw_params(const SamplingSlotParams& p, Device device);
// Shapes (N slots, vocabulary V), dtypes and all-or-none groups of every per-slot parameter
// (check_draw_params on the temperatures' device first): CHECK failures, the same on both
// backends (each adds its own device checks).
void check_slot_params(const SamplingSlotParams& p, int64_t vocab);

// Rule P's choice for row b of slot s, shared by both backends and every kernel that must agree
// on which buffer holds the row.
__host__ __device__ inline bool row_is_processed(bool penalized, int32_t bias_count,
                                                 int32_t min_tokens_position, int32_t position) {
  return penalized || bias_count > 0 || position + 1 < min_tokens_position;
}

namespace cpu {
void sample(const SamplingBatch& b);
// token_state[entries[e, 0], entries[e, 1]] = entries[e, 2] for each row e of entries [E, 3]
// i32 (slot, token id, u16 state). Rows to reset are zeroed by the caller first.
void scatter_token_state(const TensorView& token_state, const TensorView& entries);
}  // namespace cpu
namespace cuda {
// No allocation, no host synchronisation, no readback: capturable in a CUDA graph.
void sample(const SamplingBatch& b, cudaStream_t stream);
void scatter_token_state(const TensorView& token_state, const TensorView& entries,
                         cudaStream_t stream);
}  // namespace cuda

inline void sample(const SamplingBatch& b, const ExecContext& ctx) {
  if (b.logits.on_cpu())
    cpu::sample(b);
  else
    cuda::sample(b, ctx.stream);
}

inline void scatter_token_state(const TensorView& token_state, const TensorView& entries,
                                const ExecContext& ctx) {
  if (token_state.on_cpu())
    cpu::scatter_token_state(token_state, entries);
  else
    cuda::scatter_token_state(token_state, entries, ctx.stream);
}

}  // namespace nanovllm::kernels
