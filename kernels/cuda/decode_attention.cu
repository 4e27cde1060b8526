// Paged decode attention (one query per sequence) with flash-decoding split-KV.
//
// Grid (splits, Hkv, B): a CTA serves one kv head and its G = Hq / Hkv query heads, so each
// K/V row is read from memory once for the whole group. The context is cut into tiles of
// kTokens tokens (16 KB of K+V); split s of sequence b takes a contiguous run of whole tiles,
// decided on the device from context_lens[b] so a CUDA graph captured once stays right for
// any context length. Tiles stream through a kStages-deep cp.async ring in shared memory:
// while the CTA computes tile t, tiles t+1 .. t+kStages-1 are in flight, which keeps enough
// bytes outstanding per SM to run at memory bandwidth without holding K/V in registers.
//
// Compute: lane groups of D/8 lanes (16 bytes each) own one token row of the tile per step
// and keep their own online-softmax state (one rescale per tile, not per token); the groups
// are merged through shared memory at the end. With one split the CTA writes out directly;
// otherwise it writes a normalised partial and its log2-sum-exp into the scratch, and
// combine_kernel merges the splits.
//
// Split choice: no scratch (split_out.data == null) means one split. Otherwise as many splits
// as fit the CTAs in one wave (resident CTAs per SM x SMs), at most max_splits
// (split_lse.size(2)) and leaving at least two tiles per split.
#include <algorithm>
#include <cmath>

#include "kernels/attention.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/decode_attention_tile.cuh"
#include "kernels/cuda/dispatch.cuh"

namespace nanovllm::kernels::cuda {
namespace {

using decode::DecodeArgs;
using decode::kLog2e;
using decode::kStages;
using decode::kSteps;
using decode::kThreads;
using decode::Layout;
using decode::load_tile;

template <int D, int G>
__global__ void __launch_bounds__(kThreads, G <= 4 ? 4 : 2) decode_kernel(const DecodeArgs a) {
  using L = Layout<D>;
  // The K ring [kStages][kTokens, D] then the V ring, bf16; reused for the final merge.
  __shared__ float4 smem[L::kSmemBytes / 16];
  bf16* const k_ring = reinterpret_cast<bf16*>(smem);
  bf16* const v_ring = k_ring + kStages * L::kTileElems;

  const int split = blockIdx.x, nsplit = gridDim.x, hk = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int dl = lane % L::kLanes, group = warp * L::kRows + lane / L::kLanes;
  const int32_t* bt = a.block_tables + b * a.bt_stride;
  // Everything that bounds a loop or a barrier below is CTA-uniform.
  const int ctx = a.context_lens[b];
  const int tiles_total = (ctx + L::kTokens - 1) / L::kTokens;
  const int tiles_per_split = (tiles_total + nsplit - 1) / nsplit;
  const int first_tile = split * tiles_per_split;
  const int ntiles = max(0, min(tiles_per_split, tiles_total - first_tile));

  // Prologue: fill kStages - 1 slots of the ring. Every thread commits one group per slot,
  // empty or not, so the group count (and cp_async_wait's meaning) is the same everywhere.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ntiles)
      load_tile<D>(a, bt, hk, (first_tile + s) * L::kTokens, ctx, k_ring + s * L::kTileElems,
                   v_ring + s * L::kTileElems);
    cp_async_commit();
  }

  float q[G][8];  // this lane's 8 dims of each query head, pre-scaled to the log2 domain
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const Bf16x8 v = load8(a.q + b * a.q_tok + (hk * G + g) * a.q_head + dl * 8);
#pragma unroll
    for (int j = 0; j < 8; ++j) q[g][j] = to_f32(v.v[j]) * a.scale_log2;
  }
  float m[G], l[G], acc[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[g][j] = 0.f;
  }

  for (int t = 0; t < ntiles; ++t) {
    cp_async_wait<kStages - 2>();  // this thread's copies of tile t have landed
    __syncthreads();               // everyone's have; and everyone is done with tile t - 1
    {
      const int nt = t + kStages - 1;  // refill the slot tile t - 1 used
      if (nt < ntiles) {
        const int slot = nt % kStages;
        load_tile<D>(a, bt, hk, (first_tile + nt) * L::kTokens, ctx, k_ring + slot * L::kTileElems,
                     v_ring + slot * L::kTileElems);
      }
      cp_async_commit();
    }
    const int slot = t % kStages;
    const int tok0 = (first_tile + t) * L::kTokens;
    const bf16* ks = k_ring + slot * L::kTileElems + group * D + dl * 8;
    const bf16* vs = v_ring + slot * L::kTileElems + group * D + dl * 8;

    // Scores of this group's kSteps tokens (rows u * kGroups + group); every lane runs every
    // shuffle (no branch around them), masked tokens become -inf afterwards.
    float sc[kSteps][G];
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const Bf16x8 kr = *reinterpret_cast<const Bf16x8*>(ks + u * L::kGroups * D);
      float kf[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) kf[j] = to_f32(kr.v[j]);
      const bool valid = tok0 + u * L::kGroups + group < ctx;
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float s = 0.f;
#pragma unroll
        for (int j = 0; j < 8; ++j) s = fmaf(q[g][j], kf[j], s);
          // xor < kLanes stays inside a lane group.
#pragma unroll
        for (int o = L::kLanes / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        sc[u][g] = valid ? s : -INFINITY;
      }
    }
    // One online-softmax rescale per tile; masked tokens get p = 0 (their V is zero-filled,
    // never NaN, so p * v = 0).
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float mt = sc[0][g];
#pragma unroll
      for (int u = 1; u < kSteps; ++u) mt = fmaxf(mt, sc[u][g]);
      const float m_new = fmaxf(m[g], mt);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      const float corr = fast_exp2(m[g] - m_use);  // m[g] = -inf -> 0
      m[g] = m_new;
      l[g] *= corr;
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[g][j] *= corr;
#pragma unroll
      for (int u = 0; u < kSteps; ++u) {
        sc[u][g] = fast_exp2(sc[u][g] - m_use);  // now p; masked -> 0
        l[g] += sc[u][g];
      }
    }
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const Bf16x8 vr = *reinterpret_cast<const Bf16x8*>(vs + u * L::kGroups * D);
      float vf[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) vf[j] = to_f32(vr.v[j]);
