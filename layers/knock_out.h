// Knock-outs: timing experiments that leave chosen operations out of every decoder layer, so
// that the step's time without them (in its CUDA graphs, as it really runs) gives each one's
// marginal cost. The kernel timeline (bench/README.md) places kernels but adds its own stamps,
// and a span there is not what the step saves without the kernel: o_proj's 5 us span at batch 1
// costs the step 2.2 us (bench/results/h200-2026-11-28-issue33_layer_knockouts.txt).
//
// NANOVLLM_KNOCK_OUT=op[,op...], read once per process (every rank inherits it): qkv_proj, rope
// (q/k norm, rotary and the KV store), attention, o_proj, norm (both of a layer's norms, with
// their residual adds and, under tensor parallelism, their all-reduces), gate_up (with the
// activation where it is fused), down. The outputs are then wrong; only timings mean anything.
// Decode steps and unsplit prefill steps leave them out; a tensor-parallel prefill step that
// overlaps its sums (layers/prefill_overlap.h) keeps its norms and its attention piece by piece.
#pragma once

#include <cstdint>
#include <string>

namespace nanovllm {

enum class LayerOp : uint32_t {
  kQkvProj = 1u << 0,
  kRope = 1u << 1,
  kAttention = 1u << 2,
  kOProj = 1u << 3,
  kNorm = 1u << 4,
  kGateUp = 1u << 5,
  kDown = 1u << 6,
};

// The ops a comma-separated list names, as a mask of LayerOp bits ("" names none). An unknown
// or empty entry throws std::invalid_argument naming it and the names taken.
uint32_t parse_knock_out(const std::string& list);

// Whether NANOVLLM_KNOCK_OUT leaves `op` out: parsed once per process; a bad value fails a CHECK
// naming the variable, and a warning that the outputs are wrong is logged once when any op is.
bool knocked_out(LayerOp op);

}  // namespace nanovllm
