// Peer-memory all-reduce (kernels/peer_all_reduce.h): one kernel per call, templated on the rank
// count and on 16-byte vectors, synchronised by per-block flags in every rank's flag block.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/peer_all_reduce.h"

namespace nanovllm::kernels::cuda {
namespace {

constexpr int kThreads = 512;
enum Barrier { kStart = 0, kMiddle = 1, kEnd = 2 };

__device__ __forceinline__ void store_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void store_relaxed_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t load_relaxed_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Every rank's block `blockIdx.x` reaches barrier `which` of call `call` before any goes on.
// Thread t < N signals rank t and waits for rank t's signal; the CTA barriers around it order
// the block's own memory operations. RELEASE: the block wrote data that peers read after the
// barrier (release/acquire at system scope, cumulative over the CTA barrier). Otherwise only
// "done reading" is signalled: every load of the block has returned (its value was used) before
// the CTA barrier, so a relaxed flag suffices and costs no fence (as vLLM's final barrier).
template <int N, bool RELEASE>
__device__ void block_barrier(const PeerAllReduceBuffers& b, Barrier which, uint32_t call) {
  __syncthreads();
  const int t = threadIdx.x;
  if (t < N) {
    const size_t slot =
        (static_cast<size_t>(which) * kPeerAllReduceMaxBlocks + blockIdx.x) * kMaxPeerRanks;
    uint32_t* theirs = b.flags[t] + slot + b.rank;
    const uint32_t* mine = b.flags[b.rank] + slot + t;
    if constexpr (RELEASE)
      store_release_sys(theirs, call);
    else
      store_relaxed_sys(theirs, call);
    const uint64_t start = global_ns();
    while (static_cast<int32_t>((RELEASE ? load_acquire_sys(mine) : load_relaxed_sys(mine)) -
                                call) < 0) {
      if (global_ns() - start > kPeerWaitTimeoutNs) {
        printf(
            "peer all-reduce: rank %d, block %d waited more than 10 s for rank %d at barrier "
            "%d of call %u\n",
            b.rank, blockIdx.x, t, static_cast<int>(which), call);
        __trap();
      }
    }
  }
  __syncthreads();
}

// Units are 16-byte vectors of 8 bf16 (VEC) or single bf16 elements.
template <bool VEC>
struct Unit;
template <>
struct Unit<true> {
  using T = uint4;
  static constexpr int kElems = 8;
};
template <>
struct Unit<false> {
  using T = bf16;
  static constexpr int kElems = 1;
};

// The sum over the ranks of unit i, ranks in order 0..N-1, f32, rounded once.
template <int N, bool VEC>
__device__ __forceinline__ typename Unit<VEC>::T sum_unit(const PeerAllReduceBuffers& b,
                                                          int64_t i) {
  using U = typename Unit<VEC>::T;
  if constexpr (VEC) {
    float acc[8] = {};
#pragma unroll
    for (int r = 0; r < N; ++r) {
      const uint4 raw = __ldcg(static_cast<const uint4*>(b.data[r]) + i);
      const Bf16x8 v = *reinterpret_cast<const Bf16x8*>(&raw);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] += to_f32(v.v[j]);
    }
    Bf16x8 out;
#pragma unroll
    for (int j = 0; j < 8; ++j) out.v[j] = to_bf16(acc[j]);
    return *reinterpret_cast<const U*>(&out);
  } else {
    float acc = 0.f;
#pragma unroll
    for (int r = 0; r < N; ++r) acc += to_f32(static_cast<const bf16*>(b.data[r])[i]);
    return to_bf16(acc);
  }
}

// The call number of this block: one more than its last (the same on every rank, since every
// rank makes the same calls). Written back by thread 0 at the end.
__device__ __forceinline__ uint32_t next_call(const PeerAllReduceBuffers& b) {
  __shared__ uint32_t call;
  if (threadIdx.x == 0) call = b.counters[blockIdx.x] + 1;
  __syncthreads();
  return call;
}

// io: [units] of this rank. Block b owns units [b * per_block, (b + 1) * per_block).
template <int N, bool VEC>
__global__ void __launch_bounds__(kThreads)
    one_shot_kernel(typename Unit<VEC>::T* io, int64_t units, int64_t per_block,
                    PeerAllReduceBuffers b) {
  using U = typename Unit<VEC>::T;
  const uint32_t call = next_call(b);
  const int64_t begin = blockIdx.x * per_block;
  const int64_t end = min(units, begin + per_block);
  U* mine = static_cast<U*>(b.data[b.rank]);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) mine[i] = io[i];
  block_barrier<N, true>(b, kStart, call);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) io[i] = sum_unit<N, VEC>(b, i);
  block_barrier<N, false>(b, kEnd, call);  // no rank refills its buffer while a peer reads it
  if (threadIdx.x == 0) b.counters[blockIdx.x] = call;
}

