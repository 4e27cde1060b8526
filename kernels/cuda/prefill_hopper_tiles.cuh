// The Hopper prefill kernel's tiles, shared-memory layout and hand-over barriers, shared by its
// producer (prefill_attention_hopper.cu) and its consumer warpgroups
// (prefill_hopper_consumer.cuh).
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace nanovllm::kernels::cuda::hopper_prefill {

constexpr int kD = 128;
constexpr int kBlockM = 128;   // query rows per CTA: G heads x P positions, padded
constexpr int kBlockN = 128;   // keys per K/V tile
constexpr int kConsumers = 2;  // consumer warpgroups, 64 rows each
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kRowBytes = 128;                   // one swizzled row: 64 bf16 columns
constexpr int kHalfBytes = kBlockN * kRowBytes;  // columns 0-63 (then 64-127) of a tile: 16 KB
constexpr int kTileBytes = 2 * kHalfBytes;       // a Q, K or V tile [128 rows][128 cols] bf16
constexpr int kConsumerWarps = 4 * kConsumers;   // arrivals that free a K or V stage

// K/V ring depth. Measured on an H200 (issue 20): 3 stages beat 2 by 1-4 % on causal 8k-32k
// (2 already hid most of the TMA latency); 3 is what 227 KB of shared memory holds.
constexpr int kStages = 3;

// Shared memory, every tile 1024-byte aligned (the swizzle atom):
//   Q [2 halves][128 rows][128 B], K[kStages], V[kStages] alike, then the mbarriers.
constexpr int kQOffset = 0;
constexpr int kKOffset = kTileBytes;
constexpr int kVOffset = kKOffset + kStages * kTileBytes;
constexpr int kBarOffset = kVOffset + kStages * kTileBytes;
constexpr int kBarriers = 1 + 4 * kStages;  // full_q, full_k[], full_v[], empty_k[], empty_v[]
constexpr int kSmemBytes = kBarOffset + 8 * kBarriers + 1024;  // + slack to align the base
static_assert(kSmemBytes <= 227 * 1024, "an sm_90 CTA has at most 227 KB of shared memory");

// Named barriers (0 is __syncthreads): both consumer warpgroups after zeroing V rows; and the
// two warpgroups' turns to issue their GEMMs (ping-pong).
constexpr int kVZeroedBarrier = 1;
constexpr int kTurnBarrier = 2;  // + consumer index

struct HopperArgs {
  bf16* out;  // [Tq, Hq, D], strides out_tok, out_head
  int64_t out_tok, out_head;
  const int32_t* block_tables;  // [B, bt_stride]
  int64_t bt_stride;
  const int32_t* cu_q;  // [B + 1]
  const int32_t* cu_k;  // [B + 1]
  int block_size;
  int rows_per_load;  // keys per TMA box: gcd(block_size, kBlockN), so no box crosses a block
  int group;          // G = Hq / Hkv
  int positions;      // P query positions per CTA: kBlockM / G rounded down to a multiple of 8
  float scale_log2;
};

struct Barriers {
  uint64_t* full_q;
  uint64_t* full_k;   // [kStages]: the K tile has landed
  uint64_t* full_v;   // [kStages]
  uint64_t* empty_k;  // [kStages]: every consumer warp is done reading it
  uint64_t* empty_v;  // [kStages]
};

// What one CTA computes: query positions [m0, m0 + P) of sequence b for the q heads of kv head
// hk, against keys [0, n_tiles * kBlockN) (clipped at k_len and at the causal diagonal).
struct CtaWork {
  int b, hk, q_begin, q_len, k_len, m0, n_tiles;
};

}  // namespace nanovllm::kernels::cuda::hopper_prefill
