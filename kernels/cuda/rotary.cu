// Qwen3's per-head q/k RMSNorm fused with neox-style rotary embedding, in place, and
// optionally (STORE) with the paged KV-cache store of the rotated k and of v, as bf16, fp8 or
// int8 (FP8: kCacheE4m3 or kCacheInt8; the row's max |x| from the warp, its exponent or scale
// code, then each lane's bytes).
// One warp per (token, head): lane l owns the pairs (i, i + D/2) for i = l + 32 j; a decode
// step's items each on a warp of their own, a prefill step's tokens each on a block.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/fp8_kv.cuh"
#include "kernels/cuda/qk_norm_rope_math.cuh"
#include "kernels/env_choice.h"
#include "kernels/rotary.h"

namespace nanovllm::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;  // the block-per-token kernel's warps
// Warps a block of the warp-per-item kernel. A small batch's few blocks start early beside the
// GEMM before them, 4 warps each. From kManyItemsTokens tokens that GEMM is cuBLAS's, which lets
// nothing start early, so every block is launched after it ends: 16 warps a block launch a
// quarter of the blocks. 0.6B decode step on an H200, greedy, batch 256 (2,048 -> 512 blocks):
// 3.049-3.097 -> 3.011-3.057 ms at context 193, 8.444-8.459 -> 8.391-8.405 at 1025 (two calls);
// batch 1-128 the same within the spread
// (bench/results/h200-2026-11-29-issue33_small_kernels_after_cublas.txt).
constexpr int kItemWarpsFew = 4;
constexpr int kItemWarpsMany = 16;
constexpr int kManyItemsTokens = 33;

struct RopeArgs {
  bf16* q;  // [T, Hq, D], strides q_tok, q_head
  int64_t q_tok, q_head;
  bf16* k;  // [T, Hkv, D], strides k_tok, k_head
  int64_t k_tok, k_head;
  const bf16* q_w;           // [D] or null (no norm)
  const bf16* k_w;           // [D] or null (no norm)
  const int32_t* positions;  // [T]
  const float* inv_freq;     // [D/2]: a few hundred bytes, read by every warp (L1/L2 hits)
  int hq, hkv, tokens;
  float eps, attention_scaling;
  // STORE only:
  const bf16* v;  // [T, Hkv, D], strides v_tok, v_head
  int64_t v_tok, v_head;
  void* k_cache;                // [slots, Hkv, D] bf16 or fp8, contiguous (slot = block *
  void* v_cache;                //   block_size + offset)
  const int32_t* slot_mapping;  // [T], -1 = no store
  int8_t* k_scale;              // 8-bit: [num_blocks, Hkv, block_size] exponents / codes
  int8_t* v_scale;
  int block_size;
  bool allow_first;  // the warp-per-item kernel lets the next one launch before its wait
};

// Stores one cache row of D values held as vals[j] = element lane + 32 j (bf16-rounded, as in
// place): bf16 as they are, or fp8 / int8 under the row's exponent / scale code (written by
// lane 0).
template <int D, int FP8>
__device__ __forceinline__ void store_row(const RopeArgs& a, void* cache, int8_t* scale,
                                          int64_t slot, int head, const float (&vals)[D / 32],
                                          int lane) {
  const int64_t row = (slot * a.hkv + head) * D;
  if constexpr (FP8 == kCacheInt8) {
    float mx = 0.f;
#pragma unroll
    for (int j = 0; j < D / 32; ++j) mx = fmaxf(mx, fabsf(vals[j]));
    const int code = int8_kv_scale_code_dev(warp_max(mx));
    const float s = kv_row_scale<kCacheInt8>(code);
    uint8_t* dst = static_cast<uint8_t*>(cache) + row;
#pragma unroll
    for (int j = 0; j < D / 32; ++j) dst[lane + 32 * j] = int8_kv_encode(vals[j], s);
    if (lane == 0)
      scale[fp8_exponent_index(slot, head, a.hkv, a.block_size)] = static_cast<int8_t>(code);
  } else if constexpr (FP8) {
    float mx = 0.f;
#pragma unroll
    for (int j = 0; j < D / 32; ++j) mx = fmaxf(mx, fabsf(vals[j]));
    const int e = fp8_row_exponent_dev(warp_max(mx));
    const float inv = pow2i(-e);
    uint8_t* dst = static_cast<uint8_t*>(cache) + row;
#pragma unroll
    for (int j = 0; j < D / 32; ++j) dst[lane + 32 * j] = fp8_encode(vals[j] * inv);
    if (lane == 0)
      scale[fp8_exponent_index(slot, head, a.hkv, a.block_size)] = static_cast<int8_t>(e);
  } else {
    bf16* dst = static_cast<bf16*>(cache) + row;
#pragma unroll
    for (int j = 0; j < D / 32; ++j) dst[lane + 32 * j] = to_bf16(vals[j]);
  }
}