#pragma unroll
      for (int g = 0; g < G; ++g) {
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[g][j] = fmaf(sc[u][g], vf[j], acc[g][j]);
      }
    }
  }
  cp_async_wait<0>();  // only empty groups can be pending here; keep the ring quiet anyway
  __syncthreads();     // the ring is free for the merge buffers

  // Merge the lane groups: sm_acc [kGroups][G][D], sm_m / sm_l [kGroups][G], all f32.
  float* const sm_acc = reinterpret_cast<float*>(smem);
  float* const sm_m = sm_acc + L::kGroups * G * D;
  float* const sm_l = sm_m + L::kGroups * G;
  static_assert(L::kGroups * G * (D + 2) * 4 <= L::kSmemBytes);
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int j = 0; j < 8; ++j) sm_acc[(group * G + g) * D + dl * 8 + j] = acc[g][j];
    if (dl == 0) {
      sm_m[group * G + g] = m[g];
      sm_l[group * G + g] = l[g];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * D; idx += kThreads) {
    const int g = idx / D, d = idx % D;
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < L::kGroups; ++i) mx = fmaxf(mx, sm_m[i * G + g]);
    float sum = 0.f, o = 0.f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int i = 0; i < L::kGroups; ++i) {
        const float w = fast_exp2(sm_m[i * G + g] - mx);
        sum += sm_l[i * G + g] * w;
        o += sm_acc[(i * G + g) * D + d] * w;
      }
    }
    const int h = hk * G + g;
    const float val = sum > 0.f ? o / sum : 0.f;
    if (nsplit == 1) {
      a.out[b * a.out_tok + h * a.out_head + d] = to_bf16(val);
    } else {
      const int64_t cell = (static_cast<int64_t>(b) * a.hq + h) * a.max_splits + split;
      a.split_out[cell * D + d] = val;
      if (d == 0) a.split_lse[cell] = sum > 0.f ? mx + log2f(sum) : -INFINITY;
    }
  }
}

// One block per (b, query head), one thread per dim: merges the splits by their lse.
template <int D>
__global__ void __launch_bounds__(D) combine_kernel(const DecodeArgs a, int nsplit) {
  const int h = blockIdx.x, b = blockIdx.y, d = threadIdx.x;
  const int64_t cell0 = (static_cast<int64_t>(b) * a.hq + h) * a.max_splits;
  float mx = -INFINITY;
  for (int s = 0; s < nsplit; ++s) mx = fmaxf(mx, a.split_lse[cell0 + s]);
  float sum = 0.f, o = 0.f;
  if (mx != -INFINITY) {
    for (int s = 0; s < nsplit; ++s) {
      const float w = exp2f(a.split_lse[cell0 + s] - mx);
      sum += w;
      o += w * a.split_out[(cell0 + s) * D + d];
    }
  }
  a.out[b * a.out_tok + h * a.out_head + d] = to_bf16(sum > 0.f ? o / sum : 0.f);
}

int sm_count() {
  int dev = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

// Resident CTAs per SM of one instantiation (asked once; every rank's GPU is the same kind).
template <int D, int G>
int ctas_per_sm() {
  static const int n = [] {
    int v = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, decode_kernel<D, G>, kThreads, 0));
    return std::max(v, 1);
  }();
  return n;
}

template <int D, int G>
int choose_splits(const DecodeAttentionParams& p, int64_t batch, int64_t hkv) {
  if (p.split_out.data == nullptr || p.split_lse.data == nullptr) return 1;
  const int64_t max_splits = p.split_lse.size(2);
  const int64_t slots = static_cast<int64_t>(sm_count()) * ctas_per_sm<D, G>();
  // Floor: a split count that spills past one wave leaves a tail of late CTAs.
  const int64_t want = slots / (batch * hkv);
  const int64_t tiles = (p.max_context_len + Layout<D>::kTokens - 1) / Layout<D>::kTokens;
  const int64_t by_len = tiles / 2;
  return static_cast<int>(std::max<int64_t>(1, std::min({want, max_splits, by_len})));
}

