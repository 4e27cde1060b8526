// The decode-size Hopper GEMM kernel behind kernels/hopper_gemm.h: y[M, N] = x[M, K] @ w[N, K]^T.
//
// Operands swapped, as for few tokens: the weight tile is wgmma's A (64 rows per consumer
// warpgroup) and the tokens are its B (N = kTok = 16, 32 or 64, the smallest >= M; token rows
// past M are TMA's zero fill), so D = [64 weight rows x kTok tokens] f32 in registers. Both
// operands are K-major, 128-byte swizzled, exactly as S = Q K^T in the Hopper prefill kernel.
//
// Warps 0 .. 4W-1 are the W consumer warpgroups; warp 4W is the producer, whose lane 0 issues
// the TMA loads of one 64-k step (w box: 64 k x R = 64W rows; x box: 64 k x kTok rows) into a
// ring of `stages` slots, handed over through full/empty mbarriers. A single producer warp
// instead of a warpgroup leaves every consumer up to 224 registers without setmaxnreg.
//
// Programmatic dependent launch: the producer requests every weight slot of the ring before
// griddepcontrol.wait (the weights are constants), and the launcher makes the ring as deep as
// the block's steps where shared memory allows, so a block's whole share of the weights is in
// flight while the kernel before it still runs; x is loaded, and y written, only after the wait.
//
// Split-K: the `split` blocks of a cluster take contiguous ranges of 64-k steps; after the loop
// each block writes its partial tile to (reused) shared memory and rank q sums its share of the
// elements over the ranks in rank order (distributed shared memory): deterministic, no
// workspace, no atomics.
//
// kAct (the MLP's gate_up projection with its activation in the epilogue): w is [2I, K] =
// [gate; up], and a block's slot holds R / 2 gate rows (rows [0, R/2)) and the same R / 2 up
// rows (rows [R/2, R)), two boxes a step; act row r of the tile = silu(gate r) * up r, each sum
// rounded to bf16 first, as the plain GEMM followed by silu_and_mul would give.
//
// kRope (the attention's qkv projection with q/k norm, rotary and KV store in the epilogue,
// kernels/cuda/hopper_gemm_rope.cuh): blocks of 128 rows (one head), and the sum deals each
// rank whole tokens so that a warp holds whole (token, head) rows.
#pragma once

#include <cooperative_groups.h>
#include <cuda.h>

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/hopper_gemm_rope.cuh"
#include "kernels/cuda/hopper_gemm_wgmma.cuh"
#include "kernels/cuda/silu_mul.cuh"

namespace nanovllm::kernels::cuda::hgemm {

namespace cg = cooperative_groups;

constexpr int kStepK = 64;      // k per ring slot: one 128-byte swizzled row of each operand
constexpr int kRowBytes = 128;  // one row of a slot: 64 bf16
constexpr int kMaxSplit = 8;    // kHopperGemmMaxSplit: the portable cluster size
constexpr int kMaxStages = 16;  // a block's whole share of a decode projection's weights
constexpr int kSmemLimit = 227 * 1024;  // an sm_90 block's dynamic shared memory
constexpr int kBarrierBytes = 2 * kMaxStages * 8;
constexpr int kAlignSlack = 1024;   // the dynamic base is aligned up to the 1024-byte swizzle atom
constexpr int kPartialBarrier = 1;  // named barrier of the consumer warps (0 is __syncthreads)

constexpr int threads(int wg) {
  return 128 * wg + 32;
}
constexpr int w_slot_bytes(int wg) {  // [64W rows][128 B]
  return 64 * wg * kRowBytes;
}
constexpr int x_slot_bytes(int tok) {  // [kTok rows][128 B]
  return tok * kRowBytes;
}
constexpr int partial_pitch(int wg) {  // floats per token row; 4 mod 32: conflict-free stores
  return 64 * wg + 4;
}
constexpr int partial_bytes(int tok, int wg) {  // [kTok tokens][64W + 4] f32
  return tok * partial_pitch(wg) * 4;
}
constexpr int ring_bytes(int tok, int wg, int stages) {
  return stages * (w_slot_bytes(wg) + x_slot_bytes(tok));
}
// The barriers sit after whichever is larger: the ring, or the partial tile that reuses it.
constexpr int barrier_offset(int tok, int wg, int stages) {
  return ring_bytes(tok, wg, stages) > partial_bytes(tok, wg) ? ring_bytes(tok, wg, stages)
                                                              : partial_bytes(tok, wg);
}
constexpr int smem_bytes(int tok, int wg, int stages) {
  return barrier_offset(tok, wg, stages) + kBarrierBytes + kAlignSlack;
}
constexpr int max_stages(int tok, int wg) {
  const int fit =
      (kSmemLimit - kBarrierBytes - kAlignSlack) / (w_slot_bytes(wg) + x_slot_bytes(tok));
  return fit < kMaxStages ? fit : kMaxStages;
}
static_assert(max_stages(64, 2) >= 4 && smem_bytes(64, 2, max_stages(64, 2)) <= kSmemLimit);
static_assert(partial_bytes(64, 2) + kBarrierBytes + kAlignSlack <= kSmemLimit);

struct Params {
  void* y;  // [M, N] bf16 or f32, row stride ldy; kAct: [M, I] bf16
  int64_t ldy;
  const bf16* bias;    // [N] or null (kAct: null)
  const void* w;       // the weights, read through tm_w: only the kernel timeline's key
  int m, n;            // kAct: n = I, the act rows (w has 2I rows)
  int k_steps;         // 64-k steps of K (the last may be partial: zeros past K)
  int steps_per_rank;  // of one cluster rank's contiguous range (the last rank may have fewer)
  int split;           // cluster blocks along K
  int stages;          // ring slots, <= max_stages
  bool f32_out;
  RopeEpilogue rope;  // kRope only
};

// One box of a 2-D tensor map into shared memory, completing on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const void* tensor_map, uint64_t* bar,
                                            int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%3, %4}], [%2];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
      : "memory");
}

