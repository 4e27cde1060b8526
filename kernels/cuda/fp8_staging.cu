// Staging of an fp8 cache for the Hopper prefill: the blocks one prefill call reads, dequantized
// into bf16 staging blocks, so the kernel's TMA and wgmma (bf16 operands only) serve an fp8
// cache unchanged. Dequantizing is exact (fp8 times a power of two fits bf16) and cheap beside
// the attention: it reads 1 + 1/D bytes and writes 2 per value once per layer, while the
// prefill's work grows with q_len x k_len.
//
// Grid (blocks of the longest sequence, B): CTA (i, b) stages block i of sequence b, if it has
// one, into staging block first(b) + i, where first(b) = the blocks of sequences 0 .. b-1, and
// writes that number into the staging block table.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/fp8_kv.cuh"
#include "kernels/cuda/prefill_attention_kernels.h"

namespace nanovllm::kernels::cuda {
namespace {

constexpr int kThreads = 256;

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

template <int D>
__global__ void __launch_bounds__(kThreads) stage_fp8_kernel(const StageArgs a) {
  const int i = blockIdx.x, b = blockIdx.y;
  const int blocks = (a.cu_k[b + 1] - a.cu_k[b] + a.block_size - 1) / a.block_size;
  if (i >= blocks) return;
  __shared__ int first;
  if (threadIdx.x == 0) {  // a few hundred sequences at most: one thread's loop is enough
    int n = 0;
    for (int s = 0; s < b; ++s) n += (a.cu_k[s + 1] - a.cu_k[s] + a.block_size - 1) / a.block_size;
    first = n;
    a.staging_tables[b * a.st_stride + i] = n + i;
  }
  __syncthreads();
  const int64_t src = a.block_tables[b * a.bt_stride + i], dst = first + i;
  const int64_t rows = static_cast<int64_t>(a.block_size) * a.hkv;  // (token, kv head) rows
  constexpr int kPieces = D / 8;                                    // 8 values each
  for (int64_t idx = threadIdx.x; idx < rows * kPieces; idx += kThreads) {
    const int64_t row = idx / kPieces;
    const int piece = static_cast<int>(idx % kPieces);
    const int o = static_cast<int>(row / a.hkv), h = static_cast<int>(row % a.hkv);
    const int64_t from = (src * rows + row) * D + piece * 8,
                  to = (dst * rows + row) * D + piece * 8;
    const int64_t e = (src * a.hkv + h) * a.block_size + o;
    float f[8];
    Bf16x8 out;
    fp8x8_to_f32(*reinterpret_cast<const uint2*>(a.k_cache + from), f);
    const float ks = pow2i(a.k_scale[e]);
#pragma unroll
    for (int j = 0; j < 8; ++j) out.v[j] = to_bf16(f[j] * ks);
    store8(a.staging_k + to, out);
    fp8x8_to_f32(*reinterpret_cast<const uint2*>(a.v_cache + from), f);
    const float vs = pow2i(a.v_scale[e]);
#pragma unroll
    for (int j = 0; j < 8; ++j) out.v[j] = to_bf16(f[j] * vs);
    store8(a.staging_v + to, out);
  }
}

}  // namespace

PagedKV stage_fp8_blocks(const PrefillAttentionParams& p, cudaStream_t stream) {
  const PagedKV& kv = p.kv;
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
  const int64_t width = (p.max_seqlen_k + bs - 1) / bs;
  if (batch > 0 && width > 0) {
    CHECK_LE(batch, 65535);
    DISPATCH_HEAD_DIM(d, D, {
      stage_fp8_kernel<D><<<dim3(static_cast<unsigned>(width), static_cast<unsigned>(batch)),
                            kThreads, 0, stream>>>(a);
    });
    CUDA_CHECK_LAUNCH();
  }
  return {p.staging_k, p.staging_v, p.staging_tables};
}

}  // namespace nanovllm::kernels::cuda