template <int D, int G>
void launch(const DecodeAttentionParams& p, DecodeArgs a, int64_t batch, int64_t hq, int64_t hkv,
            cudaStream_t stream) {
  const int nsplit = choose_splits<D, G>(p, batch, hkv);
  if (nsplit > 1) {
    check_cuda_tensor(p.split_out, DType::kF32, "split_out");
    check_cuda_tensor(p.split_lse, DType::kF32, "split_lse");
    CHECK(p.split_out.is_contiguous() && p.split_lse.is_contiguous());
    CHECK_EQ(p.split_lse.size(0), batch);
    CHECK_EQ(p.split_lse.size(1), hq);
    CHECK_EQ(p.split_out.size(0), batch);
    CHECK_EQ(p.split_out.size(1), hq);
    CHECK_EQ(p.split_out.size(2), p.split_lse.size(2));
    CHECK_EQ(p.split_out.size(3), D);
    a.split_out = p.split_out.ptr<float>();
    a.split_lse = p.split_lse.ptr<float>();
    a.max_splits = static_cast<int>(p.split_lse.size(2));
  }
  const dim3 grid(nsplit, static_cast<unsigned>(hkv), static_cast<unsigned>(batch));
  decode_kernel<D, G><<<grid, kThreads, 0, stream>>>(a);
  CUDA_CHECK_LAUNCH();
  if (nsplit > 1) {
    combine_kernel<D>
        <<<dim3(static_cast<unsigned>(hq), static_cast<unsigned>(batch)), D, 0, stream>>>(a,
                                                                                          nsplit);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

void decode_attention(const DecodeAttentionParams& p, cudaStream_t stream) {
  check_cuda_tensor(p.out, DType::kBf16, "decode out");
  check_cuda_tensor(p.q, DType::kBf16, "decode q");
  check_cuda_tensor(p.kv.k_cache, DType::kBf16, "k_cache");
  check_cuda_tensor(p.kv.v_cache, DType::kBf16, "v_cache");
  check_cuda_tensor(p.kv.block_tables, DType::kI32, "block_tables");
  check_cuda_tensor(p.context_lens, DType::kI32, "context_lens");
  CHECK(p.kv.k_cache.is_contiguous() && p.kv.v_cache.is_contiguous());
  const int64_t batch = p.q.size(0), hq = p.q.size(1), dim = p.q.size(2);
  const int64_t hkv = p.kv.k_cache.size(2);
  CHECK_EQ(p.kv.k_cache.size(3), dim);
  CHECK_EQ(p.out.size(0), batch);
  CHECK_EQ(p.out.size(1), hq);
  CHECK_EQ(p.q.stride[2], 1);
  CHECK_EQ(hq % hkv, 0);
  CHECK_EQ(p.context_lens.numel(), batch);
  CHECK_EQ(p.kv.block_tables.size(0), batch);
  CHECK(p.q.stride[1] % 8 == 0 && p.q.stride[0] % 8 == 0 && aligned16(p.q.data));
  // cp.async moves 16-byte pieces of cache rows.
  CHECK(aligned16(p.kv.k_cache.data) && aligned16(p.kv.v_cache.data));
  if (batch == 0) return;
  CHECK_LE(batch, 65535);
  DecodeArgs a{};
  a.out = p.out.ptr<bf16>();
  a.out_tok = p.out.stride[0];
  a.out_head = p.out.stride[1];
  a.q = p.q.ptr<bf16>();
  a.q_tok = p.q.stride[0];
  a.q_head = p.q.stride[1];
  a.k_cache = p.kv.k_cache.ptr<bf16>();
  a.v_cache = p.kv.v_cache.ptr<bf16>();
  a.block_tables = p.kv.block_tables.ptr<int32_t>();
  a.bt_stride = p.kv.block_tables.stride[0];
  a.context_lens = p.context_lens.ptr<int32_t>();
  a.block_size = static_cast<int>(p.kv.k_cache.size(1));
  CHECK_GT(a.block_size, 0);
  a.block_shift = -1;
  if ((a.block_size & (a.block_size - 1)) == 0) {
    a.block_shift = 0;
    while ((1 << a.block_shift) < a.block_size) ++a.block_shift;
  }
  a.hq = static_cast<int>(hq);
  a.hkv = static_cast<int>(hkv);
  a.scale_log2 = p.scale * kLog2e;
  const int64_t group = hq / hkv;
  DISPATCH_HEAD_DIM(dim, D, {
    switch (group) {
      case 1:
        launch<D, 1>(p, a, batch, hq, hkv, stream);
        break;
      case 2:
        launch<D, 2>(p, a, batch, hq, hkv, stream);
        break;
      case 4:
        launch<D, 4>(p, a, batch, hq, hkv, stream);
        break;
      case 8:
        launch<D, 8>(p, a, batch, hq, hkv, stream);
        break;
      default:
        CHECK_MSG(false, "unsupported GQA group " << group << " (supported: 1, 2, 4, 8)");
    }
  });
}

}  // namespace nanovllm::kernels::cuda