// The units are N parts of `part` (the last shorter); block b owns [b * sub, (b + 1) * sub) of
// every part. Rank r reduces part r into its own buffer, then every rank gathers part s from
// rank s.
template <int N, bool VEC>
__global__ void __launch_bounds__(kThreads)
    two_shot_kernel(typename Unit<VEC>::T* io, int64_t units, int64_t part, int64_t sub,
                    PeerAllReduceBuffers b) {
  using U = typename Unit<VEC>::T;
  const uint32_t call = next_call(b);
  const auto range = [&](int p, int64_t& begin, int64_t& end) {
    const int64_t part_end = min(units, (p + 1) * part);
    begin = min(part_end, p * part + blockIdx.x * sub);
    end = min(part_end, begin + sub);
  };
  U* mine = static_cast<U*>(b.data[b.rank]);
  int64_t begin, end;
  for (int p = 0; p < N; ++p) {
    range(p, begin, end);
    for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) mine[i] = io[i];
  }
  block_barrier<N, true>(b, kStart, call);
  range(b.rank, begin, end);
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const U s = sum_unit<N, VEC>(b, i);
    io[i] = s;
    mine[i] = s;  // part `rank` of this buffer is read by no peer before the middle barrier
  }
  block_barrier<N, true>(b, kMiddle, call);
#pragma unroll
  for (int p = 0; p < N; ++p) {
    if (p == b.rank) continue;
    range(p, begin, end);
    const U* theirs = static_cast<const U*>(b.data[p]);
    for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
      if constexpr (VEC)
        io[i] = __ldcg(theirs + i);
      else
        io[i] = theirs[i];
    }
  }
  block_barrier<N, false>(b, kEnd, call);
  if (threadIdx.x == 0) b.counters[blockIdx.x] = call;
}

constexpr int kNormThreads = 256;

