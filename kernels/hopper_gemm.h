// Decode-size GEMM for Hopper (sm_90a): y = x @ w^T (+ bias) for 1..64 tokens, written so that
// a decode graph's projection streams its weights while the kernel before it still runs: TMA
// into a shared-memory ring deep enough to hold a block's whole share of the weights, all of it
// requested before griddepcontrol.wait (programmatic dependent launch), so that after the wait
// only x (from L2), the wgmmas and the sum remain. Semantics are exactly kernels::linear's
// (kernels/linear.h): bf16 x and w, f32 accumulation, bias added in f32, y rounded once.
//
// Every config computes the same function; they differ only in how the work is cut:
//   warpgroups: consumer warpgroups per block (1 or 2), 64 weight rows each (R = 64 or 128);
//   split:      blocks of one cluster (1..8) splitting K into contiguous ranges, summed through
//               distributed shared memory in rank order: no workspace, no atomics, the same
//               sum order every run, so results are deterministic.
// The call allocates nothing and never synchronizes the host, so it can be captured in a CUDA
// graph; the first call sets every variant's shared-memory limit (a host-side function
// attribute), so make one eager call before capturing.
//
// Requirements (hopper_gemm_supports; the call CHECKs them): an sm_90a build running on a
// compute-capability-9.0 GPU; 1 <= M <= 64; K % 8 == 0; x and w 16-byte aligned with row
// strides that are multiples of 8 elements. Any N: a partial last tile of weight rows and a
// partial last 64-k step read zeros (TMA out-of-bounds fill) and are never stored.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/rotary.h"
#include "kernels/tensor.h"

namespace nanovllm::kernels {

struct HopperGemmConfig {
  int warpgroups = 1;  // consumer warpgroups, 64 weight rows each: 1 or 2
  int split = 1;       // cluster blocks along K: 1..8
  // Programmatic dependent launch: the kernel may start while the previous kernel on the
  // stream finishes and streams its weights meanwhile; it reads x (and writes y) only after
  // griddepcontrol.wait, so this is safe after any kernel. It also lets the next PDL-launched
  // kernel start early. hopper_gemm_configs leaves it off (the caller's choice).
  bool pdl = false;
  std::string name() const;  // e.g. "wg1s4", "wg2s2+pdl"
  bool operator==(const HopperGemmConfig& o) const {
    return warpgroups == o.warpgroups && split == o.split && pdl == o.pdl;
  }
};

constexpr int64_t kHopperGemmMaxM = 64;
constexpr int kHopperGemmMaxSplit = 8;  // the portable cluster size

// Whether hopper_gemm runs this size (M tokens, N weight rows, K inputs) on this build and
// device (false without an sm_90a build or a compute-capability-9.0 device).
bool hopper_gemm_supports(int64_t m, int64_t n, int64_t k);

// Where the Hopper decode GEMM is the faster path for M tokens of a GEMM with N outputs and K
// inputs (the weights' shape only: hopper_gemm_supports says whether it runs here), as measured
// inside the decode step (kernels/cuda/hopper_gemm_rule.cpp gives the figures). behind_norm:
// x was just written by an RMSNorm, which lets the GEMM launch at the norm's start.
bool hopper_gemm_wins(int64_t m, int64_t n, int64_t k, bool behind_norm);

// The config the decode step launches where hopper_gemm_wins (always early: programmatic
// dependent launch): the measured one for the projections not behind a norm, else
// hopper_gemm_configs' first guess; none where this size is unsupported.
std::optional<HopperGemmConfig> hopper_gemm_decode_config(int64_t m, int64_t n, int64_t k,
                                                          bool gate_up_act, bool behind_norm);

// Whether hopper_gemm_qkv_rope serves this step of M tokens, N = (Hq + 2 Hkv) D outputs and K
// inputs: hopper_gemm_supports, head dim D = 128, no bias, a bf16 cache (the 8-bit caches' row
// scales stay with the separate kernel).
bool hopper_gemm_qkv_rope_supports(int64_t m, int64_t n, int64_t k, const QkvRopeStore& r,
                                   bool has_bias);

// The config of hopper_gemm_qkv_rope for M tokens, launched early: blocks of one head (2
// warpgroups), the split as hopper_gemm_configs guesses for that height up to 16 tokens and
// half of it above (measured in the decode step: kernels/cuda/hopper_gemm_rule.cpp).
HopperGemmConfig hopper_gemm_qkv_rope_config(int64_t m, int64_t n, int64_t k);

// The configs worth timing for this size (a few, best guess first); empty if unsupported.
// gate_up_act: for hopper_gemm_gate_up_act, n being the act rows I (w has 2I rows).
std::vector<HopperGemmConfig> hopper_gemm_configs(int64_t m, int64_t n, int64_t k,
                                                  bool gate_up_act = false);

namespace cuda {

// y = x @ w^T (+ bias). x: [M, K] bf16 (row stride may exceed K); w: [N, K] bf16 (row stride
// may exceed K); bias: [N] bf16 or data == nullptr; y: [M, N] bf16 or f32 (row stride may
// exceed N; nothing past column N is written).
void hopper_gemm(const TensorView& y, const TensorView& x, const TensorView& w,
                 const TensorView& bias, const HopperGemmConfig& cfg, cudaStream_t stream);

// The MLP's gate_up projection with its activation in the epilogue: act = silu(x @ gate^T) *
// (x @ up^T). w: [2I, K] bf16 = [gate; up]; x: [M, K] bf16; act: [M, I] bf16 (row stride may
// exceed I), no bias. Each sum is rounded to bf16 first and the activation is silu_and_mul's
// exact form, so act is bit-identical to hopper_gemm into [M, 2I] with the same config followed
// by kernels::silu_and_mul (a block's R weight rows are R / 2 gate rows and the same R / 2 up
// rows, so it writes R / 2 act rows).
void hopper_gemm_gate_up_act(const TensorView& act, const TensorView& x, const TensorView& w,
                             const HopperGemmConfig& cfg, cudaStream_t stream);

// The attention's qkv projection with qk_norm_rope_store's work in its epilogue
// (kernels/rotary.h): qkv = x @ w^T, then the q and k heads RMSNormed and rotated in place and
// each token's k and v heads stored at its slot of the bf16 cache, bit-identical to hopper_gemm
// with the same config followed by cuda::qk_norm_rope_store. A block of 128 weight rows is one
// head, so cfg.warpgroups is 2 and the head dim 128 (hopper_gemm_qkv_rope_supports).
// w: [(Hq + 2 Hkv) 128, K] bf16; x: [M, K] bf16; qkv: [M, (Hq + 2 Hkv) 128] bf16, its row stride
// a multiple of 4; no bias.
void hopper_gemm_qkv_rope(const TensorView& qkv, const TensorView& x, const TensorView& w,
                          const QkvRopeStore& r, const HopperGemmConfig& cfg, cudaStream_t stream);

}  // namespace cuda
}  // namespace nanovllm::kernels
