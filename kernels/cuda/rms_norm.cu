// RMSNorm and fused residual-add + RMSNorm, one block per row (a warp per row for a prefill
// step's rows, bit for bit the same), f32 math.
// The fused form rounds the sum to bf16 first (the residual stream is bf16 in the model) and
// normalises that rounded value, as the contract in kernels/rms_norm.h says.
#include "kernels/cuda/add_rms_norm_row.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/rms_norm.h"

namespace nanovllm::kernels::cuda {
namespace {

constexpr int kThreads = 256;
// The most 16-byte units a thread keeps in registers (rows of up to 8192 elements: Qwen3's hidden
// sizes 1024-5120); longer rows store the residual sum and read it back.
constexpr int kMaxRegisterUnits = 4;

// out: [T, H] (row stride out_stride); x: [T, H] (row stride x_stride); weight: [H].
// FUSED: residual: [T, H] (row stride r_stride) = bf16(x + residual); out aliases x.
// UNITS (VEC only; 0: the loop): each thread's 16-byte units, all of the row's, in registers.
template <bool VEC, bool FUSED, int UNITS = 0>
__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(bf16* out, int64_t out_stride, bf16* x, int64_t x_stride, bf16* residual,
                    int64_t r_stride, const bf16* __restrict__ weight, int hidden, float eps) {
  NANOVLLM_TRACE_SCOPE(trace::kRmsNorm, weight);
  // The next kernel (a projection, which only streams its weights before its own wait) may
  // launch now, so its weights are in flight while this one waits for x; allowing it only
  // after the wait put that stream on the critical path of every qkv and gate_up.
  allow_next_grid();
  const int64_t t = blockIdx.x;
  bf16* xr = x + t * x_stride;
  bf16* rr = FUSED ? residual + t * r_stride : nullptr;
  bf16* orow = out + t * out_stride;
  if constexpr (VEC && UNITS > 0) {
    // UNITS 16-byte units a thread (unit u + n * kThreads for thread u, as the loop below deals
    // them), all loaded before any store: the sum stays in registers, where the loop below
    // stores it and reads it back. The same values in the same order.
    Bf16x8 a[UNITS], b[UNITS], w[UNITS];
    const auto unit = [](int n) { return (static_cast<int>(threadIdx.x) + n * kThreads) * 8; };
#pragma unroll
    for (int n = 0; n < UNITS; ++n) {
      const int i = unit(n);
      if (i < hidden) w[n] = load8(weight + i);  // constants: before the wait
    }
    wait_for_previous_grid();  // launched early (launch_dependent)
#pragma unroll
    for (int n = 0; n < UNITS; ++n) {
      const int i = unit(n);
      if (i >= hidden) break;
      a[n] = load8(xr + i);
      if constexpr (FUSED) b[n] = load8(rr + i);
    }
    float sq = 0.f;
#pragma unroll
    for (int n = 0; n < UNITS; ++n) {
      const int i = unit(n);
      if (i >= hidden) break;
      if constexpr (FUSED) {
        a[n] = add_unit(a[n], b[n]);
        store8(rr + i, a[n]);
      }
      sq = add_unit_squares(sq, a[n]);
    }
    const float inv = rsqrtf(block_sum(sq) / static_cast<float>(hidden) + eps);
#pragma unroll
    for (int n = 0; n < UNITS; ++n) {
      const int i = unit(n);
      if (i >= hidden) break;
      store8(orow + i, normed_unit(a[n], w[n], inv));
    }
    return;
  }
  wait_for_previous_grid();  // launched early (launch_dependent): x is the previous kernel's
  // The normalised input: x itself, or the bf16 sum that FUSED writes into residual.
  const bf16* src = FUSED ? rr : xr;
  float sq = 0.f;
  if constexpr (VEC) {
    for (int i = threadIdx.x * 8; i < hidden; i += kThreads * 8) {
      Bf16x8 a = load8(xr + i);
      if constexpr (FUSED) {
        a = add_unit(a, load8(rr + i));
        store8(rr + i, a);
      }
      sq = add_unit_squares(sq, a);
    }
  } else {
    for (int i = threadIdx.x; i < hidden; i += kThreads) {
      bf16 a = xr[i];
      if constexpr (FUSED) {
        a = to_bf16(to_f32(a) + to_f32(rr[i]));
        rr[i] = a;
      }
      sq += to_f32(a) * to_f32(a);
    }
  }
  const float inv = rsqrtf(block_sum(sq) / static_cast<float>(hidden) + eps);
  // Each thread re-reads only the elements it wrote itself above: no barrier needed.
  if constexpr (VEC) {
    write_normed_row<kThreads>(orow, src, weight, hidden, inv);
  } else {
    for (int i = threadIdx.x; i < hidden; i += kThreads)
      orow[i] = to_bf16(to_f32(src[i]) * inv * to_f32(weight[i]));
  }
}

// Many rows (kPrefillSizedRows and more: a prefill step's): a warp a row, kRowsPerBlock rows a
// block, where a block a row spent most of its time on a block-wide reduction per 2-4 KB row. Bit
// for bit the kernel above at kThreads: lane l stands in for its threads l + 32 m (m < M, the warps
// that hold a unit of a row of at most 32 M units), sums each one's squares as that thread does,
// then each virtual warp's with warp_sum and the eight warps' totals as block_sum does (its warps
// past M hold 0).
constexpr int kRowsPerBlock = 8;
constexpr int kBlockWarps = kThreads / 32;

template <bool FUSED, int M>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    rms_norm_rows_kernel(bf16* out, int64_t out_stride, bf16* x, int64_t x_stride, bf16* residual,
                         int64_t r_stride, const bf16* __restrict__ weight, int hidden, float eps,
                         int64_t tokens) {
  static_assert(M <= kBlockWarps, "one unit a thread of kThreads: rows of at most 8 * kThreads");
  NANOVLLM_TRACE_SCOPE(trace::kRmsNorm, weight);
  allow_next_grid();
  wait_for_previous_grid();  // launched early (launch_dependent): x is the previous kernel's
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  if (t >= tokens) return;
  bf16* xr = x + t * x_stride;
  bf16* rr = FUSED ? residual + t * r_stride : nullptr;
  bf16* orow = out + t * out_stride;
  const auto unit = [lane](int m) { return (lane + 32 * m) * 8; };  // thread lane + 32 m's
  Bf16x8 a[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const int i = unit(m);
    if (i < hidden) a[m] = load8(xr + i);
  }
  float part[M];  // thread lane + 32 m's sum of squares
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const int i = unit(m);
    part[m] = 0.f;
    if (i >= hidden) continue;
    if constexpr (FUSED) {
      a[m] = add_unit(a[m], load8(rr + i));
      store8(rr + i, a[m]);
    }
    part[m] = add_unit_squares(0.f, a[m]);
  }
  float total = 0.f;  // block_sum's last step: lane w holds warp w's total
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float w = warp_sum(part[m]);
    if (lane == m) total = w;
  }
  const float inv = rsqrtf(warp_sum(total) / static_cast<float>(hidden) + eps);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const int i = unit(m);
    if (i >= hidden) break;
    store8(orow + i, normed_unit(a[m], load8(weight + i), inv));
  }
}