// x: [T, H] (row stride x_stride), residual: [T, H] (row stride r_stride), weight: [H]; the
// staging buffers hold [T, H] contiguous. Block b owns rows b, b + grid, ...
template <int N>
__global__ void __launch_bounds__(kNormThreads)
    one_shot_add_rms_norm_kernel(bf16* x, int64_t x_stride, bf16* residual, int64_t r_stride,
                                 const bf16* __restrict__ weight, int64_t rows, int hidden,
                                 float eps, PeerAllReduceBuffers b) {
  const uint32_t call = next_call(b);
  bf16* mine = static_cast<bf16*>(b.data[b.rank]);
  for (int64_t t = blockIdx.x; t < rows; t += gridDim.x)
    for (int i = threadIdx.x * 8; i < hidden; i += kNormThreads * 8)
      store8(mine + t * hidden + i, load8(x + t * x_stride + i));
  block_barrier<N, true>(b, kStart, call);
  for (int64_t t = blockIdx.x; t < rows; t += gridDim.x) {
    bf16* rr = residual + t * r_stride;
    float sq = 0.f;
    for (int i = threadIdx.x * 8; i < hidden; i += kNormThreads * 8) {
      const uint4 sum = sum_unit<N, true>(b, (t * hidden + i) / 8);
      const Bf16x8 y = *reinterpret_cast<const Bf16x8*>(&sum);
      Bf16x8 a = load8(rr + i);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        a.v[j] = to_bf16(to_f32(y.v[j]) + to_f32(a.v[j]));
        sq += to_f32(a.v[j]) * to_f32(a.v[j]);
      }
      store8(rr + i, a);
    }
    const float inv = rsqrtf(block_sum(sq) / static_cast<float>(hidden) + eps);
    // Each thread re-reads only the residual elements it wrote itself above.
    for (int i = threadIdx.x * 8; i < hidden; i += kNormThreads * 8) {
      const Bf16x8 a = load8(rr + i), w = load8(weight + i);
      Bf16x8 r;
#pragma unroll
      for (int j = 0; j < 8; ++j) r.v[j] = to_bf16(to_f32(a.v[j]) * inv * to_f32(w.v[j]));
      store8(x + t * x_stride + i, r);
    }
  }
  block_barrier<N, false>(b, kEnd, call);
  if (threadIdx.x == 0) b.counters[blockIdx.x] = call;
}

