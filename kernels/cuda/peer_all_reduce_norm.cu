// The one-shot or push peer-memory all-reduce fused with the residual add and RMSNorm after it
// (kernels/peer_all_reduce.h's peer_all_reduce_add_rms_norm): the same add and norm as
// kernels::cuda::fused_add_rms_norm at the same block size, so it gives that kernel's bits after
// the plain sum of the same algorithm.
#include <algorithm>

#include "kernels/check.h"
#include "kernels/cuda/add_rms_norm_row.cuh"
#include "kernels/cuda/peer_all_reduce.cuh"

namespace nanovllm::kernels::cuda {
namespace {

using peer::block_barrier;
using peer::end_call;
using peer::next_call;
using peer::staging;
using peer::sum_unit;

// rms_norm.cu's block size: the norm's block_sum adds the threads' partial sums in the same
// tree, so the results match it to the bit.
constexpr int kNormThreads = 256;

// Unit (8 elements) of this rank's x at row t, column i, as uint4.
__device__ __forceinline__ uint4 x_unit(const bf16* x, int64_t x_stride, int64_t t, int i) {
  return *reinterpret_cast<const uint4*>(x + t * x_stride + i);
}

// x: [T, H] (row stride x_stride), residual: [T, H] (row stride r_stride), weight: [H]; the
// staging buffers (one-shot) or inbox slots (push) hold [T, H] contiguous. Block b owns rows b,
// b + grid, ...: it shares them (copies them into its staging buffer, or pushes them to the
// peers), then sums, adds and normalises each.
template <int N, bool PUSH>
__global__ void __launch_bounds__(kNormThreads)
    add_rms_norm_kernel(bf16* x, int64_t x_stride, bf16* residual, int64_t r_stride,
                        const bf16* __restrict__ weight, int64_t rows, int hidden, float eps,
                        PeerAllReduceBuffers b) {
  NANOVLLM_TRACE_SCOPE(trace::kPeerAllReduceNorm, weight);
  const uint32_t call = next_call(b);
  for (int64_t t = blockIdx.x; t < rows; t += gridDim.x)
    for (int i = threadIdx.x * 8; i < hidden; i += kNormThreads * 8) {
      if constexpr (PUSH)
        peer::push_unit<N>(b, call, (t * hidden + i) / 8,
                           peer::without_negative_zero(x_unit(x, x_stride, t, i)));
      else
        store8(staging<bf16>(b, b.rank, call) + t * hidden + i, load8(x + t * x_stride + i));
    }
  if constexpr (!PUSH) block_barrier<N, true>(b, peer::kStart, call);
  for (int64_t t = blockIdx.x; t < rows; t += gridDim.x) {
    bf16* rr = residual + t * r_stride;
    float sq = 0.f;
    for (int i = threadIdx.x * 8; i < hidden; i += kNormThreads * 8) {
      const int64_t unit = (t * hidden + i) / 8;
      // Each thread reads back only the x units it shared itself, before it overwrites them.
      uint4 sum;
      if constexpr (PUSH)
        sum = peer::sum_pushed_unit<N>(b, call, unit,
                                       peer::without_negative_zero(x_unit(x, x_stride, t, i)));
      else
        sum = sum_unit<N, true>(b, call, unit);
      const Bf16x8 y = *reinterpret_cast<const Bf16x8*>(&sum);
      add_residual_unit(rr + i, y, sq);
    }
    const float inv = rsqrtf(block_sum(sq) / static_cast<float>(hidden) + eps);
    write_normed_row<kNormThreads>(x + t * x_stride, rr, weight, hidden, inv);
  }
  end_call(b, call);
}

template <int N, bool PUSH>
void launch_add_rms_norm(const TensorView& x, const TensorView& residual, const TensorView& weight,
                         float eps, const PeerAllReduceBuffers& b, cudaStream_t stream) {
  const int64_t rows = x.size(0);
  auto* xp = static_cast<bf16*>(x.data);
  auto* rp = static_cast<bf16*>(residual.data);
  const auto* wp = static_cast<const bf16*>(weight.data);
  const int hidden = static_cast<int>(x.size(1));
  const int blocks = static_cast<int>(std::min<int64_t>(kPeerAllReduceMaxBlocks, rows));
  peer::launch_peer_kernel(add_rms_norm_kernel<N, PUSH>, blocks, kNormThreads, stream, xp,
                           x.stride[0], rp, residual.stride[0], wp, rows, hidden, eps, b);
}

}  // namespace
}  // namespace nanovllm::kernels::cuda

namespace nanovllm::kernels {

void peer_all_reduce_add_rms_norm(const TensorView& x, const TensorView& residual,
                                  const TensorView& weight, float eps,
                                  const PeerAllReduceBuffers& b, cudaStream_t stream,
                                  PeerAllReduceAlgo algo) {
  constexpr const char* kOp = "peer_all_reduce_add_rms_norm";
  using cuda::peer::fail;
  if (x.dtype != DType::kBf16 || residual.dtype != DType::kBf16 || weight.dtype != DType::kBf16 ||
      x.on_cpu() || x.ndim != 2 || residual.ndim != 2 || x.stride[1] != 1 ||
      residual.stride[1] != 1 || x.size(0) != residual.size(0) || x.size(1) != residual.size(1) ||
      weight.numel() != x.size(1))
    fail(kOp, "x, residual: [T, H] bf16 with contiguous rows on the GPU; weight: [H] bf16");
  if (x.size(1) % 8 != 0 || x.stride[0] % 8 != 0 || residual.stride[0] % 8 != 0 ||
      !cuda::aligned16(x.data) || !cuda::aligned16(residual.data) || !cuda::aligned16(weight.data))
    fail(kOp, "H, the row strides and the pointers must allow 16-byte vectors");
  if (algo == PeerAllReduceAlgo::kTwoShot || algo == PeerAllReduceAlgo::kPushTwoShot)
    fail(kOp, "the fused form is one-shot or push (kernels/peer_all_reduce.h says why)");
  const bool push = algo == PeerAllReduceAlgo::kPush;
  cuda::peer::check_group(kOp, b, static_cast<size_t>(x.numel()) * 2, push);
  if (x.size(0) == 0) return;
  cuda::peer::dispatch_world_size(b.world_size, [&](auto n) {
    if (push)
      cuda::launch_add_rms_norm<decltype(n)::value, true>(x, residual, weight, eps, b, stream);
    else
      cuda::launch_add_rms_norm<decltype(n)::value, false>(x, residual, weight, eps, b, stream);
  });
}

}  // namespace nanovllm::kernels