void launch(bf16* out, int64_t out_stride, bf16* x, int64_t x_stride, bf16* residual,
            int64_t r_stride, const bf16* weight, int64_t tokens, int64_t hidden, float eps,
            bool vec, cudaStream_t stream) {
  if (tokens == 0) return;
  const bool fused = residual != nullptr;
  const int h = static_cast<int>(hidden);
  // A row's 16-byte units a thread; each count of registers its own kernel (the registers
  // of four units would be every row's otherwise).
  const int64_t units = (hidden / 8 + kThreads - 1) / kThreads;
  const auto go = [&](auto kernel) {
    launch_dependent(kernel, dim3(tokens), dim3(kThreads), stream, out, out_stride, x, x_stride,
                     residual, r_stride, weight, h, eps);
  };
  const auto rows = [&](auto kernel) {
    launch_dependent(kernel, dim3((tokens + kRowsPerBlock - 1) / kRowsPerBlock),
                     dim3(kRowsPerBlock * 32), stream, out, out_stride, x, x_stride, residual,
                     r_stride, weight, h, eps, tokens);
  };
  const int64_t warps = (hidden / 8 + 31) / 32;  // of kThreads's that hold a unit
  if (vec && tokens >= kPrefillSizedRows && units == 1) {
    if (warps <= 4)
      fused ? rows(rms_norm_rows_kernel<true, 4>) : rows(rms_norm_rows_kernel<false, 4>);
    else
      fused ? rows(rms_norm_rows_kernel<true, 8>) : rows(rms_norm_rows_kernel<false, 8>);
  } else if (vec && units <= kMaxRegisterUnits) {
    if (units == 1)
      fused ? go(rms_norm_kernel<true, true, 1>) : go(rms_norm_kernel<true, false, 1>);
    else if (units == 2)
      fused ? go(rms_norm_kernel<true, true, 2>) : go(rms_norm_kernel<true, false, 2>);
    else
      fused ? go(rms_norm_kernel<true, true, 4>) : go(rms_norm_kernel<true, false, 4>);
  } else if (vec) {
    fused ? go(rms_norm_kernel<true, true>) : go(rms_norm_kernel<true, false>);
  } else {
    fused ? go(rms_norm_kernel<false, true>) : go(rms_norm_kernel<false, false>);
  }
  CUDA_CHECK_LAUNCH();
}