// A lane's rotary cos and sin at `pos` for its pairs j (frequency freq[j]), scaled. One f32
// multiply forms the angle, as the CPU reference and transformers do; sincosf, not the fast
// intrinsic, which is only accurate near 0: angles reach ~1e5 rad at 128k.
template <int kPairs>
__device__ __forceinline__ void rope_angles(float pos, const float (&freq)[kPairs], float scaling,
                                            float (&c)[kPairs], float (&s)[kPairs]) {
#pragma unroll
  for (int j = 0; j < kPairs; ++j) {
    sincosf(pos * freq[j], &s[j], &c[j]);
    c[j] *= scaling;
    s[j] *= scaling;
  }
}

// The head's norm weights at a lane's pairs (w_lo[j] at lane + 32 j, w_hi[j] D / 2 further).
template <int D>
__device__ __forceinline__ void head_weights(const bf16* w, int lane, float (&w_lo)[D / 64],
                                             float (&w_hi)[D / 64]) {
  if (w == nullptr) return;
#pragma unroll
  for (int j = 0; j < D / 64; ++j) {
    w_lo[j] = to_f32(w[lane + 32 * j]);
    w_hi[j] = to_f32(w[lane + 32 * j + D / 2]);
  }
}

// One warp, one work item of token t: head h < hq + hkv is a q or k head, normalised (with
// weights w_lo / w_hi, unless the head's weight pointer is null) and rotated in place, a k head
// also stored at the token's slot; (STORE) a v head is copied to its slot. The rotation's cos
// and sin: kGivenAngles, c_in / s_in; else from the token's position (requested beside the
// head's loads) and the lane's frequencies `freq`.
template <int D, bool STORE, int FP8, bool kGivenAngles>
__device__ __forceinline__ void rope_item(const RopeArgs& a, int t, int h, int lane,
                                          const float (&w_lo)[D / 64], const float (&w_hi)[D / 64],
                                          const float (&freq)[D / 64], const float (&c_in)[D / 64],
                                          const float (&s_in)[D / 64]) {
  constexpr int kPairs = D / 64;  // pairs per lane
  if constexpr (STORE) {
    if (h >= a.hq + a.hkv) {  // a v head: a copy into its slot
      const int64_t slot = a.slot_mapping[t];
      if (slot < 0) return;  // warp-uniform: the whole warp serves this (token, head)
      const int hv = h - a.hq - a.hkv;
      const bf16* src = a.v + t * a.v_tok + hv * a.v_head;
      float vals[D / 32];
#pragma unroll
      for (int j = 0; j < D / 32; ++j) vals[j] = to_f32(src[lane + 32 * j]);
      store_row<D, FP8>(a, a.v_cache, a.v_scale, slot, hv, vals, lane);
      return;
    }
  }
  const bool is_q = h < a.hq;
  bf16* x = is_q ? a.q + t * a.q_tok + h * a.q_head : a.k + t * a.k_tok + (h - a.hq) * a.k_head;
  const float pos = kGivenAngles ? 0.f : static_cast<float>(a.positions[t]);
  float lo[kPairs], hi[kPairs];
  float sq = 0.f;
#pragma unroll
  for (int j = 0; j < kPairs; ++j) {
    lo[j] = to_f32(x[lane + 32 * j]);
    hi[j] = to_f32(x[lane + 32 * j + D / 2]);
    sq = add_pair_squares(sq, lo[j], hi[j]);
  }
  if ((is_q ? a.q_w : a.k_w) != nullptr) {
    const float inv = head_rms_inverse<D>(warp_sum(sq), a.eps);
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      lo[j] = head_norm_scale(lo[j], inv, w_lo[j]);
      hi[j] = head_norm_scale(hi[j], inv, w_hi[j]);
    }
  }
  float c[kPairs], s[kPairs];
  if constexpr (kGivenAngles) {
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      c[j] = c_in[j];
      s[j] = s_in[j];
    }
  } else {
    rope_angles(pos, freq, a.attention_scaling, c, s);
  }