// Shared memory: w slots [stages], then x slots [stages], then full[stages], empty[stages].
template <int kTok, int kWg>
struct Ring {
  unsigned char* w;
  unsigned char* x;
  uint64_t* full;   // the slot's w and x boxes have landed
  uint64_t* empty;  // every consumer warp is done reading the slot
  int stages;
  __device__ unsigned char* w_slot(int s) const { return w + s * w_slot_bytes(kWg); }
  __device__ unsigned char* x_slot(int s) const { return x + s * x_slot_bytes(kTok); }
};

// The weight rows of one step into slot `slot`: rows [row0, row0 + R) of w, or (kAct) gate rows
// [row0, row0 + R/2) into the slot's first half and up rows [up0 + row0, ...) into its second.
template <int kWg, bool kAct>
__device__ __forceinline__ void load_weights(unsigned char* slot, const CUtensorMap* tm_w,
                                             uint64_t* bar, int k0, int row0, int up0) {
  if constexpr (kAct) {
    tma_load_2d(slot, tm_w, bar, k0, row0);
    tma_load_2d(slot + w_slot_bytes(kWg) / 2, tm_w, bar, k0, up0 + row0);
  } else {
    tma_load_2d(slot, tm_w, bar, k0, row0);
  }
}

// Lane 0 of the producer warp: steps [step0, step0 + steps) of the block's weight rows (row0:
// its first, of w or of the gate half; up0: where w's up rows start, kAct only).
template <int kTok, int kWg, bool kAct>
__device__ __forceinline__ void produce(const CUtensorMap* tm_w, const CUtensorMap* tm_x,
                                        const Ring<kTok, kWg>& ring, int row0, int up0, int step0,
                                        int steps) {
  constexpr uint32_t kBytes = w_slot_bytes(kWg) + x_slot_bytes(kTok);
  tma_prefetch_descriptor(tm_w);
  tma_prefetch_descriptor(tm_x);
  const int ahead = min(ring.stages, steps);
  for (int t = 0; t < ahead; ++t) {  // fresh slots: no empty wait
    mbarrier_arrive_expect_tx(&ring.full[t], kBytes);
    load_weights<kWg, kAct>(ring.w_slot(t), tm_w, &ring.full[t], (step0 + t) * kStepK, row0, up0);
  }
  wait_for_previous_grid();  // x may be the previous kernel's output
  for (int t = 0; t < ahead; ++t)
    tma_load_2d(ring.x_slot(t), tm_x, &ring.full[t], (step0 + t) * kStepK, 0);
  for (int t = ahead; t < steps; ++t) {
    const int s = t % ring.stages;
    mbarrier_wait(&ring.empty[s], ((t / ring.stages) & 1) ^ 1);
    mbarrier_arrive_expect_tx(&ring.full[s], kBytes);
    load_weights<kWg, kAct>(ring.w_slot(s), tm_w, &ring.full[s], (step0 + t) * kStepK, row0, up0);
    tma_load_2d(ring.x_slot(s), tm_x, &ring.full[s], (step0 + t) * kStepK, 0);
  }
}