int64_t ceil_div64(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

template <int N, bool VEC>
void launch(bf16* data, int64_t elems, const PeerAllReduceBuffers& b, PeerAllReduceAlgo algo,
            cudaStream_t stream) {
  using U = typename Unit<VEC>::T;
  const int64_t units = elems / Unit<VEC>::kElems;
  U* io = reinterpret_cast<U*>(data);
  if (algo == PeerAllReduceAlgo::kOneShot) {
    const int blocks = static_cast<int>(std::min<int64_t>(
        kPeerAllReduceMaxBlocks, std::max<int64_t>(1, ceil_div64(units, kThreads))));
    one_shot_kernel<N, VEC>
        <<<blocks, kThreads, 0, stream>>>(io, units, ceil_div64(units, blocks), b);
  } else {
    const int64_t part = ceil_div64(units, N);
    const int blocks = static_cast<int>(std::min<int64_t>(
        kPeerAllReduceMaxBlocks, std::max<int64_t>(1, ceil_div64(part, kThreads))));
    two_shot_kernel<N, VEC>
        <<<blocks, kThreads, 0, stream>>>(io, units, part, ceil_div64(part, blocks), b);
  }
  CUDA_CHECK(cudaGetLastError());
}

template <int N>
void dispatch_vec(bf16* data, int64_t elems, const PeerAllReduceBuffers& b, PeerAllReduceAlgo algo,
                  cudaStream_t stream) {
  bool vec = elems % 8 == 0 && aligned16(data);
  for (int r = 0; r < N; ++r) vec = vec && aligned16(b.data[r]);
  if (vec)
    launch<N, true>(data, elems, b, algo, stream);
  else
    launch<N, false>(data, elems, b, algo, stream);
}

template <int N>
void launch_add_rms_norm(const TensorView& x, const TensorView& residual, const TensorView& weight,
                         float eps, const PeerAllReduceBuffers& b, cudaStream_t stream) {
  const int64_t rows = x.size(0);
  const int blocks = static_cast<int>(std::min<int64_t>(kPeerAllReduceMaxBlocks, rows));
  one_shot_add_rms_norm_kernel<N><<<blocks, kNormThreads, 0, stream>>>(
      static_cast<bf16*>(x.data), x.stride[0], static_cast<bf16*>(residual.data),
      residual.stride[0], static_cast<const bf16*>(weight.data), rows, static_cast<int>(x.size(1)),
      eps, b);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace
}  // namespace nanovllm::kernels::cuda

namespace nanovllm::kernels {

namespace {

[[noreturn]] void fail(const char* op, const std::string& why) {
  throw std::invalid_argument(std::string(op) + ": " + why);
}

// The group both calls need: a built rank count, this rank in it, every rank's buffers mapped,
// call counters, and `bytes` within the staging buffers.
void check_group(const char* op, const PeerAllReduceBuffers& b, size_t bytes) {
  if (!peer_all_reduce_supports(b.world_size))
    fail(op, "world_size " + std::to_string(b.world_size) + " not built (2, 4 or 8)");
  if (b.rank < 0 || b.rank >= b.world_size)
    fail(op, "rank " + std::to_string(b.rank) + " outside the group");
  for (int r = 0; r < b.world_size; ++r)
    if (b.data[r] == nullptr || b.flags[r] == nullptr)
      fail(op, "rank " + std::to_string(r) + "'s buffers are not mapped");
  if (b.counters == nullptr) fail(op, "no call counters");
  if (bytes > b.capacity_bytes)
    fail(op, std::to_string(bytes) + " bytes exceed the staging buffers' " +
                 std::to_string(b.capacity_bytes));
}

// launch(std::integral_constant<int, N>) for the group's rank count (check_group passed).
template <typename Launch>
void dispatch_world_size(int world_size, Launch&& launch) {
  switch (world_size) {
    case 2:
      launch(std::integral_constant<int, 2>{});
      break;
    case 4:
      launch(std::integral_constant<int, 4>{});
      break;
    default:
      launch(std::integral_constant<int, 8>{});
      break;
  }
}

}  // namespace

bool peer_all_reduce_supports(int world_size) {
  return world_size == 2 || world_size == 4 || world_size == 8;
}

void peer_all_reduce_add_rms_norm(const TensorView& x, const TensorView& residual,
                                  const TensorView& weight, float eps,
                                  const PeerAllReduceBuffers& b, cudaStream_t stream) {
  constexpr const char* kOp = "peer_all_reduce_add_rms_norm";
  if (x.dtype != DType::kBf16 || residual.dtype != DType::kBf16 || weight.dtype != DType::kBf16 ||
      x.on_cpu() || x.ndim != 2 || residual.ndim != 2 || x.stride[1] != 1 ||
      residual.stride[1] != 1 || x.size(0) != residual.size(0) || x.size(1) != residual.size(1) ||
      weight.numel() != x.size(1))
    fail(kOp, "x, residual: [T, H] bf16 with contiguous rows on the GPU; weight: [H] bf16");
  if (x.size(1) % 8 != 0 || x.stride[0] % 8 != 0 || residual.stride[0] % 8 != 0 ||
      !cuda::aligned16(x.data) || !cuda::aligned16(residual.data) || !cuda::aligned16(weight.data))
    fail(kOp, "H, the row strides and the pointers must allow 16-byte vectors");
  check_group(kOp, b, static_cast<size_t>(x.numel()) * 2);
  if (x.size(0) == 0) return;
  dispatch_world_size(b.world_size, [&](auto n) {
    cuda::launch_add_rms_norm<decltype(n)::value>(x, residual, weight, eps, b, stream);
  });
}

void peer_all_reduce_sum(const TensorView& inout, const PeerAllReduceBuffers& b,
                         PeerAllReduceAlgo algo, cudaStream_t stream) {
  constexpr const char* kOp = "peer_all_reduce_sum";
  if (inout.dtype != DType::kBf16 || inout.on_cpu() || !inout.is_contiguous())
    fail(kOp, "inout must be a contiguous bf16 tensor on the GPU");
  check_group(kOp, b, inout.nbytes());
  const int64_t elems = inout.numel();
  if (elems == 0) return;
  auto* data = static_cast<cuda::bf16*>(inout.data);
  dispatch_world_size(b.world_size, [&](auto n) {
    cuda::dispatch_vec<decltype(n)::value>(data, elems, b, algo, stream);
  });
}

}  // namespace nanovllm::kernels