#pragma unroll
  for (int j = 0; j < kPairs; ++j) {
    const int i = lane + 32 * j;
    const bf16 y_lo = to_bf16(rotate_lo(lo[j], hi[j], c[j], s[j]));
    const bf16 y_hi = to_bf16(rotate_hi(lo[j], hi[j], c[j], s[j]));
    x[i] = y_lo;
    x[i + D / 2] = y_hi;
    lo[j] = to_f32(y_lo);  // the rounded values, for the cache
    hi[j] = to_f32(y_hi);
  }
  // A k head with a slot is also written to the cache (the same bf16 values as in place).
  if constexpr (STORE) {
    const int64_t slot = is_q ? -1 : a.slot_mapping[t];
    if (slot >= 0) {       // warp-uniform
      float vals[D / 32];  // element lane + 32 j: the lo pairs, then the hi ones
#pragma unroll
      for (int j = 0; j < kPairs; ++j) {
        vals[j] = lo[j];
        vals[kPairs + j] = hi[j];
      }
      store_row<D, FP8>(a, a.k_cache, a.k_scale, slot, h - a.hq, vals, lane);
    }
  }
}

// A warp per work item (decode steps' few tokens: the items spread over the GPU). Items per
// token: its q heads, its k heads, and (STORE) its v heads, in that order.
template <int D, bool STORE, int FP8>
__global__ void __launch_bounds__(kItemWarpsMany * 32) qk_norm_rope_kernel(const RopeArgs a) {
  NANOVLLM_TRACE_SCOPE(trace::kQkNormRope, a.k_cache);
  constexpr int kPairs = D / 64;
  const int lane = threadIdx.x & 31;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int heads = a.hq + a.hkv * (STORE ? 2 : 1);
  const bool valid = item < static_cast<int64_t>(a.tokens) * heads;
  const int t = valid ? static_cast<int>(item / heads) : 0;
  const int h = valid ? static_cast<int>(item % heads) : 0;
  // Constants before the wait: the head's norm weights and the rotary frequencies of the lane's
  // pairs (a v head uses neither).
  float w_lo[kPairs], w_hi[kPairs], freq[kPairs];
  if (valid && h < a.hq + a.hkv) {
#pragma unroll
    for (int j = 0; j < kPairs; ++j) freq[j] = a.inv_freq[lane + 32 * j];
    head_weights<D>(h < a.hq ? a.q_w : a.k_w, lane, w_lo, w_hi);
  }
  if (a.allow_first) allow_next_grid();  // rope_allows_first
  wait_for_previous_grid();  // launched early (launch_dependent): qkv is the previous kernel's
  if (!a.allow_first) allow_next_grid();
  if (!valid) return;
  rope_item<D, STORE, FP8, false>(a, t, h, lane, w_lo, w_hi, freq, freq, freq);  // no c / s
}

// A block per token, its warps dealing the token's items (a prefill step's thousands of tokens:
// a warp's rotary angles serve every q and k head it takes, where the kernel above computes
// them once a head, and 4 warps a token replace 4-8 blocks of items). The same items, the same
// arithmetic (rope_item): bit for bit the kernel above.
template <int D, bool STORE, int FP8>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    qk_norm_rope_tokens_kernel(const RopeArgs a) {
  NANOVLLM_TRACE_SCOPE(trace::kQkNormRope, a.k_cache);
  constexpr int kPairs = D / 64;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int t = blockIdx.x;
  float wq_lo[kPairs], wq_hi[kPairs], wk_lo[kPairs], wk_hi[kPairs], freq[kPairs];
#pragma unroll
  for (int j = 0; j < kPairs; ++j) freq[j] = a.inv_freq[lane + 32 * j];
  head_weights<D>(a.q_w, lane, wq_lo, wq_hi);
  head_weights<D>(a.k_w, lane, wk_lo, wk_hi);
  wait_for_previous_grid();  // launched early (launch_dependent): qkv is the previous kernel's
  allow_next_grid();
  float c[kPairs], s[kPairs];
  rope_angles(static_cast<float>(a.positions[t]), freq, a.attention_scaling, c, s);
  const int heads = a.hq + a.hkv * (STORE ? 2 : 1);
  for (int h = warp; h < heads; h += kWarpsPerBlock) {
    if (h < a.hq)
      rope_item<D, STORE, FP8, true>(a, t, h, lane, wq_lo, wq_hi, freq, c, s);
    else
      rope_item<D, STORE, FP8, true>(a, t, h, lane, wk_lo, wk_hi, freq, c, s);
  }
}

