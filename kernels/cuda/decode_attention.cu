// Paged decode attention (one query per sequence) with flash-decoding split-KV.
//
// Grid (splits, Hkv, B): a block serves one kv head and its G = Hq / Hkv query heads, so each
// K/V row is read once for the whole group. Sequence b's context is cut into `splits` equal
// ranges, len_b = ceil(context_lens[b] / splits), decided on the device so a CUDA graph
// captured once stays right for any context length. Inside a block, lane groups of D/8 lanes
// (16 bytes each) own one token at a time and keep their own online-softmax state; the
// groups are merged through shared memory at the end. With one split the block writes out
// directly; otherwise it writes a normalised partial and its log2-sum-exp into the scratch,
// and combine_kernel merges the splits.
//
// Split choice: no scratch (split_out.data == null) means one split. Otherwise enough splits
// to put ~4 blocks on every SM, at most max_splits (split_lse.size(2)) and at most one split
// per 64 tokens of max_context_len.
#include <algorithm>
#include <cmath>

#include "kernels/attention.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dispatch.cuh"

namespace nanovllm::kernels::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kUnroll = 4;  // tokens in flight per lane group
constexpr float kLog2e = 1.4426950408889634f;

struct DecodeArgs {
  bf16* out;                  // [B, Hq, D], strides out_tok, out_head
  int64_t out_tok, out_head;
  const bf16* q;              // [B, Hq, D], strides q_tok, q_head
  int64_t q_tok, q_head;
  const bf16* k_cache;        // [num_blocks, block_size, Hkv, D] contiguous
  const bf16* v_cache;        // same
  const int32_t* block_tables;  // [B, bt_stride]
  int64_t bt_stride;
  const int32_t* context_lens;  // [B]
  float* split_out;           // [B, Hq, max_splits, D] contiguous
  float* split_lse;           // [B, Hq, max_splits] contiguous, log2 domain
  int max_splits;
  int block_size, hq, hkv;
  float scale_log2;           // scale * log2(e): scores live in the log2 domain
};

template <int D, int G>
__global__ void __launch_bounds__(kWarps * 32) decode_kernel(const DecodeArgs a) {
  constexpr int kLanes = D / 8;       // lanes per token (16 bytes each)
  constexpr int kRows = 32 / kLanes;  // tokens per warp step
  constexpr int kGroups = kWarps * kRows;
  __shared__ float sm_m[kGroups][G];
  __shared__ float sm_l[kGroups][G];
  __shared__ float sm_acc[kGroups][G][D];

  const int split = blockIdx.x, nsplit = gridDim.x, hk = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int dl = lane % kLanes, group = warp * kRows + lane / kLanes;
  const int ctx = a.context_lens[b];
  const int len = (ctx + nsplit - 1) / nsplit;
  const int start = split * len, end = min(start + len, ctx);

  float q[G][8];
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

  const int32_t* bt = a.block_tables + b * a.bt_stride;
  const int64_t row = static_cast<int64_t>(a.hkv) * D;  // elements per cache slot
  // The trip count must be the same for every lane (block-uniform): the score shuffles below
  // need the whole warp, and a lane group that left the loop early would never arrive (this
  // hung on an H200 when the context was not a multiple of kGroups * kUnroll).
  for (int tile = start; tile < end; tile += kGroups * kUnroll) {
    const int base = tile + group;
    Bf16x8 kr[kUnroll], vr[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int tok = base + u * kGroups;
      if (tok < end) {
        const int64_t slot = static_cast<int64_t>(bt[tok / a.block_size]) * a.block_size +
                             tok % a.block_size;
        const int64_t off = slot * row + hk * D + dl * 8;
        kr[u] = load8(a.k_cache + off);
        vr[u] = load8(a.v_cache + off);
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) kr[u].v[j] = vr[u].v[j] = to_bf16(0.f);
      }
    }
    // Scores first, all lanes on the same path (no branch around the shuffles).
    float sc[kUnroll][G];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const bool valid = base + u * kGroups < end;
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float s = 0.f;
#pragma unroll
        for (int j = 0; j < 8; ++j) s += q[g][j] * to_f32(kr[u].v[j]);
        // xor < kLanes stays inside a lane group.
#pragma unroll
        for (int o = kLanes / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        sc[u][g] = valid ? s : -INFINITY;
      }
    }
    // Branch-free online softmax: an invalid token has p = 0 and leaves the state as it was.
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float m_new = fmaxf(m[g], sc[u][g]);
        const float m_use = m_new == -INFINITY ? 0.f : m_new;
        const float corr = exp2f(m[g] - m_use);  // m[g] = -inf -> 0
        const float p = exp2f(sc[u][g] - m_use);  // invalid -> 0
        l[g] = l[g] * corr + p;
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[g][j] = acc[g][j] * corr + p * to_f32(vr[u].v[j]);
        m[g] = m_new;
      }
    }
  }

