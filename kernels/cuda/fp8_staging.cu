// Staging of an 8-bit cache (fp8, or int8) for the Hopper prefill: the blocks one prefill call
// reads, dequantized into bf16 staging blocks, so the kernel's TMA and wgmma (bf16 operands
// only) serve an 8-bit cache unchanged. Dequantizing is exact (fp8 times a power of two fits bf16)
// and cheap beside the attention: it reads 1 + 1/D bytes and writes 2 per value once per layer,
// while the prefill's work grows with q_len x k_len.
//
// Grid (chunks of kTokens tokens over the longest sequence, B): CTA (c, b) stages tokens
// c kTokens .. + kTokens - 1 of sequence b that exist (< its k_len) into staging block
// first(b) + token / block_size, where first(b) = the blocks of sequences 0 .. b-1, and writes
// the staging block table's entries of the blocks that start in its chunk. Why chunks and not
// whole blocks: a CTA a block left a 512-token prompt's step (64 blocks) with 64 CTAs of
// dependent 8-byte loads, about 0.1 ms a layer; tokens past k_len (a last block's tail) are
// not staged at all, since the Hopper kernel masks their scores and zeroes their V rows.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/fp8_kv.cuh"
#include "kernels/cuda/prefill_attention_kernels.h"

namespace nanovllm::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTokens = 32;  // tokens a CTA stages

struct StageArgs {
  const uint8_t* k_cache;  // [num_blocks, bs, Hkv, D] fp8
  const uint8_t* v_cache;
  const int8_t* k_scale;  // [num_blocks, Hkv, bs]
  const int8_t* v_scale;
  const int32_t* block_tables;  // [B, bt_stride]
  int64_t bt_stride;
  const int32_t* cu_k;  // [B + 1]
  bf16* staging_k;      // [staging_blocks, bs, Hkv, D] bf16
  bf16* staging_v;
  int32_t* staging_tables;  // [B, st_stride]
  int64_t st_stride;
  int block_size, hkv;
};

// 16 cached values (one 16-byte load) times their row's scale as bf16, into dst (16 values,
// 16-byte aligned). F: kCacheE4m3 (exact: fp8 times a power of two fits bf16) or kCacheInt8
// (rounded to bf16's 8 bits, a quarter of int8's half step at the row's largest value).
template <int F>
__device__ __forceinline__ void dequantize16(const uint4& raw, int e, bf16* dst) {
  const float s = kv_row_scale<F>(e);
  const uint2 halves[2] = {make_uint2(raw.x, raw.y), make_uint2(raw.z, raw.w)};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float f[8];
    kv8x8_to_f32<F>(halves[h], f);
    Bf16x8 out;
#pragma unroll
    for (int j = 0; j < 8; ++j) out.v[j] = to_bf16(f[j] * s);
    store8(dst + 8 * h, out);
  }
}

template <int D, int F>
__global__ void __launch_bounds__(kThreads) stage_fp8_kernel(const StageArgs a) {
  const int b = blockIdx.y;
  const int k_len = a.cu_k[b + 1] - a.cu_k[b];
  const int t0 = static_cast<int>(blockIdx.x) * kTokens;
  if (t0 >= k_len) return;
  const int bs = a.block_size;
  __shared__ int first;
  if (threadIdx.x == 0) first = 0;
  __syncthreads();
  int blocks_before = 0;  // this thread's share of first(b)
  for (int s = threadIdx.x; s < b; s += kThreads)
    blocks_before += (a.cu_k[s + 1] - a.cu_k[s] + bs - 1) / bs;
  if (blocks_before > 0) atomicAdd(&first, blocks_before);
  __syncthreads();
  const int t1 = min(k_len, t0 + kTokens);
  // The blocks whose first token is in this chunk: their staging table entries.
  for (int i = (t0 + bs - 1) / bs + static_cast<int>(threadIdx.x); i * bs < t1; i += kThreads)
    a.staging_tables[b * a.st_stride + i] = first + i;
  constexpr int kPieces = D / 16;  // 16-byte loads a (token, kv head) row
  const int items = (t1 - t0) * a.hkv * kPieces;
#pragma unroll 2
  for (int idx = threadIdx.x; idx < items; idx += kThreads) {
    const int row = idx / kPieces, piece = idx % kPieces;
    const int tok = t0 + row / a.hkv, h = row % a.hkv;
    const int blk = tok / bs, o = tok % bs;
    const int64_t src = a.block_tables[b * a.bt_stride + blk], dst = first + blk;
    const int64_t from = ((src * bs + o) * a.hkv + h) * D + piece * 16,
                  to = ((dst * bs + o) * a.hkv + h) * D + piece * 16;
    const int64_t e = (src * a.hkv + h) * bs + o;
    const uint4 k = *reinterpret_cast<const uint4*>(a.k_cache + from);
    const uint4 v = *reinterpret_cast<const uint4*>(a.v_cache + from);
    const int ke = a.k_scale[e], ve = a.v_scale[e];
    dequantize16<F>(k, ke, a.staging_k + to);
    dequantize16<F>(v, ve, a.staging_v + to);
  }
}

}  // namespace