// Whether the warp-per-item kernel lets the decode attention after it launch at its start rather
// than after its wait: ahead of its own wait the attention only reads what earlier kernels and
// steps wrote (decode_attention_tile.cuh's wait_once says why), so its plan and first cache tiles
// overlap this kernel. 0.6B decode step on an H200, greedy, three rounds: batch 5 1.078 -> 1.003
// ms at context 1025, batch 1 0.776 -> 0.752, batch 8 1.163 -> 1.131; batch 5-8 0.97x at context
// 193; batch 48-256 the same
// (bench/results/h200-2026-11-29-issue33_small_kernels_after_cublas.txt).
// NANOVLLM_ROPE_EARLY_NEXT=after-wait keeps the launch after the wait (comparisons).
bool rope_allows_first() {
  static const bool first =
      env_choice("NANOVLLM_ROPE_EARLY_NEXT", {"auto", "after-wait"}) == "auto";
  return first;
}

// The checks both launchers share; fills the q/k/norm/position part of the arguments.
// Returns false when there is nothing to do (no tokens).
bool rope_args(const TensorView& q, const TensorView& k, const TensorView& q_norm_weight,
               const TensorView& k_norm_weight, const TensorView& positions, float eps,
               const RopeFrequencies& rope, RopeArgs* a) {
  check_cuda_tensor(q, DType::kBf16, "qk_norm_rope q");
  check_cuda_tensor(k, DType::kBf16, "qk_norm_rope k");
  check_cuda_tensor(positions, DType::kI32, "qk_norm_rope positions");
  CHECK_EQ(q.ndim, 3);
  CHECK_EQ(k.ndim, 3);
  const int64_t tokens = q.size(0), dim = q.size(2);
  CHECK_EQ(k.size(0), tokens);
  CHECK_EQ(k.size(2), dim);
  CHECK_EQ(positions.numel(), tokens);
  const bool has_norm = q_norm_weight.data != nullptr;
  CHECK_EQ(has_norm, k_norm_weight.data != nullptr);
  if (has_norm) {
    check_cuda_tensor(q_norm_weight, DType::kBf16, "q_norm_weight");
    check_cuda_tensor(k_norm_weight, DType::kBf16, "k_norm_weight");
    CHECK_EQ(q_norm_weight.numel(), dim);
    CHECK_EQ(k_norm_weight.numel(), dim);
  }
  check_cuda_tensor(rope.inv_freq, DType::kF32, "qk_norm_rope inv_freq");
  CHECK_EQ(rope.inv_freq.numel(), dim / 2);
  *a = RopeArgs{};
  a->q = q.ptr<bf16>();
  a->q_tok = q.stride[0];
  a->q_head = q.stride[1];
  a->k = k.ptr<bf16>();
  a->k_tok = k.stride[0];
  a->k_head = k.stride[1];
  a->q_w = has_norm ? q_norm_weight.ptr<bf16>() : nullptr;
  a->k_w = has_norm ? k_norm_weight.ptr<bf16>() : nullptr;
  a->positions = positions.ptr<int32_t>();
  a->hq = static_cast<int>(q.size(1));
  a->hkv = static_cast<int>(k.size(1));
  a->tokens = static_cast<int>(tokens);
  a->eps = eps;
  a->inv_freq = rope.inv_freq.ptr<float>();
  a->attention_scaling = rope.attention_scaling;
  a->allow_first = rope_allows_first();
  return tokens > 0;
}

