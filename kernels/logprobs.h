// Log-probabilities of chosen tokens under a row's raw distribution (log_softmax of the
// logits, vLLM's default "raw" logprobs), with the row's top alternatives: what a request's
// `logprobs` (the sampled token, kernels/sampler.h calls this) and `prompt_logprobs` (each
// prompt token given the ones before it, rank 0's runner calls this on row chunks) return.
// Only these few values per row leave the device.
//
// Row r reads index i = num_top_index[r] (identity when num_top_index is empty); it is
// skipped (nothing written) when i < 0, n = num_top[i] < 0 or t = targets[r] outside [0, V).
// Otherwise, with x = logits[r, :] and lse = log(sum_v exp(x[v])) over the finite x:
//   target_logprob[r]  = x[t] - lse
//   target_rank[r]     = #{v : x[v] >= x[t]}  (vLLM's rank: 1 for the argmax; ties count)
//   top_ids[r, j], top_logprobs[r, j] for j < min(n, V): the j-th token in (x descending, id
//     ascending) order and its x - lse; entries j >= that: id -1, logprob -inf.
// NaN logits take no part in lse, rank or top. The CUDA result agrees with the CPU reference
// on ids and ranks, and on logprobs within float rounding of lse.
#pragma once

#include "kernels/exec_context.h"
#include "kernels/tensor.h"

namespace nanovllm::kernels {

// The most alternatives a row returns (vLLM's default max_logprobs; OpenAI's top_logprobs).
inline constexpr int kMaxLogprobs = 20;

struct LogprobsBatch {
  TensorView logits;          // [R, V] f32, rows may be strided
  TensorView targets;         // [R] i32
  TensorView num_top;         // [M] i32, alternatives wanted, in [-1, kMaxLogprobs]
  TensorView num_top_index;   // [R] i32 index into num_top (a sampling slot); empty: M == R
  TensorView target_logprob;  // [R] f32
  TensorView target_rank;     // [R] i32
  TensorView top_ids;         // [R, W] i32, W >= kMaxLogprobs (rows may be strided)
  TensorView top_logprobs;    // [R, W] f32
};

namespace cpu {
void token_logprobs(const LogprobsBatch& b);
}
namespace cuda {
// No allocation, no host synchronisation: capturable in a CUDA graph.
void token_logprobs(const LogprobsBatch& b, cudaStream_t stream);
}  // namespace cuda

inline void token_logprobs(const LogprobsBatch& b, const ExecContext& ctx) {
  if (b.logits.on_cpu())
    cpu::token_logprobs(b);
  else
    cuda::token_logprobs(b, ctx.stream);
}

}  // namespace nanovllm::kernels
