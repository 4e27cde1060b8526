// SiLU-and-mul for the merged gate_up projection: out = silu(gate) * up, f32 math, one
// bf16 rounding at the end.
#include "kernels/activation.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/silu_mul.cuh"

namespace nanovllm::kernels::cuda {
namespace {

// x: [T, 2I] (row stride x_stride), out: [T, I] (row stride out_stride).
template <bool VEC>
__global__ void silu_and_mul_kernel(bf16* __restrict__ out, int64_t out_stride,
                                    const bf16* __restrict__ x, int64_t x_stride, int inter) {
  NANOVLLM_TRACE_SCOPE(trace::kSiluMul, x);
  wait_for_previous_grid();  // when launched early: x is the previous kernel's output
  allow_next_grid();
  const int t = blockIdx.y;
  const bf16* gate = x + t * x_stride;
  const bf16* up = gate + inter;
  bf16* dst = out + t * out_stride;
  if constexpr (VEC) {
    for (int i = (blockIdx.x * blockDim.x + threadIdx.x) * 8; i < inter;
         i += gridDim.x * blockDim.x * 8) {
      const Bf16x8 g = load8(gate + i), u = load8(up + i);
      Bf16x8 r;
#pragma unroll
      for (int j = 0; j < 8; ++j) r.v[j] = to_bf16(silu_mul_exact(to_f32(g.v[j]), to_f32(u.v[j])));
      store8(dst + i, r);
    }
  } else {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < inter; i += gridDim.x * blockDim.x)
      dst[i] = to_bf16(silu_mul_exact(to_f32(gate[i]), to_f32(up[i])));
  }
}

}  // namespace

void silu_and_mul(const TensorView& out, const TensorView& x, cudaStream_t stream,
                  bool launch_early) {
  check_cuda_tensor(out, DType::kBf16, "silu_and_mul out");
  check_cuda_tensor(x, DType::kBf16, "silu_and_mul x");
  const int64_t tokens = x.size(0), inter = out.size(1);
  CHECK_EQ(out.size(0), tokens);
  CHECK_EQ(x.size(1), 2 * inter);
  if (tokens == 0) return;
  CHECK_LE(tokens, 65535);
  const bool vec = inter % 8 == 0 && x.stride[0] % 8 == 0 && out.stride[0] % 8 == 0 &&
                   aligned16(x.data) && aligned16(out.data);
  const int threads = 256;
  const int per_block = vec ? threads * 8 : threads;
  const dim3 grid(ceil_div(inter, per_block), static_cast<unsigned>(tokens));
  launch_early_or_plain(launch_early, vec ? silu_and_mul_kernel<true> : silu_and_mul_kernel<false>,
                        grid, dim3(threads), stream, out.ptr<bf16>(), out.stride[0], x.ptr<bf16>(),
                        x.stride[0], static_cast<int>(inter));
}

}  // namespace nanovllm::kernels::cuda