template <bool STORE, int FP8 = 0>
void launch(const RopeArgs& a, int64_t dim, cudaStream_t stream) {
  const int64_t items = static_cast<int64_t>(a.tokens) * (a.hq + a.hkv * (STORE ? 2 : 1));
  const int warps = a.tokens >= kManyItemsTokens ? kItemWarpsMany : kItemWarpsFew;
  const int blocks = ceil_div(items, warps);
  DISPATCH_HEAD_DIM(dim, D, {
    if (a.tokens >= kPrefillSizedRows)
      launch_dependent(qk_norm_rope_tokens_kernel<D, STORE, FP8>, dim3(a.tokens),
                       dim3(kWarpsPerBlock * 32), stream, a);
    else
      launch_dependent(qk_norm_rope_kernel<D, STORE, FP8>, dim3(blocks), dim3(warps * 32), stream,
                       a);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void qk_norm_rope(const TensorView& q, const TensorView& k, const TensorView& q_norm_weight,
                  const TensorView& k_norm_weight, const TensorView& positions, float eps,
                  const RopeFrequencies& rope, cudaStream_t stream) {
  RopeArgs a;
  if (!rope_args(q, k, q_norm_weight, k_norm_weight, positions, eps, rope, &a)) return;
  launch<false>(a, q.size(2), stream);
}

void qk_norm_rope_store(const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView& q_norm_weight, const TensorView& k_norm_weight,
                        const TensorView& positions, float eps, const RopeFrequencies& rope,
                        const TensorView& k_cache, const TensorView& v_cache,
                        const TensorView& slot_mapping, cudaStream_t stream,
                        const TensorView& k_scale, const TensorView& v_scale) {
  RopeArgs a;
  const bool any = rope_args(q, k, q_norm_weight, k_norm_weight, positions, eps, rope, &a);
  check_cuda_tensor(v, DType::kBf16, "qk_norm_rope_store v");
  const int format = kv_cache_format(k_cache.dtype);  // 0: bf16; else 8-bit, with row scales
  const DType cache_dtype = format != 0 ? k_cache.dtype : DType::kBf16;
  check_cuda_tensor(k_cache, cache_dtype, "qk_norm_rope_store k_cache");
  check_cuda_tensor(v_cache, cache_dtype, "qk_norm_rope_store v_cache");
  check_cuda_tensor(slot_mapping, DType::kI32, "qk_norm_rope_store slot_mapping");
  CHECK_EQ(v.ndim, 3);
  CHECK_EQ(k_cache.ndim, 4);
  CHECK_EQ(v_cache.ndim, 4);
  CHECK(k_cache.is_contiguous() && v_cache.is_contiguous());
  const int64_t tokens = q.size(0), hkv = k.size(1), dim = q.size(2);
  CHECK_EQ(v.size(0), tokens);
  CHECK_EQ(v.size(1), hkv);
  CHECK_EQ(v.size(2), dim);
  CHECK_EQ(slot_mapping.numel(), tokens);
  for (const TensorView* c : {&k_cache, &v_cache}) {
    CHECK_EQ(c->size(2), hkv);
    CHECK_EQ(c->size(3), dim);
  }
  CHECK_EQ(k_cache.numel(), v_cache.numel());
  if (format != 0) {
    for (const TensorView* s : {&k_scale, &v_scale}) {
      check_cuda_tensor(*s, DType::kI8, "qk_norm_rope_store k_scale / v_scale");
      CHECK(s->is_contiguous());
      CHECK_EQ(s->ndim, 3);  // [num_blocks, Hkv, block_size]
      CHECK_EQ(s->size(0), k_cache.size(0));
      CHECK_EQ(s->size(1), hkv);
      CHECK_EQ(s->size(2), k_cache.size(1));
    }
  }
  if (!any) return;
  a.v = v.ptr<bf16>();
  a.v_tok = v.stride[0];
  a.v_head = v.stride[1];
  a.k_cache = k_cache.data;
  a.v_cache = v_cache.data;
  a.slot_mapping = slot_mapping.ptr<int32_t>();
  a.block_size = static_cast<int>(k_cache.size(1));
  if (format != 0) {
    a.k_scale = k_scale.ptr<int8_t>();
    a.v_scale = v_scale.ptr<int8_t>();
  }
  dispatch_kv_cache(format, [&]<int F>() { launch<true, F>(a, dim, stream); });
}

}  // namespace nanovllm::kernels::cuda