// Consumer warpgroup c: acc += w rows [64c, 64c + 64) of the block's tile times x, over the
// block's steps. Each step is 4 wgmmas of 16 k (32 bytes apart inside the swizzled rows); one
// step's wgmmas stay in flight while the next step's slot is awaited.
template <int kTok, int kWg>
__device__ __forceinline__ void consume(float (&acc)[kTok / 2], const Ring<kTok, kWg>& ring, int c,
                                        int steps, int lane) {
  for (int t = 0; t < steps; ++t) {
    const int s = t % ring.stages;
    mbarrier_wait(&ring.full[s], (t / ring.stages) & 1);
    const unsigned char* a = ring.w_slot(s) + c * 64 * kRowBytes;
    const unsigned char* b = ring.x_slot(s);
    wgmma_fence_operand(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kStepK / 16; ++kk)
      wgmma_tokens<kTok>(acc, smem_desc_sw128(a + 32 * kk, 16, 1024),
                         smem_desc_sw128(b + 32 * kk, 16, 1024));
    wgmma_commit();
    wgmma_wait<1>();  // step t - 1's wgmmas are done: its slot may be refilled
    wgmma_fence_operand(acc);
    if (t > 0) {
      __syncwarp();
      if (lane == 0) mbarrier_arrive(&ring.empty[(t - 1) % ring.stages]);
    }
  }
  wgmma_wait<0>();
  wgmma_fence_operand(acc);
}

__device__ __forceinline__ void add4(float4& a, const float4& b) {
  a.x += b.x;
  a.y += b.y;
  a.z += b.z;
  a.w += b.w;
}

__device__ __forceinline__ void store_y(const Params& p, int token, int n, float v) {
  if (p.bias != nullptr) v += to_f32(p.bias[n]);
  if (p.f32_out)
    static_cast<float*>(p.y)[token * p.ldy + n] = v;
  else
    static_cast<bf16*>(p.y)[token * p.ldy + n] = to_bf16(v);
}

// kAct: act row n of a token from its gate and up sums, each rounded to bf16 as the GEMM's
// output would be, then silu_and_mul's exact form.
__device__ __forceinline__ void store_act(const Params& p, int token, int n, float gate, float up) {
  static_cast<bf16*>(p.y)[token * p.ldy + n] =
      to_bf16(silu_mul_exact(to_f32(to_bf16(gate)), to_f32(to_bf16(up))));
}

