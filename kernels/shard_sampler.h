// Sampling from the vocabulary shards of a tensor-parallel LM head: each rank reduces its own
// shard of a row to a few candidate keys, rank 0 merges the ranks' candidates and draws, so the
// full [B, V] f32 logits never travel to rank 0. The draw is the one kernels/sampler.h defines,
// token for token, for every row whose rule decomposes over shards:
//   greedy (temperature 0):  each shard's argmax key; the largest key over the shards wins.
//   unfiltered (no top-k, top_p >= 1, min_p <= 0): Gumbel-max. The noise depends on (seed,
//     position, token id) alone, so each shard's best key of l + g is exact; the largest wins.
//   top-k (0 < top_k <= kShardCandidates and top_k < every shard's width): the global top k of
//     (l desc, id asc) are among the shards' own top k; rank 0 merges the sorted lists, then
//     applies top-p (its total is the top k's mass), min-p and Gumbel-max to the k keys, whose
//     high half is l itself (sampler_math.h's candidate_key).
// Rows needing the whole row (rule P's processing, top-p or min-p without top-k, a larger
// top_k, logprobs) are not sampled this way: the step gathers the logits instead.
//
// A key is sampler_math.h's candidate_key(score, global id) with -0 folded into +0, where the
// score is the raw logit (greedy), l + g (unfiltered) or l (top-k); 0 = no candidate.
#pragma once

#include <cstdint>

#include "kernels/exec_context.h"
#include "kernels/sampler.h"
#include "kernels/shard_sampler_math.h"
#include "kernels/tensor.h"

namespace nanovllm::kernels {

// One rank's shard of the batch's logits and what it produces.
struct ShardCandidatesBatch {
  // [B, >= columns] f32: this rank's LM-head output; column c holds token vocab_start + c.
  // Only the first `columns` are read (the last shard's padding past the vocabulary is not).
  TensorView shard_logits;
  int64_t vocab_start = 0;
  int64_t columns = 0;
  int64_t vocab = 0;     // V, the whole vocabulary (a row's rule depends on top_k < V)
  TensorView slots;      // [B] i32, row b's sampling slot; < 0 = padding (keys all 0)
  TensorView positions;  // [B] i32, position of the token whose logits row b holds
  // temperatures, top_k, seeds are read (top_p / min_p are rank 0's, in the merge).
  SamplingSlotParams params;
  TensorView keys;  // [B, kShardCandidates] i64 (u64 bits) out: sorted descending, 0-padded
};

// Rank 0: every rank's keys merged into one token per row.
struct ShardMergeBatch {
  TensorView keys;            // [tp, B, kShardCandidates] i64 (u64 bits), rank r's keys at r
  TensorView slots;           // [B] i32; < 0 = padding (token 0, nothing else written)
  TensorView positions;       // [B] i32
  int64_t vocab = 0;          // V
  SamplingSlotParams params;  // temperatures, top_k, top_p, min_p, seeds
  TensorView out_tokens;      // [B] i32
  TensorView last_tokens;     // [N] i32, written at each live row's slot; may be empty
};

namespace cpu {
void shard_candidates(const ShardCandidatesBatch& b);
void merge_shard_candidates(const ShardMergeBatch& b);
}  // namespace cpu
namespace cuda {
// Both capturable in a CUDA graph (no allocation, no host synchronisation).
void shard_candidates(const ShardCandidatesBatch& b, cudaStream_t stream);
void merge_shard_candidates(const ShardMergeBatch& b, cudaStream_t stream);
}  // namespace cuda

inline void shard_candidates(const ShardCandidatesBatch& b, const ExecContext& ctx) {
  if (b.shard_logits.on_cpu())
    cpu::shard_candidates(b);
  else
    cuda::shard_candidates(b, ctx.stream);
}

inline void merge_shard_candidates(const ShardMergeBatch& b, const ExecContext& ctx) {
  if (b.keys.on_cpu())
    cpu::merge_shard_candidates(b);
  else
    cuda::merge_shard_candidates(b, ctx.stream);
}

}  // namespace nanovllm::kernels
