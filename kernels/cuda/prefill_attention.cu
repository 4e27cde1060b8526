// Variable-length causal prefill attention over the paged KV cache on tensor cores
// (FlashAttention-2 style: mma.sync m16n8k16 bf16, f32 online softmax in registers).
//
// Grid (m tiles, Hq, B); block = 4 warps serving kBlockM = 64 queries of one head, 16 rows a
// warp. K/V tiles of kBlockN = 64 keys are gathered through the block table with cp.async into
// a double-buffered, padded shared-memory ring (row pitch D + 8 keeps ldmatrix conflict-free),
// so the next tile's loads overlap this tile's math. P is rounded to bf16 for the P*V product
// (as FlashAttention does); softmax statistics stay in f32. Heavier (later) m tiles start first.
//
// An fp8 cache (FP8) takes a register-staged path instead of cp.async: each thread fetches its
// share of the next K/V tile (8 bytes a piece, plus the rows' exponents) into registers before
// this tile's math and writes it to shared memory as bf16 after, scaled by 2^e, which is exact
// (3 mantissa bits fit bf16's 7), so the math is the bf16 kernel's on the dequantized cache.
#include "kernels/attention.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/fp8_kv.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/paged_attention_args.cuh"
#include "kernels/cuda/prefill_attention_kernels.h"

namespace nanovllm::kernels::cuda {
namespace {

constexpr int kBlockM = 64;
constexpr int kBlockN = 64;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

// The paged operands (rows = Tq new tokens), then the sequences' bounds.
struct PrefillArgs : PagedAttentionArgs {
  const int32_t* cu_q;  // [B + 1]
  const int32_t* cu_k;  // [B + 1]
};

template <int D>
constexpr int smem_bytes() {
  return (kBlockM + 4 * kBlockN) * (D + 8) * 2;  // Q + 2 x (K, V)
}

template <int D, int FP8>
__global__ void __launch_bounds__(kThreads) prefill_kernel(const PrefillArgs a) {
  constexpr int kPitch = D + 8;   // smem row pitch in elements
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* sQ = reinterpret_cast<bf16*>(smem_raw);  // [kBlockM][kPitch]
  bf16* sK = sQ + kBlockM * kPitch;              // [2][kBlockN][kPitch]
  bf16* sV = sK + 2 * kBlockN * kPitch;          // [2][kBlockN][kPitch]

  const int b = blockIdx.z, h = blockIdx.y;
  const int q_begin = a.cu_q[b], q_len = a.cu_q[b + 1] - q_begin;
  const int k_len = a.cu_k[b + 1] - a.cu_k[b];
  const int m0 = (gridDim.x - 1 - blockIdx.x) * kBlockM;
  if (m0 >= q_len) return;
  const int hk = h / (a.hq / a.hkv);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int past = k_len - q_len;  // keys before the first query (cached prefix)
  const int n_end = min(k_len, past + min(m0 + kBlockM, q_len));
  const int n_tiles = (n_end + kBlockN - 1) / kBlockN;
  const int32_t* bt = a.block_tables + b * a.bt_stride;
  const int64_t kv_row = static_cast<int64_t>(a.hkv) * D;

  // Q tile (rows past q_len are zero-filled and never written out).
  for (int idx = tid; idx < kBlockM * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks;
    const bool ok = m0 + r < q_len;
    const bf16* src = ok ? a.q + (q_begin + m0 + r) * a.q_tok + h * a.q_head + c * 8 : a.q;
    cp_async16(sQ + r * kPitch + c * 8, src, ok ? 16 : 0);
  }
  const auto* k_cache = static_cast<const bf16*>(a.k_cache);
  const auto* v_cache = static_cast<const bf16*>(a.v_cache);
  auto load_kv = [&](int tile, int buf) {
    const int n0 = tile * kBlockN;
    for (int idx = tid; idx < kBlockN * kChunks; idx += kThreads) {
      const int r = idx / kChunks, c = idx % kChunks;
      const int j = n0 + r;
      const bool ok = j < k_len;
      int64_t off = 0;
      if (ok)
        off = (static_cast<int64_t>(bt[j / a.block_size]) * a.block_size + j % a.block_size) *
                  kv_row +
              hk * D + c * 8;
      cp_async16(sK + (buf * kBlockN + r) * kPitch + c * 8, k_cache + off, ok ? 16 : 0);
      cp_async16(sV + (buf * kBlockN + r) * kPitch + c * 8, v_cache + off, ok ? 16 : 0);
    }
  };
  // FP8: this thread's pieces idx = tid + i * kThreads of a tile: 8 fp8 values of row
  // idx / kChunks at dims (idx % kChunks) * 8, and the row's exponents.
  constexpr int kPieces = kBlockN * kChunks / kThreads;
  static_assert(kBlockN * kChunks % kThreads == 0);
  uint2 st_k[kPieces], st_v[kPieces];  // (the bf16 kernel never touches these)
  int st_ek[kPieces], st_ev[kPieces];
  auto fetch_fp8 = [&](int tile) {
    const auto* kb = static_cast<const unsigned char*>(a.k_cache);
    const auto* vb = static_cast<const unsigned char*>(a.v_cache);
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
      const int idx = tid + i * kThreads, r = idx / kChunks, c = idx % kChunks;
      const int j = tile * kBlockN + r;
      st_k[i] = st_v[i] = make_uint2(0u, 0u);
      st_ek[i] = st_ev[i] = 0;
      if (j < k_len) {
        const int64_t slot =
            static_cast<int64_t>(bt[j / a.block_size]) * a.block_size + j % a.block_size;
        const int64_t off = slot * kv_row + hk * D + c * 8;  // bytes: one per value
        st_k[i] = *reinterpret_cast<const uint2*>(kb + off);
        st_v[i] = *reinterpret_cast<const uint2*>(vb + off);
        const int64_t e = fp8_exponent_index(slot, hk, a.hkv, a.block_size);
        st_ek[i] = a.k_scale[e];
        st_ev[i] = a.v_scale[e];
      }
    }
  };
  auto put_fp8 = [&](int buf) {
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
      const int idx = tid + i * kThreads, r = idx / kChunks, c = idx % kChunks;
      float f[8];
      Bf16x8 o;
      kv8x8_to_f32<FP8>(st_k[i], f);
      const float ks = kv_row_scale<FP8>(st_ek[i]);
#pragma unroll
      for (int e = 0; e < 8; ++e) o.v[e] = to_bf16(f[e] * ks);
      store8(sK + (buf * kBlockN + r) * kPitch + c * 8, o);
      kv8x8_to_f32<FP8>(st_v[i], f);
      const float vs = kv_row_scale<FP8>(st_ev[i]);
#pragma unroll
      for (int e = 0; e < 8; ++e) o.v[e] = to_bf16(f[e] * vs);
      store8(sV + (buf * kBlockN + r) * kPitch + c * 8, o);
    }
  };
  if constexpr (FP8) {
    fetch_fp8(0);
    put_fp8(0);
  } else {
    load_kv(0, 0);
  }
  cp_async_commit();

