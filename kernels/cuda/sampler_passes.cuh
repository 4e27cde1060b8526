// The sampler's histogram passes (kernels/cuda/sampler.cu's kernel is their only user): every
// row that neither the greedy draw nor the one-pass top-k (sampler_small_top_k.cuh) takes, and
// the one-pass path's flat rows. Pass 1 finds the row max; then histogram passes narrow the
// candidates until a compaction, an exact cut inside one bin or a Gumbel draw over the tokens
// at or above the cut ends the row (sampler.cu's header says which row takes which).
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "kernels/cuda/sampler_row.cuh"
#include "kernels/cuda/sampler_select.cuh"

namespace nanovllm::kernels::cuda::sampling {

// What the passes leave, in the leader (the other blocks: passes only).
struct PassesOutcome {
  int32_t token = -1;    // the drawn token (-1: a shard row's keys, or not the leader)
  Best drawn{0.f, -1};   // a Gumbel draw's winner, whose key an unfiltered shard row emits
  int passes = 1;        // full reads of the row
  bool emitted = false;  // the leader wrote a shard row's top-k keys (`keys`): nothing follows
};

// Every thread of every block of the row's cluster. keys: a shard row's kShardCandidates
// output keys (emit mode), else null. Inlined into the kernel: out of line it spilled and ran
// 3-9 % slower (temperature-only and top-p rows, sampler_bench on an H200).
__device__ __forceinline__ PassesOutcome draw_in_passes(Shared& sh,
                                                        const cg::cluster_group& cluster,
                                                        const Row& r, u64* keys) {
  const unsigned rank = cluster.block_rank(), blocks = cluster.num_blocks();
  const bool leader = rank == 0;
  const float t = r.temperature;
  const auto scaled = [t](float x) { return scaled_logit(x, t); };
  PassesOutcome out;
  // Pass 1: the row's largest logit and its token (raw: division is monotone, so scaling
  // it gives the largest scaled one).
  if (leader) zero_histogram(sh);  // the others add into it from the next pass on
  u64 mx = 0;
  for_each_logit(r, [&](int v, float x) {
    // (x, lowest id) as one key; NaN takes no part.
    const u64 k =
        x == x ? (u64{ordered_bits(x)} << 32) | (0xffffffffu - static_cast<uint32_t>(v)) : 0;
    mx = k > mx ? k : mx;
  });
  mx = ReduceMax(sh.tmp.reduce_max).Reduce(mx, MaxOp());
  Shared* lead = cluster.map_shared_rank(&sh, 0);
  if (threadIdx.x == 0) lead->block_max[rank] = mx;
  cluster.sync();
  // The bound holds where the max token is a candidate for sure: no top-k / top-p cut
  // (min-p keeps it: sampler_exp(0) == 1).
  const bool uncut = !r.use_k && !r.use_p;
  if (leader && threadIdx.x == 0) {
    Decision d{};
    u64 row_max = 0;
    for (unsigned b = 0; b < blocks; ++b) row_max = max(row_max, sh.block_max[b]);
    d.x_max = float_from_ordered(static_cast<uint32_t>(row_max >> 32));
    d.l_max = scaled_logit(d.x_max, t);
    d.level = kWindowLevel;
    d.k_applied = !r.use_k;
    d.need = static_cast<u64>(r.top_k);
    d.pass = r.use_k ? Pass::kHistCount : r.use_p ? Pass::kHistMass : Pass::kGumbel;
    sh.decision = d;
    // The max token's score bounds the draw: a token more than kMaxGumbel below it cannot
    // win, so most tokens skip their noise (every block starts from it).
    const int32_t top = static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(row_max));
    const unsigned bound = ordered_bits(d.l_max + gumbel(r.seed, top, r.position));
    if (uncut)
      for (unsigned b = 0; b < blocks; ++b) cluster.map_shared_rank(&sh, b)->best_bits = bound;
  }
  cluster.sync();
  while (true) {
    if (threadIdx.x == 0) sh.local = lead->decision;
    __syncthreads();
    const Decision d = sh.local;
    const float l_max = d.l_max;
    ++out.passes;
    if (d.pass == Pass::kHistCount || d.pass == Pass::kHistMass) {
      const bool mass = d.pass == Pass::kHistMass;
      if (!leader) zero_histogram(sh);  // the leader's was zeroed when it decided
      __syncthreads();
      for_each_logit(r, [&](int v, float x) {
        const int bin = bin_of(d, r, v, x);
        if (bin < 0) return;
        atomicAdd(&sh.count[bin], 1u);
        if (mass)
          atomicAdd(&sh.mass[bin], static_cast<u64>(sampler_mass(scaled_logit(x, t) - l_max)));
      });
      if (!leader) {  // add this block's histogram into the leader's
        __syncthreads();
        for (int i = threadIdx.x; i < kBins; i += kThreads) {
          if (sh.count[i] == 0) continue;
          atomicAdd(&lead->count[i], sh.count[i]);
          if (mass) atomicAdd(&lead->mass[i], sh.mass[i]);
        }
      }
      cluster.sync();  // the leader's histogram complete
      if (leader) decide(sh, r);
      cluster.sync();  // the decision published
      continue;
    }
    if (d.pass == Pass::kCompact || d.pass == Pass::kCutInBin) {
      const bool whole_bin = d.pass == Pass::kCutInBin;
      for_each_logit(r, [&](int v, float x) {
        bool in;
        if (whole_bin) {
          in = bin_of(d, r, v, x) == d.compact_bin;
        } else if (d.level == kWindowLevel) {
          const int bin = bin_of(d, r, v, x);
          in = bin >= 0 && bin <= d.compact_bin;
        } else {
          const u64 key = candidate_key(scaled_logit(x, t), v);
          in = key >= d.floor && key >= d.compact_key;
        }
        if (in) lead->cand[atomicAdd(&lead->num_cand, 1u)] = candidate_key(scaled_logit(x, t), v);
      });
      cluster.sync();  // every candidate copied
      if (!whole_bin) {
        if (leader && keys) {
          emit_candidates(sh, r, d, keys);
          out.emitted = true;
          return out;
        }
        if (leader) out.token = finish_candidates(sh, r, d);
        return out;
      }
      if (leader) cut_in_bin(sh, r);
      cluster.sync();  // the decision published
      continue;
    }
    // Pass::kGumbel: the draw over every token at or above the exact cut.
    out.drawn = draw(sh, cluster, r, true, scaled, [&](int v, float l) {
      // The row's first token (l == l_max) passes min-p: sampler_exp(0) == 1.
      return candidate_key(l, v) >= d.floor && (!r.use_min_p || sampler_exp(l - l_max) >= r.min_p);
    });
    out.token = out.drawn.id;
    return out;
  }
}

}  // namespace nanovllm::kernels::cuda::sampling
