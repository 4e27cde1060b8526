// kernels/copy_engine_all_reduce.h: the copies and flags through the CUDA driver's stream memory
// operations (no SM runs them), then one sum + add + norm kernel with the arithmetic of
// peer_all_reduce_norm.cu's one-shot form (same sum order, same block size), hence its bits.
#include <cudaTypedefs.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/copy_engine_all_reduce.h"
#include "kernels/cuda/add_rms_norm_row.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/driver_entry.h"

namespace nanovllm::kernels::cuda {
namespace {

// rms_norm.cu's block size (block_sum's tree), so the norm matches fused_add_rms_norm's bits.
constexpr int kNormThreads = 256;

// Rank s's x for this call: sources[s] ([T, H] contiguous), sources[rank] being x itself.
struct Sources {
  const bf16* rank[kMaxPeerRanks];
};

// The 8 values at element `at` (a multiple of 8) summed over the ranks in order 0..N-1, f32,
// rounded once. The peers' parts were written by a copy engine: read past L1, from L2.
template <int N>
__device__ __forceinline__ Bf16x8 sum_over_ranks(const Sources& src, int64_t at) {
  float acc[8] = {};
#pragma unroll
  for (int r = 0; r < N; ++r) {
    const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(src.rank[r] + at));
    const Bf16x8 v = *reinterpret_cast<const Bf16x8*>(&raw);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] += to_f32(v.v[j]);
  }
  Bf16x8 y;
#pragma unroll
  for (int j = 0; j < 8; ++j) y.v[j] = to_bf16(acc[j]);
  return y;
}

// Block b owns rows b, b + grid, ...: sum, add and normalise each (x is read before it is
// overwritten, by the same thread, as in peer_all_reduce_norm.cu).
template <int N>
__global__ void __launch_bounds__(kNormThreads)
    sum_add_rms_norm_kernel(bf16* x, bf16* residual, int64_t r_stride,
                            const bf16* __restrict__ weight, int64_t rows, int hidden, float eps,
                            Sources src) {
  for (int64_t t = blockIdx.x; t < rows; t += gridDim.x) {
    bf16* rr = residual + t * r_stride;
    float sq = 0.f;
    for (int i = threadIdx.x * 8; i < hidden; i += kNormThreads * 8)
      add_residual_unit(rr + i, sum_over_ranks<N>(src, t * hidden + i), sq);
    const float inv = rsqrtf(block_sum(sq) / static_cast<float>(hidden) + eps);
    write_normed_row<kNormThreads>(x + t * hidden, rr, weight, hidden, inv);
  }
}

// The reduce-scatter's sum of one row block: out[i] = bf16(the f32 sum over the ranks in order)
// over `units` vectors of 8, sources[r] being rank r's part of the block (the same sum, order
// and rounding as sum_add_rms_norm_kernel's).
template <int N>
__global__ void __launch_bounds__(kNormThreads)
    sum_block_kernel(bf16* __restrict__ out, int64_t units, Sources src) {
  for (int64_t u = blockIdx.x * static_cast<int64_t>(kNormThreads) + threadIdx.x; u < units;
       u += static_cast<int64_t>(gridDim.x) * kNormThreads)
    *reinterpret_cast<Bf16x8*>(out + u * 8) = sum_over_ranks<N>(src, u * 8);
}

// The driver's stream memory operations (the runtime has no wrapper for them).
void write_flag(cudaStream_t stream, uint32_t* flag, uint32_t value) {
  static const auto fn = driver_entry<PFN_cuStreamWriteValue32_v11070>("cuStreamWriteValue32");
  // Default flags: a memory barrier first, so the copies before it are visible before the flag.
  const CUresult r = fn(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(flag),
                        value, CU_STREAM_WRITE_VALUE_DEFAULT);
  CHECK_MSG(r == CUDA_SUCCESS, "cuStreamWriteValue32 failed: CUresult " << static_cast<int>(r));
}

void wait_flag(cudaStream_t stream, const uint32_t* flag, uint32_t value) {
  static const auto fn = driver_entry<PFN_cuStreamWaitValue32_v11070>("cuStreamWaitValue32");
  // GEQ compares cyclically ((int32_t)(*flag - value) >= 0): a peer may already be a call ahead.
  const CUresult r = fn(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(flag),
                        value, CU_STREAM_WAIT_VALUE_GEQ);
  CHECK_MSG(r == CUDA_SUCCESS, "cuStreamWaitValue32 failed: CUresult " << static_cast<int>(r));
}

[[noreturn]] void fail(const std::string& why) {
  throw std::invalid_argument("copy_engine_add_rms_norm: " + why);
}

}  // namespace
}  // namespace nanovllm::kernels::cuda

