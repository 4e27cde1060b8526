#pragma once

#include "kernels/exec_context.h"
#include "kernels/tensor.h"

namespace nanovllm::kernels {

// The paged KV cache of one layer. Token t of sequence b lives in
//   block block_tables[b][t / block_size], row t % block_size.
struct PagedKV {
  TensorView k_cache;       // [num_blocks, block_size, Hkv, D] bf16, fp8 e4m3 or int8 (stored
  TensorView v_cache;       //   q + 128: kernels/int8_kv.h)
  TensorView block_tables;  // [B, max_blocks_per_seq] i32, unused entries -1
  // 8-bit caches only: [num_blocks, Hkv, block_size] i8, each row's exponent (fp8: value =
  // fp8 * 2^e) or scale code (int8: value = q * 2^(c / 4), kernels/int8_kv.h). Head-major
  // inside a block, so that one kv head's codes of consecutive tokens are adjacent bytes (the
  // CUDA decode kernel copies them 4 at a time); block_size a multiple of 4.
  TensorView k_scale, v_scale;
};

// Variable-length prefill over the paged cache (the new tokens' K/V are already stored):
// sequence b has q_len = cu_seqlens_q[b+1] - cu_seqlens_q[b] new queries and
// k_len = cu_seqlens_k[b+1] - cu_seqlens_k[b] keys (cached prefix + new tokens); query i sits
// at position k_len - q_len + i and attends causally to keys [0, k_len - q_len + i].
// GQA: query head h reads kv head h / (Hq / Hkv). Softmax in f32.
struct PrefillAttentionParams {
  TensorView out;  // [Tq, Hq, D] bf16
  TensorView q;    // [Tq, Hq, D] bf16 (token stride may exceed Hq*D)
  PagedKV kv;
  TensorView cu_seqlens_q;  // [B + 1] i32
  TensorView cu_seqlens_k;  // [B + 1] i32
  int max_seqlen_q = 0;
  int max_seqlen_k = 0;
  float scale = 1.0f;  // usually 1/sqrt(D)
  // 8-bit cache, CUDA, optional: room to dequantize the blocks this call reads (the first
  // ceil(k_len_b / block_size) of each row of the block table) into bf16, so that the Hopper
  // kernel serves it. staging_k, staging_v: [staging_blocks, block_size, Hkv, D] bf16;
  // staging_tables: [B, block table width] i32, written by the call. Used where kv_blocks
  // (the caller's host-side count of those blocks) is > 0 and fits staging_blocks and the
  // Hopper kernel takes the shape; otherwise the mma.sync kernel reads the 8-bit cache itself.
  TensorView staging_k, staging_v, staging_tables;
  int64_t kv_blocks = 0;
};

// One new query per sequence, attending to its first context_lens[b] cached tokens
// (the current token's K/V included, already stored). context_lens[b] <= 0 (padding rows of a
// CUDA graph, block-table row all -1) gives zeros. CUDA launches it early (programmatic
// dependent launch) and the split kernel reads context_lens, the block tables and every cache
// row but each sequence's last before waiting for the kernel before it: that kernel may write
// q and the last rows (the new token), nothing else the call reads.
struct DecodeAttentionParams {
  TensorView out;  // [B, Hq, D] bf16
  TensorView q;    // [B, Hq, D] bf16 (token stride may exceed Hq*D)
  PagedKV kv;
  TensorView context_lens;  // [B] i32
  // An upper bound over the batch (in a CUDA graph: over every replay); 0 = unknown. The
  // kernels read the live lengths from context_lens; the CUDA call picks from this bound
  // whether the cluster merge may serve (DecodeMerge).
  int max_context_len = 0;
  float scale = 1.0f;
  // Split-KV scratch (CUDA only). Null split_out: every (sequence, kv head) is one CTA's work.
  // Otherwise the context tiles of the whole batch are dealt evenly, on the device from
  // context_lens, over a fixed grid of min(resident CTA slots, cells / 2) CTAs, two partials
  // per CTA at most; a (sequence, kv head) spread over several CTAs is merged by
  // log2-sum-exp. decode_attention_split_cells() gives the cells that use every slot; fewer is
  // still right, just narrower. The size depends on neither the batch nor the lengths.
  TensorView split_out;  // [cells, G, D] f32, G = Hq / Hkv: partial outputs
  TensorView split_lse;  // [cells, G] f32: their log2-sum-exp
  // Optional, [>= cells / 2] i32: all zero before the first call, and every call leaves it so
  // (one call at a time per buffer). With it the last CTA of a split (sequence, kv head)
  // merges it inside the one launch; without it a second kernel merges.
  TensorView split_counters;
};

namespace cpu {
// The reference kernels, over `threads` workers of the CPU pool (kernels/cpu/thread_pool.h):
// each (query row, head) is computed alone, so the output does not depend on the count.
void prefill_attention(const PrefillAttentionParams& p, int threads = 1);
void decode_attention(const DecodeAttentionParams& p, int threads = 1);
}  // namespace cpu
namespace cuda {
// The CUDA prefill kernels: kMma (mma.sync, FlashAttention-2 style; any sm_80+ GPU, head dims
// 64 and 128) and kHopper (sm_90a: TMA tile loads, wgmma, a warp-specialised producer /
// consumer pipeline; head dim 128, Hq / Hkv <= 16, block_size a multiple of 16,
// a bf16 cache: an 8-bit cache always takes kMma, which converts its tiles to bf16; fp8's
// exactly).
enum class PrefillKernel { kMma, kHopper };
const char* prefill_kernel_name(PrefillKernel kernel);
// Whether the Hopper kernel serves this shape on the current device: the device is compute
// capability 9.0 (read once per process) and the shape is one it supports.
bool hopper_prefill_supports(int64_t head_dim, int64_t hq, int64_t hkv, int64_t block_size);
// SMs of the current device (asked once per process: every rank's GPU is the same kind).
int multiprocessor_count();
// The Hopper kernel's query positions a CTA for G = Hq / Hkv q heads a kv head (G <= 16): its
// kHopperPrefillRows rows hold the G heads at kHopperPrefillRows / G positions each, rounded down
// to a multiple of 8 (a head's rows start on a swizzle atom; G 5: 24 positions, 120 rows).
constexpr int64_t kHopperPrefillRows = 128;
constexpr int64_t hopper_prefill_positions(int64_t group) {
  return kHopperPrefillRows / group / 8 * 8;
}
// Its CTAs over one sequence of `rows` queries.
inline int64_t hopper_prefill_ctas(int64_t rows, int64_t hq, int64_t hkv) {
  const int64_t positions = hopper_prefill_positions(hq / hkv);
  return (rows + positions - 1) / positions * hkv;
}
// The kernel prefill_attention(p, stream) picks: kHopper where it supports the shape, else kMma.
PrefillKernel prefill_attention_kernel(int64_t head_dim, int64_t hq, int64_t hkv,
                                       int64_t block_size);
void prefill_attention(const PrefillAttentionParams& p, cudaStream_t stream);
// Runs the named kernel (tests and benchmarks compare them); kHopper on a shape or device it
// does not support throws.
void prefill_attention(const PrefillAttentionParams& p, PrefillKernel kernel, cudaStream_t stream);
// The CUDA decode kernels: kLanes (lane groups of 16 lanes per token row, FMAs and shuffles;
// every shape) and kMma (mma.sync for the dot products and the weighted sum of V rows; head
// dim 128 with up to 8 query heads per kv head, Qwen3's shapes). Same ring, plan and merges,
// outputs within bf16 rounding of each other.
enum class DecodeKernel { kLanes, kMma };
const char* decode_kernel_name(DecodeKernel kernel);
bool mma_decode_supports(int64_t head_dim, int64_t hq, int64_t hkv);
// The kernel decode_attention(p, stream) picks: kMma where it supports the shape, unless the
// environment has NANOVLLM_DECODE_ATTENTION=lanes (whole-run comparisons; a value other than
// lanes, mma or auto fails a CHECK naming the variable).
DecodeKernel decode_attention_kernel(int64_t head_dim, int64_t hq, int64_t hkv);
void decode_attention(const DecodeAttentionParams& p, cudaStream_t stream);
// How a CTA of the split kernel walks the pieces of its range with kMma at up to 2 query heads
// per kv head, on any cache (elsewhere it is ignored): kPieces one by one, the ring drained and
// refilled at each; kStream through one ring, each next piece's query coming with it. kAuto
// streams from a batch with as many (sequence, kv head) groups as the grid has CTAs,
// unless the environment has NANOVLLM_DECODE_WALK=pieces|stream (whole-run comparisons; a
// value other than those or auto fails a CHECK naming the variable).
enum class DecodeWalk { kAuto, kPieces, kStream };
// How the split groups of a call with scratch are formed and merged: kDealt, the tiles of the
// whole batch dealt over every resident CTA slot, merged by counters or a merge kernel (see
// split_out); kCluster, one thread-block cluster of 16 CTAs per (sequence, kv head) where B *
// Hkv * 16 CTAs fit one an SM, else of 8 where B * Hkv * 8 fit two an SM, merged inside the
// cluster (kernels/cuda/decode_attention_cluster.cuh). kAuto takes kCluster where it fits and
// 0 < max_context_len <= decode_cluster_context_bound() (longer contexts read faster dealt over
// every CTA slot), unless NANOVLLM_DECODE_CLUSTER=off (whole-run comparisons; "8" or "16" force a
// size where it fits; a value other than off, 8, 16 or auto fails a CHECK naming the variable).
enum class DecodeMerge { kAuto, kDealt, kCluster };
// Whether kCluster takes a batch of `batch` sequences over `hkv` kv heads with `cells` scratch
// cells (the current device's SM count bounds it).
bool decode_cluster_fits(int64_t batch, int64_t hkv, int64_t cells);
// The longest max_context_len at which kAuto merges such a batch (hq query heads of head_dim)
// inside clusters, 0 where it never does: a few tiles a CTA, fewer on a grid of two CTAs an SM
// (decode_attention.cu's cluster_context_bound gives the figures). On an H200: 4,096 for one
// sequence of the 0.6B shape (16 q / 8 kv heads), 2,048 for two, 1,280 for three or four.
int decode_cluster_context_bound(int64_t batch, int64_t hq, int64_t hkv, int64_t head_dim,
                                 int64_t cells);
// Runs the named kernel (tests and benchmarks compare them, and the walks and merges); kMma on a
// shape it does not take, or kCluster on a batch that does not fit, fails a CHECK.
void decode_attention(const DecodeAttentionParams& p, DecodeKernel kernel, cudaStream_t stream,
                      DecodeWalk walk = DecodeWalk::kAuto, DecodeMerge merge = DecodeMerge::kAuto);
// split_out / split_lse cells with which the CUDA decode kernel uses every resident CTA slot of
// the current device for this head shape (sizes its scratch independently of batch and lengths).
int64_t decode_attention_split_cells(int64_t hq, int64_t hkv, int64_t head_dim);
}  // namespace cuda

inline void prefill_attention(const PrefillAttentionParams& p, const ExecContext& ctx) {
  if (p.q.on_cpu())
    cpu::prefill_attention(p, ctx.cpu_threads);
  else
    cuda::prefill_attention(p, ctx.stream);
}
inline void decode_attention(const DecodeAttentionParams& p, const ExecContext& ctx) {
  if (p.q.on_cpu())
    cpu::decode_attention(p, ctx.cpu_threads);
  else
    cuda::decode_attention(p, ctx.stream);
}

}  // namespace nanovllm::kernels
