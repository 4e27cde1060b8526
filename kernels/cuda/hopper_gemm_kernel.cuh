// The decode-size Hopper GEMM kernel behind kernels/hopper_gemm.h: y[M, N] = x[M, K] @ w[N, K]^T.
//
// Operands swapped, as for few tokens: the weight tile is wgmma's A (64 rows per consumer
// warpgroup) and the tokens are its B (N = kTok = 16..256, the smallest >= M; token rows past M
// are TMA's zero fill), so D = [64 weight rows x kTok tokens] f32 in registers. Both operands
// are K-major, 128-byte swizzled, exactly as S = Q K^T in the Hopper prefill kernel.
//
// Warps 0 .. 4W-1 are the W consumer warpgroups; warp 4W is the producer, whose lane 0 issues
// the TMA loads of one 64-k step (w box: 64 k x R = 64W rows; x box: 64 k x kTok rows) into a
// ring of `stages` slots, handed over through full/empty mbarriers. A single producer warp
// instead of a warpgroup leaves every consumer up to 224 registers without setmaxnreg.
//
// Split-K: the `split` blocks of a cluster take contiguous ranges of 64-k steps; after the loop
// each block writes its partial tile to (reused) shared memory and rank q sums its share of the
// elements over the ranks in rank order (distributed shared memory): deterministic, no
// workspace, no atomics.
//
// Programmatic dependent launch: the producer loads the first `stages` weight slots (constant
// data) before griddepcontrol.wait and x only after it; y is written only after it.
#pragma once

#include <cooperative_groups.h>
#include <cuda.h>

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/hopper_gemm_wgmma.cuh"

namespace nanovllm::kernels::cuda::hgemm {

namespace cg = cooperative_groups;

constexpr int kStepK = 64;      // k per ring slot: one 128-byte swizzled row of each operand
constexpr int kRowBytes = 128;  // one row of a slot: 64 bf16
constexpr int kMaxStages = 8;   // deeper rings bought nothing the budget below allows
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
static_assert(max_stages(256, 2) >= 4 && smem_bytes(256, 2, max_stages(256, 2)) <= kSmemLimit);
static_assert(partial_bytes(256, 2) + kBarrierBytes + kAlignSlack <= kSmemLimit);

struct Params {
  void* y;  // [M, N] bf16 or f32, row stride ldy
  int64_t ldy;
  const bf16* bias;  // [N] or null
  int m, n;
  int k_steps;         // 64-k steps of K (the last may be partial: zeros past K)
  int steps_per_rank;  // of one cluster rank's contiguous range (the last rank may have fewer)
  int split;           // cluster blocks along K
  int stages;          // ring slots, <= max_stages
  bool f32_out;
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

// Lane 0 of the producer warp: steps [step0, step0 + steps) of weight rows [row0, row0 + R).
template <int kTok, int kWg>
__device__ __forceinline__ void produce(const CUtensorMap* tm_w, const CUtensorMap* tm_x,
                                        const Ring<kTok, kWg>& ring, int row0, int step0,
                                        int steps) {
  constexpr uint32_t kBytes = w_slot_bytes(kWg) + x_slot_bytes(kTok);
  tma_prefetch_descriptor(tm_w);
  tma_prefetch_descriptor(tm_x);
  const int ahead = min(ring.stages, steps);
  for (int t = 0; t < ahead; ++t) {  // fresh slots: no empty wait
    mbarrier_arrive_expect_tx(&ring.full[t], kBytes);
    tma_load_2d(ring.w_slot(t), tm_w, &ring.full[t], (step0 + t) * kStepK, row0);
  }
  wait_for_previous_grid();  // x may be the previous kernel's output
  for (int t = 0; t < ahead; ++t)
    tma_load_2d(ring.x_slot(t), tm_x, &ring.full[t], (step0 + t) * kStepK, 0);
  for (int t = ahead; t < steps; ++t) {
    const int s = t % ring.stages;
    mbarrier_wait(&ring.empty[s], ((t / ring.stages) & 1) ^ 1);
    mbarrier_arrive_expect_tx(&ring.full[s], kBytes);
    tma_load_2d(ring.w_slot(s), tm_w, &ring.full[s], (step0 + t) * kStepK, row0);
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
    fence_accumulators(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kStepK / 16; ++kk)
      wgmma_tokens<kTok>(acc, smem_desc_sw128(a + 32 * kk, 16, 1024),
                         smem_desc_sw128(b + 32 * kk, 16, 1024));
    wgmma_commit();
    wgmma_wait<1>();  // step t - 1's wgmmas are done: its slot may be refilled
    fence_accumulators(acc);
    if (t > 0) {
      __syncwarp();
      if (lane == 0) mbarrier_arrive(&ring.empty[(t - 1) % ring.stages]);
    }
  }
  wgmma_wait<0>();
  fence_accumulators(acc);
}

__device__ __forceinline__ void store_y(const Params& p, int token, int n, float v) {
  if (p.bias != nullptr) v += to_f32(p.bias[n]);
  if (p.f32_out)
    static_cast<float*>(p.y)[token * p.ldy + n] = v;
  else
    static_cast<bf16*>(p.y)[token * p.ldy + n] = to_bf16(v);
}

// Block b = (tile b / split, rank b % split): weight rows [R tile, +R), the rank-th range of
// 64-k steps. Launched with blockDim threads(kWg) and cluster (split, 1, 1).
template <int kTok, int kWg>
__global__ void __launch_bounds__(threads(kWg), 1)
    hopper_gemm_kernel(const __grid_constant__ CUtensorMap tm_w,
                       const __grid_constant__ CUtensorMap tm_x, const Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kR = 64 * kWg, kPitch = partial_pitch(kWg), kConsumers = 128 * kWg;
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
    if (lane == 0) produce(&tm_w, &tm_x, ring, tile * kR, step0, steps);
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
  wait_for_previous_grid();    // y (and the previous kernel's reads of it) come after
  const int elems = kR * p.m;  // element e: token e / R, row e % R of the tile
  const int tid = static_cast<int>(threadIdx.x);
  if (p.split == 1) {
    named_barrier_sync(kPartialBarrier, kConsumers);
    for (int e = tid; e < elems; e += kConsumers) {
      const int n = tile * kR + e % kR;
      if (n < p.n) store_y(p, e / kR, n, partial[(e / kR) * kPitch + e % kR]);
    }
    return;
  }
  const cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every rank's partial tile is written
  const int share = (elems + p.split - 1) / p.split;
  const int e_end = min(elems, (rank + 1) * share);
  for (int e = rank * share + tid; e < e_end && tid < kConsumers; e += kConsumers) {
    const int off = (e / kR) * kPitch + e % kR, n = tile * kR + e % kR;
    if (n >= p.n) continue;
    float s = 0.f;
    for (int q = 0; q < p.split; ++q) s += cluster.map_shared_rank(partial, q)[off];
    store_y(p, e / kR, n, s);
  }
  cluster.sync();  // no block leaves while another still reads its shared memory
#else
  __trap();  // built without sm_90a: the host never launches it (hopper_gemm_supports)
#endif
}

}  // namespace nanovllm::kernels::cuda::hgemm