#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int j = 0; j < 8; ++j) sm_acc[group][g][dl * 8 + j] = acc[g][j];
    if (dl == 0) {
      sm_m[group][g] = m[g];
      sm_l[group][g] = l[g];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * D; idx += kWarps * 32) {
    const int g = idx / D, d = idx % D;
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < kGroups; ++i) mx = fmaxf(mx, sm_m[i][g]);
    float sum = 0.f, o = 0.f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int i = 0; i < kGroups; ++i) {
        const float w = exp2f(sm_m[i][g] - mx);
        sum += sm_l[i][g] * w;
        o += sm_acc[i][g][d] * w;
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

int choose_splits(const DecodeAttentionParams& p, int64_t batch, int64_t hkv) {
  if (p.split_out.data == nullptr || p.split_lse.data == nullptr) return 1;
  const int64_t max_splits = p.split_lse.size(2);
  const int64_t base_blocks = batch * hkv;
  const int64_t want = (4 * sm_count() + base_blocks - 1) / base_blocks;
  const int64_t by_len = std::max<int64_t>(1, (p.max_context_len + 63) / 64);
  return static_cast<int>(std::max<int64_t>(1, std::min({want, max_splits, by_len})));
}

}  // namespace

void decode_attention(const DecodeAttentionParams& p, cudaStream_t stream) {
  check_cuda_tensor(p.out, DType::BF16, "decode out");
  check_cuda_tensor(p.q, DType::BF16, "decode q");
  check_cuda_tensor(p.kv.k_cache, DType::BF16, "k_cache");
  check_cuda_tensor(p.kv.v_cache, DType::BF16, "v_cache");
  check_cuda_tensor(p.kv.block_tables, DType::I32, "block_tables");
  check_cuda_tensor(p.context_lens, DType::I32, "context_lens");
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
  a.hq = static_cast<int>(hq);
  a.hkv = static_cast<int>(hkv);
  a.scale_log2 = p.scale * kLog2e;
  const int nsplit = choose_splits(p, batch, hkv);
  if (nsplit > 1) {
    check_cuda_tensor(p.split_out, DType::F32, "split_out");
    check_cuda_tensor(p.split_lse, DType::F32, "split_lse");
    CHECK(p.split_out.is_contiguous() && p.split_lse.is_contiguous());
    CHECK_EQ(p.split_lse.size(0), batch);
    CHECK_EQ(p.split_lse.size(1), hq);
    CHECK_EQ(p.split_out.size(2), p.split_lse.size(2));
    CHECK_EQ(p.split_out.size(3), dim);
    a.split_out = p.split_out.ptr<float>();
    a.split_lse = p.split_lse.ptr<float>();
    a.max_splits = static_cast<int>(p.split_lse.size(2));
  }
  const dim3 grid(nsplit, static_cast<unsigned>(hkv), static_cast<unsigned>(batch));
  const int64_t group = hq / hkv;
  DISPATCH_HEAD_DIM(dim, D, {
    switch (group) {
      case 1: decode_kernel<D, 1><<<grid, kWarps * 32, 0, stream>>>(a); break;
      case 2: decode_kernel<D, 2><<<grid, kWarps * 32, 0, stream>>>(a); break;
      case 4: decode_kernel<D, 4><<<grid, kWarps * 32, 0, stream>>>(a); break;
      case 8: decode_kernel<D, 8><<<grid, kWarps * 32, 0, stream>>>(a); break;
      default: CHECK_MSG(false, "unsupported GQA group " << group << " (supported: 1, 2, 4, 8)");
    }
    CUDA_CHECK_LAUNCH();
    if (nsplit > 1) {
      combine_kernel<D><<<dim3(static_cast<unsigned>(hq), static_cast<unsigned>(batch)), D, 0,
                          stream>>>(a, nsplit);
      CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace nanovllm::kernels::cuda