PagedKV stage_fp8_blocks(const PrefillAttentionParams& p, cudaStream_t stream) {
  const PagedKV& kv = p.kv;
  const int format = kv_cache_format(kv.k_cache.dtype);
  CHECK_MSG(format != 0, "staging reads an 8-bit cache, not " << dtype_name(kv.k_cache.dtype));
  const int64_t batch = p.cu_seqlens_k.numel() - 1, bs = kv.k_cache.size(1),
                hkv = kv.k_cache.size(2), d = kv.k_cache.size(3);
  for (const TensorView* t : {&p.staging_k, &p.staging_v}) {
    check_cuda_tensor(*t, DType::kBf16, "prefill staging_k / staging_v");
    CHECK(t->is_contiguous() && aligned16(t->data));
    CHECK_EQ(t->ndim, 4);
    CHECK_EQ(t->size(1), bs);
    CHECK_EQ(t->size(2), hkv);
    CHECK_EQ(t->size(3), d);
  }
  check_cuda_tensor(p.staging_tables, DType::kI32, "prefill staging_tables");
  CHECK_EQ(p.staging_tables.ndim, 2);
  CHECK_EQ(p.staging_tables.size(0), kv.block_tables.size(0));
  CHECK_EQ(p.staging_tables.size(1), kv.block_tables.size(1));
  CHECK_EQ(p.staging_k.size(0), p.staging_v.size(0));
  StageArgs a{};
  a.k_cache = static_cast<const uint8_t*>(kv.k_cache.data);
  a.v_cache = static_cast<const uint8_t*>(kv.v_cache.data);
  a.k_scale = kv.k_scale.ptr<int8_t>();
  a.v_scale = kv.v_scale.ptr<int8_t>();
  a.block_tables = kv.block_tables.ptr<int32_t>();
  a.bt_stride = kv.block_tables.stride[0];
  a.cu_k = p.cu_seqlens_k.ptr<int32_t>();
  a.staging_k = p.staging_k.ptr<bf16>();
  a.staging_v = p.staging_v.ptr<bf16>();
  a.staging_tables = p.staging_tables.ptr<int32_t>();
  a.st_stride = p.staging_tables.stride[0];
  a.block_size = static_cast<int>(bs);
  a.hkv = static_cast<int>(hkv);
  const int64_t width = (p.max_seqlen_k + kTokens - 1) / kTokens;
  if (batch > 0 && width > 0) {
    CHECK_LE(batch, 65535);
    const dim3 grid(static_cast<unsigned>(width), static_cast<unsigned>(batch));
    DISPATCH_HEAD_DIM(d, D, {
      dispatch_kv_cache(format, [&]<int F>() {
        if constexpr (F != 0) stage_fp8_kernel<D, F><<<grid, kThreads, 0, stream>>>(a);
      });
    });
    CUDA_CHECK_LAUNCH();
  }
  return {p.staging_k, p.staging_v, p.staging_tables};
}

}  // namespace nanovllm::kernels::cuda