  const int g = lane >> 2, t = lane & 3;
  const int row0 = m0 + warp * 16 + g;  // this lane's two query rows: row0, row0 + 8
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  uint32_t qf[D / 16][4];

  for (int tile = 0; tile < n_tiles; ++tile) {
    const int buf = tile & 1;
    if constexpr (FP8) {
      if (tile + 1 < n_tiles) fetch_fp8(tile + 1);  // in flight during this tile's math
      cp_async_wait<0>();                           // q (the only cp.async group)
    } else {
      if (tile + 1 < n_tiles) load_kv(tile + 1, buf ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    }
    __syncthreads();
    if (tile == 0) {
#pragma unroll
      for (int kc = 0; kc < D / 16; ++kc)
        ldmatrix_x4(qf[kc], sQ + (warp * 16 + (lane & 15)) * kPitch + kc * 16 + (lane >> 4) * 8);
    }
    const bf16* k_s = sK + buf * kBlockN * kPitch;
    const bf16* v_s = sV + buf * kBlockN * kPitch;

    // S = Q K^T for 16 rows x 64 keys: 8 n-blocks of 8 keys.
    float s[kBlockN / 8][4];
#pragma unroll
    for (int nb = 0; nb < kBlockN / 8; ++nb) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.f;
#pragma unroll
    for (int np = 0; np < kBlockN / 16; ++np) {
#pragma unroll
      for (int kc = 0; kc < D / 16; ++kc) {
        uint32_t r[4];
        ldmatrix_x4(r, k_s + (np * 16 + (lane >> 4) * 8 + (lane & 7)) * kPitch + kc * 16 +
                           ((lane >> 3) & 1) * 8);
        mma_bf16_16816(s[2 * np], qf[kc], r[0], r[1]);
        mma_bf16_16816(s[2 * np + 1], qf[kc], r[2], r[3]);
      }
    }

    // Scale into the log2 domain, mask (causal + tail), online softmax.
    const int n0 = tile * kBlockN;
    const bool needs_mask = n0 + kBlockN > k_len || n0 + kBlockN - 1 > past + m0;
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nb = 0; nb < kBlockN / 8; ++nb) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v = s[nb][e] * a.scale_log2;
        if (needs_mask) {
          const int j = n0 + nb * 8 + 2 * t + (e & 1);
          const int qi = row0 + (e >> 1) * 8;
          if (j >= k_len || j > past + qi) v = -INFINITY;
        }
        s[nb][e] = v;
        tile_max[e >> 1] = fmaxf(tile_max[e >> 1], v);
      }
    }
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float m_new = fmaxf(m_run[r], tile_max[r]);
      // Rows only ever fully masked are padding rows (>= q_len); keep them finite.
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      corr[r] = exp2f(m_run[r] - m_use);
      m_run[r] = m_new;
      l_run[r] *= corr[r];
