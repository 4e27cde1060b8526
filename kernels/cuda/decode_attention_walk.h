// Whether the split decode kernel streams a CTA's range through one ring (DecodeWalk::kStream,
// decode_attention_stream.cuh) rather than piece by piece, where it has the streamed walk (the
// tensor-core path at G <= 2, on any cache). Pure host arithmetic, so that the CPU tests pin the
// rule (tests/kernels/decode_attention_walk_test.cpp); decode_attention.cu feeds it the
// NANOVLLM_DECODE_WALK choice and the grid.
//
// On the fp8 cache streaming pays where CTAs hold several short pieces (8 kv heads on an H200:
// 2048 x 128 231.5 -> 221.4 us, batch 256 at mixed lengths 177.5 -> 167.9) and costs 2-10 %
// where a CTA holds one piece or part of one (batch 1-48 at 1k, one sequence at 4k-16k,
// 8 x 32769; bench/results/h200-2026-11-27-issue34_decode_walk.txt). On the bf16 cache the
// kernel alone is no faster (attention_bench: 1.00-1.03x the pieces walk's time at batch
// 128-256, 1.03x at 64, 1.10x at 16), but inside the 0.6B decode step it is: 0.965-0.974x the
// step at batch 128-256 and context 193, 0.993-0.998x at 1025, 256 x 128/128 +1.9 %, and
// slower at batch 16-56 (bench/results/h200-2026-11-29-issue33_bf16_stream_walk.txt).
#pragma once

#include <cstdint>

#include "kernels/attention.h"

namespace nanovllm::kernels::cuda::decode {

// walk: the call's choice, kAuto already resolved against the environment's (kAuto there too
// leaves the rule). The rule streams from as many (sequence, kv head) groups as the grid has
// CTAs. batch counts padding rows: a captured graph keeps the walk of its batch size.
inline bool streams_range(DecodeWalk walk, int64_t batch, int64_t hkv, int64_t ctas) {
  if (walk != DecodeWalk::kAuto) return walk == DecodeWalk::kStream;
  return batch * hkv >= ctas;
}

}  // namespace nanovllm::kernels::cuda::decode