namespace nanovllm::kernels {

bool copy_engine_fits(const TensorView& x, const CopyEngineBuffers& b) {
  if (!peer_all_reduce_supports(b.world_size) || b.rank < 0 || b.rank >= b.world_size) return false;
  for (int r = 0; r < b.world_size; ++r)
    if (b.inbox[r] == nullptr || b.flags[r] == nullptr) return false;
  return x.dtype == DType::kBf16 && !x.on_cpu() && x.ndim == 2 && x.is_contiguous() &&
         x.size(1) % 8 == 0 && static_cast<size_t>(x.numel()) * 2 <= b.slot_bytes &&
         cuda::aligned16(x.data);
}

void copy_engine_add_rms_norm(const TensorView& x, const TensorView& residual,
                              const TensorView& weight, float eps, const CopyEngineBuffers& b,
                              uint32_t call, cudaStream_t stream) {
  using cuda::bf16;
  if (!copy_engine_fits(x, b))
    cuda::fail("x or the group is not one the buffers take (copy_engine_fits)");
  if (residual.dtype != DType::kBf16 || residual.ndim != 2 || residual.stride[1] != 1 ||
      residual.size(0) != x.size(0) || residual.size(1) != x.size(1) ||
      residual.stride[0] % 8 != 0 || !cuda::aligned16(residual.data) ||
      weight.dtype != DType::kBf16 || weight.numel() != x.size(1) || !cuda::aligned16(weight.data))
    cuda::fail(
        "residual: [T, H] bf16 (row stride a multiple of 8), weight: [H] bf16, 16-byte aligned");
  if (call == 0) cuda::fail("calls are numbered from 1 (0 is the flags' initial value)");
  const int64_t rows = x.size(0);
  if (rows == 0) return;
  const int n = b.world_size, me = b.rank;
  const int64_t hidden = x.size(1);
  const size_t row_bytes = static_cast<size_t>(hidden) * 2;
  auto* xp = static_cast<bf16*>(x.data);
  // Rank r's inbox slot s of this call's generation.
  const auto slot = [&](int r, int s) {
    return static_cast<uint8_t*>(b.inbox[r]) + copy_engine_slot_offset(call, s, n, b.slot_bytes);
  };
  // One phase of copies: to every peer p, part(p) (a Copy), then the flag
  // flags[p][flag_at + me] = call; then the wait for every peer's flag here.
  struct Copy {
    const void* from;
    void* to;
    size_t bytes;
  };
  const auto send = [&](auto&& part, int flag_at) {
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      const Copy c = part(p);
      if (c.bytes > 0)
        CUDA_CHECK(cudaMemcpyAsync(c.to, c.from, c.bytes, cudaMemcpyDeviceToDevice, stream));
      cuda::write_flag(stream, b.flags[p] + flag_at + me, call);
    }
    for (int p = 0; p < n; ++p)
      if (p != me) cuda::wait_flag(stream, b.flags[me] + flag_at + p, call);
  };
  cuda::Sources src{};
  if (!copy_engine_two_phase(n)) {
    const size_t bytes = static_cast<size_t>(rows) * row_bytes;
    send([&](int p) { return Copy{x.data, slot(p, me), bytes}; }, 0);
    for (int r = 0; r < n; ++r)
      src.rank[r] = r == me ? xp : reinterpret_cast<const bf16*>(slot(me, r));
  } else {
    const RowBlock mine = copy_engine_row_block(rows, n, me);
    // Reduce-scatter: block p of x to peer p's slot me.
    send(
        [&](int p) {
          const RowBlock block = copy_engine_row_block(rows, n, p);
          return Copy{xp + block.first * hidden, slot(p, me),
                      static_cast<size_t>(block.count) * row_bytes};
        },
        0);
    // This rank's block summed into its gather area (its own slot), at the block's rows.
    auto* gathered = reinterpret_cast<bf16*>(slot(me, me));
    if (mine.count > 0) {
      cuda::Sources part{};
      for (int r = 0; r < n; ++r)
        part.rank[r] =
            r == me ? xp + mine.first * hidden : reinterpret_cast<const bf16*>(slot(me, r));
      const int64_t units = mine.count * hidden / 8;
      const int blocks = static_cast<int>(std::min<int64_t>((units + 255) / 256, 1024));
      bf16* out = gathered + mine.first * hidden;
      if (n == 4)
        cuda::sum_block_kernel<4><<<blocks, cuda::kNormThreads, 0, stream>>>(out, units, part);
      else
        cuda::sum_block_kernel<8><<<blocks, cuda::kNormThreads, 0, stream>>>(out, units, part);
      CUDA_CHECK(cudaGetLastError());
    }
    // All-gather: the summed block to the same rows of every peer's gather area.
    const size_t mine_at = static_cast<size_t>(mine.first) * row_bytes;
    const size_t mine_bytes = static_cast<size_t>(mine.count) * row_bytes;
    send([&](int p) { return Copy{slot(me, me) + mine_at, slot(p, p) + mine_at, mine_bytes}; }, n);
    src.rank[0] = gathered;
  }
  // One block a row up to a bound: rows beyond it loop (the grid only has to fill the GPU).
  const int blocks = static_cast<int>(std::min<int64_t>(rows, 4096));
  auto* rp = static_cast<bf16*>(residual.data);
  const auto* wp = static_cast<const bf16*>(weight.data);
  const int h = static_cast<int>(hidden);
  const int64_t rs = residual.stride[0];
  if (copy_engine_two_phase(n))  // the sums are gathered: one source
    cuda::sum_add_rms_norm_kernel<1>
        <<<blocks, cuda::kNormThreads, 0, stream>>>(xp, rp, rs, wp, rows, h, eps, src);
  else
    cuda::sum_add_rms_norm_kernel<2>
        <<<blocks, cuda::kNormThreads, 0, stream>>>(xp, rp, rs, wp, rows, h, eps, src);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace nanovllm::kernels