#pragma unroll
      for (int nb = 0; nb < kBlockN / 8; ++nb) {
        s[nb][2 * r] = exp2f(s[nb][2 * r] - m_use);
        s[nb][2 * r + 1] = exp2f(s[nb][2 * r + 1] - m_use);
        l_run[r] += s[nb][2 * r] + s[nb][2 * r + 1];
      }
    }
#pragma unroll
    for (int db = 0; db < D / 8; ++db) {
      o[db][0] *= corr[0];
      o[db][1] *= corr[0];
      o[db][2] *= corr[1];
      o[db][3] *= corr[1];
    }

    // O += P V: P's accumulator layout is the A-fragment layout of the next mma.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint32_t pa[4] = {pack_bf16x2(s[2 * kk][0], s[2 * kk][1]),
                              pack_bf16x2(s[2 * kk][2], s[2 * kk][3]),
                              pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t r[4];
        ldmatrix_x4_trans(r, v_s + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * kPitch +
                                 dp * 16 + (lane >> 4) * 8);
        mma_bf16_16816(o[2 * dp], pa, r[0], r[1]);
        mma_bf16_16816(o[2 * dp + 1], pa, r[2], r[3]);
      }
    }
    // FP8: buf ^ 1 was last read by tile - 1's math, which every thread finished before the
    // barrier ending that iteration.
    if constexpr (FP8) {
      if (tile + 1 < n_tiles) put_fp8(buf ^ 1);
    }
    __syncthreads();  // this buffer is refilled by the next iteration's prefetch
  }
  cp_async_wait<0>();

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
    l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
    const int qi = row0 + r * 8;
    if (qi >= q_len) continue;
    const float inv = l_run[r] > 0.f ? 1.f / l_run[r] : 0.f;
    bf16* dst = a.out + (q_begin + qi) * a.out_tok + h * a.out_head;
#pragma unroll
    for (int db = 0; db < D / 8; ++db) {
      const uint32_t v = pack_bf16x2(o[db][2 * r] * inv, o[db][2 * r + 1] * inv);
      *reinterpret_cast<uint32_t*>(dst + db * 8 + 2 * t) = v;
    }
  }
}

}  // namespace

void prefill_attention_mma(const PrefillAttentionParams& p, cudaStream_t stream) {
  check_paged_operands(p.out, p.q, p.kv, "prefill out", "prefill q");
  check_cuda_tensor(p.cu_seqlens_q, DType::kI32, "cu_seqlens_q");
  check_cuda_tensor(p.cu_seqlens_k, DType::kI32, "cu_seqlens_k");
  const int64_t hq = p.q.size(1), dim = p.q.size(2);
  const int64_t batch = p.cu_seqlens_q.numel() - 1;
  CHECK_EQ(p.cu_seqlens_k.numel(), batch + 1);
  CHECK(p.out.stride[0] % 2 == 0 && p.out.stride[1] % 2 == 0);
  if (batch <= 0 || p.max_seqlen_q <= 0) return;
  CHECK_LE(batch, 65535);
  PrefillArgs a{paged_attention_args(p.out, p.q, p.kv, p.scale)};
  a.cu_q = p.cu_seqlens_q.ptr<int32_t>();
  a.cu_k = p.cu_seqlens_k.ptr<int32_t>();
  const dim3 grid(ceil_div(p.max_seqlen_q, kBlockM), static_cast<unsigned>(hq),
                  static_cast<unsigned>(batch));
  DISPATCH_HEAD_DIM(dim, D, {
    const auto run = [&]<int FP8>() {
      constexpr int bytes = smem_bytes<D>();
      CUDA_CHECK(cudaFuncSetAttribute(prefill_kernel<D, FP8>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
      prefill_kernel<D, FP8><<<grid, kThreads, bytes, stream>>>(a);
    };
    dispatch_kv_cache(kv_cache_format(p.kv.k_cache.dtype), run);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace nanovllm::kernels::cuda