bool vec_ok(const TensorView& t) {
  return t.stride[0] % 8 == 0 && aligned16(t.data);
}

}  // namespace

void rms_norm(const TensorView& out, const TensorView& x, const TensorView& weight, float eps,
              cudaStream_t stream) {
  check_cuda_tensor(out, DType::kBf16, "rms_norm out");
  check_cuda_tensor(x, DType::kBf16, "rms_norm x");
  check_cuda_tensor(weight, DType::kBf16, "rms_norm weight");
  const int64_t hidden = x.size(-1), tokens = x.numel() / hidden;
  CHECK_EQ(x.ndim, 2);
  CHECK_EQ(out.size(0), tokens);
  CHECK_EQ(out.size(1), hidden);
  CHECK_EQ(weight.numel(), hidden);
  const bool vec = hidden % 8 == 0 && vec_ok(out) && vec_ok(x) && aligned16(weight.data);
  launch(out.ptr<bf16>(), out.stride[0], x.ptr<bf16>(), x.stride[0], nullptr, 0, weight.ptr<bf16>(),
         tokens, hidden, eps, vec, stream);
}

void fused_add_rms_norm(const TensorView& x, const TensorView& residual, const TensorView& weight,
                        float eps, cudaStream_t stream) {
  check_cuda_tensor(x, DType::kBf16, "fused_add_rms_norm x");
  check_cuda_tensor(residual, DType::kBf16, "fused_add_rms_norm residual");
  check_cuda_tensor(weight, DType::kBf16, "fused_add_rms_norm weight");
  CHECK_EQ(x.ndim, 2);
  const int64_t tokens = x.size(0), hidden = x.size(1);
  CHECK_EQ(residual.size(0), tokens);
  CHECK_EQ(residual.size(1), hidden);
  CHECK_EQ(weight.numel(), hidden);
  const bool vec = hidden % 8 == 0 && vec_ok(x) && vec_ok(residual) && aligned16(weight.data);
  launch(x.ptr<bf16>(), x.stride[0], x.ptr<bf16>(), x.stride[0], residual.ptr<bf16>(),
         residual.stride[0], weight.ptr<bf16>(), tokens, hidden, eps, vec, stream);
}

}  // namespace nanovllm::kernels::cuda
