// Qwen3's per-head q/k RMSNorm fused with neox-style rotary embedding, in place.
// One warp per (token, head): lane l owns the pairs (i, i + D/2) for i = l + 32 j.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/rotary.h"

namespace nanovllm::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

// q: [T, Hq, D] (strides q_tok, q_head), k: [T, Hkv, D] (strides k_tok, k_head);
// positions: [T]; q_w, k_w: [D] or null (no norm).
template <int D>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    qk_norm_rope_kernel(bf16* q, int64_t q_tok, int64_t q_head, int hq, bf16* k, int64_t k_tok,
                        int64_t k_head, int hkv, const bf16* __restrict__ q_w,
                        const bf16* __restrict__ k_w, const int32_t* __restrict__ positions,
                        int tokens, float eps, float log2_theta) {
  constexpr int kPairs = D / 64;  // pairs per lane
  const int lane = threadIdx.x & 31;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  const int heads = hq + hkv;
  if (item >= static_cast<int64_t>(tokens) * heads) return;
  const int t = static_cast<int>(item / heads), h = static_cast<int>(item % heads);
  const bool is_q = h < hq;
  bf16* x = is_q ? q + t * q_tok + h * q_head : k + t * k_tok + (h - hq) * k_head;
  const bf16* w = is_q ? q_w : k_w;

  float lo[kPairs], hi[kPairs];
  float sq = 0.f;
#pragma unroll
  for (int j = 0; j < kPairs; ++j) {
    lo[j] = to_f32(x[lane + 32 * j]);
    hi[j] = to_f32(x[lane + 32 * j + D / 2]);
    sq += lo[j] * lo[j] + hi[j] * hi[j];
  }
  if (w != nullptr) {
    const float inv = rsqrtf(warp_sum(sq) / D + eps);
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      lo[j] = lo[j] * inv * to_f32(w[lane + 32 * j]);
      hi[j] = hi[j] * inv * to_f32(w[lane + 32 * j + D / 2]);
    }
  }
  const float pos = static_cast<float>(positions[t]);
#pragma unroll
  for (int j = 0; j < kPairs; ++j) {
    const int i = lane + 32 * j;
    // inv_freq = theta^(-2i/D); sincosf (not the fast intrinsic): angles reach ~1e5 rad.
    const float inv_freq = exp2f(-2.f * static_cast<float>(i) / D * log2_theta);
    float s, c;
    sincosf(pos * inv_freq, &s, &c);
    x[i] = to_bf16(lo[j] * c - hi[j] * s);
    x[i + D / 2] = to_bf16(hi[j] * c + lo[j] * s);
  }
}

}  // namespace

void qk_norm_rope(const TensorView& q, const TensorView& k, const TensorView& q_norm_weight,
                  const TensorView& k_norm_weight, const TensorView& positions, float eps,
                  float rope_theta, cudaStream_t stream) {
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
  if (tokens == 0) return;
  const int hq = static_cast<int>(q.size(1)), hkv = static_cast<int>(k.size(1));
  const int64_t items = tokens * (hq + hkv);
  const int blocks = ceil_div(items, kWarpsPerBlock);
  DISPATCH_HEAD_DIM(dim, D, {
    qk_norm_rope_kernel<D><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(
        q.ptr<bf16>(), q.stride[0], q.stride[1], hq, k.ptr<bf16>(), k.stride[0], k.stride[1], hkv,
        has_norm ? q_norm_weight.ptr<bf16>() : nullptr,
        has_norm ? k_norm_weight.ptr<bf16>() : nullptr, positions.ptr<int32_t>(),
        static_cast<int>(tokens), eps, log2f(rope_theta));
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace nanovllm::kernels::cuda