// Block b = (tile b / split, rank b % split): weight rows [R tile, +R) (kAct: gate and up rows
// [R/2 tile, +R/2)), the rank-th range of 64-k steps. Launched with blockDim threads(kWg) and
// cluster (split, 1, 1).
template <int kTok, int kWg, bool kAct, bool kRope = false>
__global__ void __launch_bounds__(threads(kWg), 1)
    hopper_gemm_kernel(const __grid_constant__ CUtensorMap tm_w,
                       const __grid_constant__ CUtensorMap tm_x, const Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // In the timeline, thread 0's "wait" is the one before the sum (the producer's, before x, is
  // not stamped): start to wait is the weights and the wgmmas, wait to end the sum and y.
  NANOVLLM_TRACE_SCOPE(trace::kHopperGemm, p.w);
  constexpr int kR = 64 * kWg, kPitch = partial_pitch(kWg), kConsumers = 128 * kWg;
  // Outputs of a tile: kR rows, or kR / 2 act rows (gate row r and up row r + kR / 2).
  constexpr int kOut = kAct ? kR / 2 : kR;
  static_assert(!kRope || (!kAct && kOut == kRopeHeadDim), "kRope: blocks of one head");
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + kAlignSlack - 1) & ~uintptr_t{kAlignSlack - 1});
  allow_next_grid();
  const int tile = static_cast<int>(blockIdx.x) / p.split;
  const int rank = static_cast<int>(blockIdx.x) % p.split;  // == the cluster block rank
  const int step0 = rank * p.steps_per_rank;
  const int steps = max(0, min(p.k_steps - step0, p.steps_per_rank));
  Ring<kTok, kWg> ring;
  ring.stages = p.stages;
  ring.w = smem;
  ring.x = smem + p.stages * w_slot_bytes(kWg);
  ring.full = reinterpret_cast<uint64_t*>(smem + barrier_offset(kTok, kWg, p.stages));
  ring.empty = ring.full + p.stages;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < p.stages; ++s) {
      mbarrier_init(&ring.full[s], 1);
      mbarrier_init(&ring.empty[s], 4 * kWg);
    }
    mbarrier_init_fence();
  }
  __syncthreads();

  float* partial = reinterpret_cast<float*>(smem);  // [kTok][kPitch] f32, after the loop
  if (warp == 4 * kWg) {                            // the producer warp
    if (lane == 0) produce<kTok, kWg, kAct>(&tm_w, &tm_x, ring, tile * kOut, p.n, step0, steps);
    __syncwarp();
    if (p.split == 1) return;
  } else {
    float acc[kTok / 2];  // D [64 rows][kTok tokens] of warpgroup c, wgmma's layout
#pragma unroll
    for (int i = 0; i < kTok / 2; ++i) acc[i] = 0.f;
    const int c = warp / 4;
    consume(acc, ring, c, steps, lane);
    named_barrier_sync(kPartialBarrier, kConsumers);  // nobody reads the ring any more
    const int row = c * 64 + (warp % 4) * 16 + lane / 4, tok = 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < kTok / 8; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        partial[(8 * j + tok + (i & 1)) * kPitch + row + 8 * (i >> 1)] = acc[4 * j + i];
  }
  wait_for_previous_grid();  // y (and the previous kernel's reads of it) come after
  // The sum: group g = 4 consecutive output rows of one token (token g / kGroups, rows
  // 4 (g % kGroups) ..), rank q of the cluster the q-th contiguous share of the groups, summed
  // over the ranks' partial tiles in rank order. Each thread takes two groups at a time and
  // issues all their 16-byte loads (every rank's, gate and up) before it adds: the loads of
  // distributed shared memory are what this sum waits on.
  constexpr int kGroups = kOut / 4;
  const int groups = kGroups * p.m;
  // kRope: whole tokens a rank (a token's kGroups = 32 groups are then one warp's lanes).
  const int share =
      kRope ? (p.m + p.split - 1) / p.split * kGroups : (groups + p.split - 1) / p.split;
  const int g_begin = rank * share, g_end = min(groups, g_begin + share);
  const int tid = static_cast<int>(threadIdx.x);
  // kRope: each thread's rows' inputs (at most two rows an iteration of the loop below), the
  // first iteration's before the barrier.
  RopeRowInputs rope_in[2];
  const auto prepare_rope = [&](int g0) {
#pragma unroll
    for (int v = 0; v < 2; ++v) {
      const int g = g0 + v * kConsumers;
      if (g < g_end) rope_in[v] = rope_row_inputs(p.rope, g / kGroups, tile, g % kGroups);
    }
  };
  if constexpr (kRope)
    if (tid < kConsumers) prepare_rope(g_begin + tid);
  cg::cluster_group cluster = cg::this_cluster();
  if (p.split == 1)
    named_barrier_sync(kPartialBarrier, kConsumers);
  else
    cluster.sync();  // every rank's partial tile is written
  for (int g0 = g_begin + tid; g0 < g_end && tid < kConsumers; g0 += 2 * kConsumers) {
    if constexpr (kRope)
      if (g0 != g_begin + tid) prepare_rope(g0);
    float4 sum[2] = {}, up[2] = {};
#pragma unroll
    for (int q = 0; q < kMaxSplit; ++q) {
      if (q >= p.split) break;
      const float* src = p.split == 1 ? partial : cluster.map_shared_rank(partial, q);
#pragma unroll
      for (int v = 0; v < 2; ++v) {
        const int g = g0 + v * kConsumers;
        if (g >= g_end) continue;
        const float* at = src + (g / kGroups) * kPitch + 4 * (g % kGroups);
        add4(sum[v], *reinterpret_cast<const float4*>(at));
        if constexpr (kAct) add4(up[v], *reinterpret_cast<const float4*>(at + kOut));
      }
    }
#pragma unroll
    for (int v = 0; v < 2; ++v) {
      const int g = g0 + v * kConsumers;
      if (g >= g_end) continue;
      const int token = g / kGroups, n0 = tile * kOut + 4 * (g % kGroups);
      if constexpr (kRope) {  // warp-uniform: the warp's lanes are the row's 32 groups
        store_rope_row(p.rope, static_cast<bf16*>(p.y), p.ldy, token, tile, g % kGroups, sum[v],
                       rope_in[v]);
        continue;
      }
      const float s4[4] = {sum[v].x, sum[v].y, sum[v].z, sum[v].w};
      const float u4[4] = {up[v].x, up[v].y, up[v].z, up[v].w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (n0 + i >= p.n) break;
        if constexpr (kAct)
          store_act(p, token, n0 + i, s4[i], u4[i]);
        else
          store_y(p, token, n0 + i, s4[i]);
      }
    }
  }
  if (p.split > 1) cluster.sync();  // no block leaves while another still reads its shared memory
#else
  __trap();  // built without sm_90a: the host never launches it (hopper_gemm_supports)
#endif
}

}  // namespace nanovllm::kernels::cuda::hgemm
