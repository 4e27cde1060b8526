// Decode-size GEMM: y = x @ w^T (+ bias) for few tokens (M <= 64), written to stream the weight
// at HBM bandwidth, as an alternative to cuBLAS that the runtime times per shape at start-up.
// Semantics are exactly kernels::linear's (kernels/linear.h): bf16 x and w, f32 accumulation,
// bias added in f32, y (bf16 or f32) rounded once.
//
// Every config computes the same function; they differ only in how the work is cut:
//   rows:    weight rows per thread block (16, 32 or 64), one 16-row tensor-core tile per 16;
//   warps:   warps per block (4 or 8); they split the block's K range chunk by chunk (64 k a
//            chunk) and are summed through shared memory;
//   cluster: blocks of one thread-block cluster (1, 2, 4 or 8) splitting K into contiguous
//            ranges, summed through distributed shared memory (sm_90). No workspace, no
//            counters, no atomics: the sum order is fixed, so results are deterministic.
// The call allocates nothing and never synchronizes the host, so it can be captured in a CUDA
// graph; the first call of each kernel variant sets its shared-memory limit (a host-side
// function attribute), so make one eager call per config before capturing, as a start-up
// timing pass does anyway.
//
// Requirements beyond linear's (checked, CHECK fails otherwise): K % 8 == 0; x, w 16-byte
// aligned with row strides that are multiples of 8 elements; 1 <= M <= 64.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/tensor.h"

namespace nanovllm::kernels {

struct SkinnyGemmConfig {
  int rows = 32;    // weight rows per block: 16, 32 or 64
  int warps = 8;    // warps per block: 4 or 8
  int cluster = 1;  // blocks per cluster splitting K: 1, 2, 4 or 8
  // Programmatic dependent launch (sm_90): the kernel may start while the previous kernel on
  // the stream is still finishing and stream its first weights meanwhile; it reads x (and
  // writes y) only after griddepcontrol.wait, i.e. once that kernel has completed, so this is
  // safe after any kernel. The kernel also lets the next PDL-launched kernel start early.
  // skinny_gemm_configs leaves it off: it is the caller's choice for the whole graph.
  bool pdl = false;
  // When the kernel lets that next kernel launch: at its start (false), so that the next one
  // streams its weights beside the whole of this one, or once its own griddepcontrol.wait has
  // returned (true), i.e. once the kernel before it has ended, which stops a chain of early
  // launches at this GEMM (skinny_next_launch_after_wait says where).
  bool next_after_wait = false;
  std::string name() const;  // e.g. "r32w8c2", "r32w8c2+pdl", "r32w8c2+pdl+after"
  bool operator==(const SkinnyGemmConfig& o) const {
    return rows == o.rows && warps == o.warps && cluster == o.cluster && pdl == o.pdl &&
           next_after_wait == o.next_after_wait;
  }
};

// NANOVLLM_SKINNY_NEXT_LAUNCH: auto (unset), start or after-wait (a comparison switch).
enum class SkinnyNextLaunch { kAuto, kStart, kAfterWait };

// Whether the skinny GEMMs of a model on a tensor-parallel group of tp_size ranks let the next
// kernel launch only after their own wait (pure). Measured in the 8B shape's decode step: on two
// H200s (bench/results/h200x2-2026-11-28-issue31_skinny_next_launch.txt) the batch-1 latency TPOT
// 0.95-0.97x, the step at batch 1-2 0.94-0.98x; on four (..._issue31_skinny_next_launch_tp4.txt)
// TPOT 0.98x, batch 1-2 0.96-0.97x; batch 4-8 and nano-vllm's workload the same within their
// spread at both. On one GPU the 0.6B's batch 1 lost 1 %, so it keeps the start. tp 8 was not
// measured; it follows 2 and 4. Under kAuto: tp_size > 1.
bool skinny_next_launch_after_wait(int tp_size, SkinnyNextLaunch choice);

constexpr int64_t kSkinnyGemmMaxM = 64;

// Whether skinny_gemm handles this problem size (M tokens, N weight rows, K inputs).
bool skinny_gemm_supports(int64_t m, int64_t n, int64_t k);

// The configs worth timing for this size (a few, best guess first); empty if unsupported.
// silu_mul: for skinny_gemm_silu_mul (same configs, another best guess). The guess is only a
// default: time the list against cuBLAS per shape; on an H200 cuBLAS in a graph wins most
// shapes from M = 16 on (bench/gemm_bench).
std::vector<SkinnyGemmConfig> skinny_gemm_configs(int64_t m, int64_t n, int64_t k,
                                                  bool silu_mul = false);

namespace cuda {

// y = x @ w^T (+ bias). x: [M, K] bf16 (row stride may exceed K); w: [N, K] bf16;
// bias: [N] bf16 or data == nullptr; y: [M, N] bf16 or f32 (row stride may exceed N).
void skinny_gemm(const TensorView& y, const TensorView& x, const TensorView& w,
                 const TensorView& bias, const SkinnyGemmConfig& cfg, cudaStream_t stream);

// The same with the MLP's activation fused into the input: y = silu_and_mul(gate_up) @ w^T
// (+ bias), gate_up: [M, 2K] bf16 = [gate | up] (row stride may exceed 2K). The activation is
// rounded to bf16 as kernels::silu_and_mul rounds it, computed with the fast exp and divide
// (a few f32 ulp off, so now and then one bf16 step). Every block recomputes the activation
// of its K range, so this pays off only for few tokens (time it against silu_and_mul + GEMM).
void skinny_gemm_silu_mul(const TensorView& y, const TensorView& gate_up, const TensorView& w,
                          const TensorView& bias, const SkinnyGemmConfig& cfg, cudaStream_t stream);

// The MLP's gate_up projection with its activation in the epilogue: act = silu(x @ gate^T) *
// (x @ up^T), w: [2I, K] bf16 = [gate; up], act: [M, I] bf16 (row stride may exceed I), no bias.
// Each sum is rounded to bf16 first and the activation is kernels::silu_and_mul's exact form, so
// act is bit-identical to skinny_gemm into [M, 2I] followed by silu_and_mul with the same cfg
// (cfg.rows weight rows a block, half of them gate rows: rows / 2 act rows).
void skinny_gemm_gate_up_act(const TensorView& act, const TensorView& x, const TensorView& w,
                             const SkinnyGemmConfig& cfg, cudaStream_t stream);

}  // namespace cuda
}  // namespace nanovllm::kernels
