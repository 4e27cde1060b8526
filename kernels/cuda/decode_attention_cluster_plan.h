// Which small decode batches merge their attention inside thread-block clusters
// (decode_attention_cluster.cuh), and up to which context. Pure host arithmetic, so that the
// CPU tests pin the rule (tests/kernels/decode_attention_cluster_plan_test.cpp);
// decode_attention.cu feeds it the device's SM count and the NANOVLLM_DECODE_CLUSTER choice.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/attention.h"

namespace nanovllm::kernels::cuda::decode {

// NANOVLLM_DECODE_CLUSTER: auto (unset), off, or a forced size where it fits.
enum class ClusterChoice { kAuto, kOff, kForce8, kForce16 };

// C CTAs a (sequence, kv head) (size 0: none fits), on a grid of at most per_sm CTAs an SM.
struct ClusterPlan {
  int size = 0;
  int per_sm = 0;
};

// The plan of a batch of `batch` sequences over `hkv` kv heads on `sms` SMs, with `cells`
// scratch cells for the partials: 16 (a non-portable size) where the grid is one CTA an SM at
// most, else 8 where it is two. On an H200, the 0.6B shape
// (bench/results/h200-2026-11-27-issue33_cluster_decode.txt): batch-1 TPOT 0.918-0.926 ms with
// 16 against 0.977-0.991 dealt (0.941-0.956 with 8, another call); batch-2 step 0.979-0.995 ms
// with 8 (one an SM) against 1.002 with 16 (two an SM); batch 3-4 (the graph of 4) 1.010-1.017
// ms with 8 at two an SM against 1.089-1.095 dealt
// (bench/results/h200-2026-11-28-issue33_cluster_bounds.txt). kForce8 / kForce16 take that size
// where it fits; kDealt, or kOff under kAuto: none.
inline ClusterPlan cluster_plan(DecodeMerge merge, ClusterChoice choice, int64_t batch, int64_t hkv,
                                int64_t cells, int64_t sms) {
  if (merge == DecodeMerge::kDealt || batch > 65535 ||  // gridDim.z
      (merge == DecodeMerge::kAuto && choice == ClusterChoice::kOff))
    return {};
  const auto plan = [&](int c) -> ClusterPlan {
    const int64_t ctas = batch * hkv * c;
    if (ctas > std::min(2 * sms, cells)) return {};
    return {c, ctas <= sms ? 1 : 2};
  };
  if (choice == ClusterChoice::kForce8) return plan(8);
  const ClusterPlan wide = plan(16);  // 16 only on one CTA an SM
  if (choice == ClusterChoice::kForce16) return wide.per_sm == 1 ? wide : ClusterPlan{};
  return wide.per_sm == 1 ? wide : plan(8);
}

// The longest max_context_len at which kAuto takes a plan for `group` query heads a kv head
// and tiles of `tile_tokens` tokens: while each CTA's share is at most 8 tiles (12 at 4 or more
// query heads a kv head) on a grid of one CTA an SM, 5 on one of two; beyond, the dealt
// kernel's several CTAs an SM keep more bytes in flight. Measured cluster / dealt time
// (bench/results/h200-2026-11-28-issue33_cluster_bounds.txt): one an SM, attention_bench on an
// H200, at 2 query heads a kv head 0.85-0.87x up to 8 tiles a CTA, 0.98x at 12, 1.07x at 16;
// at 4, 0.73-0.92x up to 12, 0.89-1.00x at 16; fp8 caches (an H100) the same or better. Two an
// SM (H100): 0.83-0.93x at 4 tiles, 1.04-1.10x at 5 alone, but the 0.6B decode step at context
// 1025 (5 tiles) took 0.95x at batch 3-4.
inline int cluster_context_bound(ClusterPlan plan, int64_t group, int tile_tokens) {
  if (plan.size == 0) return 0;
  const int tiles = plan.per_sm == 1 ? (group >= 4 ? 12 : 8) : 5;
  return plan.size * tiles * tile_tokens;
}

}  // namespace nanovllm::kernels::cuda::decode
