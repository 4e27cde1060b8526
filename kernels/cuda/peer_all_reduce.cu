// Peer-memory all-reduce (kernels/peer_all_reduce.h): one kernel per call, templated on the rank
// count, on 16-byte vectors and on the threads a block (PeerAllReduceShape), synchronised by
// per-block flags in every rank's flag block (kernels/cuda/peer_all_reduce.cuh). The fused
// add + RMSNorm forms are in kernels/cuda/peer_all_reduce_norm.cu.
#include <algorithm>
#include <string>
#include <type_traits>

#include "kernels/check.h"
#include "kernels/cuda/peer_all_reduce.cuh"
#include "kernels/env_choice.h"

namespace nanovllm::kernels::cuda {

bool peer::peer_launch_early() {
  static const bool early =
      env_choice("NANOVLLM_PEER_ALL_REDUCE_LAUNCH", {"early", "plain", "auto"}) != "plain";
  return early;
}

namespace {

using peer::block_barrier;
using peer::ceil_div64;
using peer::end_call;
using peer::next_call;
using peer::staging;
using peer::sum_unit;
using peer::Unit;

// The blocks an SM __launch_bounds__ asks ptxas to fit. Left to itself it spilled at 128, 256
// and 1024 threads (ptxas -v); a grid of at most kPeerAllReduceMaxBlocks (fewer than the SMs)
// needs only one, and 1 lets it spend the registers. 512, the default, keeps its bounds
// (0: none) and so the code it was measured with.
template <int THREADS>
constexpr int kMinBlocks = THREADS == 512 ? 0 : 1;

// io: [units] of this rank. Block b owns units [b * per_block, (b + 1) * per_block).
template <int N, bool VEC, int THREADS>
__global__ void __launch_bounds__(THREADS, kMinBlocks<THREADS>)
    one_shot_kernel(typename Unit<VEC>::T* io, int64_t units, int64_t per_block,
                    PeerAllReduceBuffers b) {
  NANOVLLM_TRACE_SCOPE(trace::kPeerAllReduce, io);
  using U = typename Unit<VEC>::T;
  const uint32_t call = next_call(b);
  const int64_t begin = blockIdx.x * per_block;
  const int64_t end = min(units, begin + per_block);
  U* mine = staging<U>(b, b.rank, call);
  for (int64_t i = begin + threadIdx.x; i < end; i += THREADS) mine[i] = io[i];
  block_barrier<N, true>(b, peer::kStart, call);
  for (int64_t i = begin + threadIdx.x; i < end; i += THREADS) io[i] = sum_unit<N, VEC>(b, call, i);
  end_call(b, call);
}

// Units [begin, end) of part p (parts of `part` units, the last shorter) that this block owns:
// [b * sub, (b + 1) * sub) of the part, clipped to it.
__device__ __forceinline__ void block_range_of_part(int64_t units, int64_t part, int64_t sub, int p,
                                                    int64_t& begin, int64_t& end) {
  const int64_t part_end = min(units, (p + 1) * part);
  begin = min(part_end, p * part + blockIdx.x * sub);
  end = min(part_end, begin + sub);
}

// The units are N parts of `part` (the last shorter); block b owns [b * sub, (b + 1) * sub) of
// every part. Rank r reduces part r into its own buffer, then every rank gathers part s from
// rank s.
template <int N, bool VEC, int THREADS>
__global__ void __launch_bounds__(THREADS, kMinBlocks<THREADS>)
    two_shot_kernel(typename Unit<VEC>::T* io, int64_t units, int64_t part, int64_t sub,
                    PeerAllReduceBuffers b) {
  NANOVLLM_TRACE_SCOPE(trace::kPeerAllReduce, io);
  using U = typename Unit<VEC>::T;
  const uint32_t call = next_call(b);
  U* mine = staging<U>(b, b.rank, call);
  int64_t begin, end;
  for (int p = 0; p < N; ++p) {
    block_range_of_part(units, part, sub, p, begin, end);
    for (int64_t i = begin + threadIdx.x; i < end; i += THREADS) mine[i] = io[i];
  }
  block_barrier<N, true>(b, peer::kStart, call);
  block_range_of_part(units, part, sub, b.rank, begin, end);
  for (int64_t i = begin + threadIdx.x; i < end; i += THREADS) {
    const U s = sum_unit<N, VEC>(b, call, i);
    io[i] = s;
    mine[i] = s;  // part `rank` of this buffer is read by no peer before the middle barrier
  }
  block_barrier<N, true>(b, peer::kMiddle, call);
#pragma unroll
  for (int p = 0; p < N; ++p) {
    if (p == b.rank) continue;
    block_range_of_part(units, part, sub, p, begin, end);
    const U* theirs = staging<const U>(b, p, call);
    for (int64_t i = begin + threadIdx.x; i < end; i += THREADS) {
      if constexpr (VEC)
        io[i] = __ldcg(theirs + i);
      else
        io[i] = theirs[i];
    }
  }
  end_call(b, call);
}

// io: [units] 16-byte vectors of this rank. Block b owns units [b * per_block, (b + 1) *
// per_block): it pushes them all to the peers, then sums them as their pushes land.
template <int N, int THREADS>
__global__ void __launch_bounds__(THREADS, kMinBlocks<THREADS>)
    push_kernel(uint4* io, int64_t units, int64_t per_block, PeerAllReduceBuffers b) {
  NANOVLLM_TRACE_SCOPE(trace::kPeerAllReduce, io);
  const uint32_t call = next_call(b);
  const int64_t begin = blockIdx.x * per_block;
  const int64_t end = min(units, begin + per_block);
  for (int64_t i = begin + threadIdx.x; i < end; i += THREADS)
    peer::push_unit<N>(b, call, i, peer::without_negative_zero(io[i]));
  // Each thread sums the units it pushed, so its own value is still in io.
  for (int64_t i = begin + threadIdx.x; i < end; i += THREADS)
    io[i] = peer::sum_pushed_unit<N>(b, call, i, peer::without_negative_zero(io[i]));
  end_call(b, call);
}

// io: [units] 16-byte vectors of this rank, in N parts of `part` (the last shorter, a part at
// most one inbox slot); block b owns [b * sub, (b + 1) * sub) of every part, and waits only for
// the peers' block b, which pushes exactly those units.
template <int N, int THREADS>
__global__ void __launch_bounds__(THREADS, kMinBlocks<THREADS>)
    push_two_shot_kernel(uint4* io, int64_t units, int64_t part, int64_t sub,
                         PeerAllReduceBuffers b) {
  NANOVLLM_TRACE_SCOPE(trace::kPeerAllReduce, io);
  const uint32_t call = next_call(b);
  int64_t begin, end;
  // Scatter: part p of this rank's message to slot `rank` of rank p's scatter region.
#pragma unroll
  for (int p = 0; p < N; ++p) {
    if (p == b.rank) continue;
    block_range_of_part(units, part, sub, p, begin, end);
    uint4* slot = peer::inbox<uint4>(b, p, call, b.rank);
    for (int64_t i = begin + threadIdx.x; i < end; i += THREADS)
      slot[i - p * part] = peer::without_negative_zero(io[i]);
  }
  // Reduce part `rank` as the peers' pieces land, and push each sum to every peer's gather
  // region (-0 as +0 again: a sum of +0s and cancellations is never -0, but the bits must be
  // those every rank keeps).
  block_range_of_part(units, part, sub, b.rank, begin, end);
  const int64_t mine = b.rank * part;
  for (int64_t i = begin + threadIdx.x; i < end; i += THREADS) {
    const uint4 sum = peer::without_negative_zero(
        peer::sum_pushed_unit<N>(b, call, i - mine, peer::without_negative_zero(io[i])));
    io[i] = sum;
    peer::push_unit<N>(b, call, i - mine, sum, peer::kGather);
  }
  // Gather the other parts' sums.
#pragma unroll
  for (int p = 0; p < N; ++p) {
    if (p == b.rank) continue;
    block_range_of_part(units, part, sub, p, begin, end);
    for (int64_t i = begin + threadIdx.x; i < end; i += THREADS)
      io[i] = peer::take_gathered_unit(b, call, p, i - p * part);
  }
  end_call(b, call);
}

// One call's grid: `work` units (the message, or one part of it) over `blocks` blocks of
// `per_block` units each.
struct Grid {
  int64_t work = 0;
  int blocks = 0;
  int64_t per_block = 0;
};

Grid grid_for(int64_t units, int n, PeerAllReduceAlgo algo, const PeerAllReduceShape& shape) {
  Grid g;
  const bool parts = algo == PeerAllReduceAlgo::kTwoShot || algo == PeerAllReduceAlgo::kPushTwoShot;
  g.work = parts ? ceil_div64(units, n) : units;
  g.blocks = static_cast<int>(
      std::min<int64_t>(shape.max_blocks, std::max<int64_t>(1, ceil_div64(g.work, shape.threads))));
  g.per_block = ceil_div64(g.work, g.blocks);
  return g;
}

// 16-byte vectors where the element count and every pointer allow them.
bool vec_path(const bf16* data, int64_t elems, const PeerAllReduceBuffers& b) {
  bool vec = elems % 8 == 0 && aligned16(data);
  for (int r = 0; r < b.world_size; ++r) vec = vec && aligned16(b.data[r]);
  return vec;
}

template <int N, bool VEC, int THREADS>
void launch(bf16* data, int64_t elems, const PeerAllReduceBuffers& b, PeerAllReduceAlgo algo,
            const PeerAllReduceShape& shape, cudaStream_t stream) {
  using U = typename Unit<VEC>::T;
  const int64_t units = elems / Unit<VEC>::kElems;
  U* io = reinterpret_cast<U*>(data);
  const Grid g = grid_for(units, N, algo, shape);
  using peer::launch_peer_kernel;
  if (algo == PeerAllReduceAlgo::kOneShot)
    launch_peer_kernel(one_shot_kernel<N, VEC, THREADS>, g.blocks, THREADS, stream, io, units,
                       g.per_block, b);
  else if (algo == PeerAllReduceAlgo::kTwoShot)
    launch_peer_kernel(two_shot_kernel<N, VEC, THREADS>, g.blocks, THREADS, stream, io, units,
                       g.work, g.per_block, b);
  else if constexpr (VEC) {  // check_sum refuses a push off the vector path
    if (algo == PeerAllReduceAlgo::kPush)
      launch_peer_kernel(push_kernel<N, THREADS>, g.blocks, THREADS, stream, io, units, g.per_block,
                         b);
    else
      launch_peer_kernel(push_two_shot_kernel<N, THREADS>, g.blocks, THREADS, stream, io, units,
                         g.work, g.per_block, b);
  }
}

// launch(std::integral_constant<int, THREADS>) for a checked shape's thread count.
template <typename Launch>
void dispatch_threads(int threads, Launch&& launch) {
  switch (threads) {
    case 128:
      launch(std::integral_constant<int, 128>{});
      break;
    case 256:
      launch(std::integral_constant<int, 256>{});
      break;
    case 512:
      launch(std::integral_constant<int, 512>{});
      break;
    default:
      launch(std::integral_constant<int, 1024>{});
      break;
  }
}

template <int N>
void dispatch_vec(bf16* data, int64_t elems, const PeerAllReduceBuffers& b, PeerAllReduceAlgo algo,
                  const PeerAllReduceShape& shape, cudaStream_t stream) {
  const bool vec = vec_path(data, elems, b);
  dispatch_threads(shape.threads, [&](auto threads) {
    constexpr int kT = decltype(threads)::value;
    if (vec)
      launch<N, true, kT>(data, elems, b, algo, shape, stream);
    else
      launch<N, false, kT>(data, elems, b, algo, shape, stream);
  });
}

}  // namespace
}  // namespace nanovllm::kernels::cuda

namespace nanovllm::kernels {

namespace {

// What one inbox slot must hold for a push of inout: the message (kPush) or its largest part
// (kPushTwoShot, N parts of whole 16-byte vectors).
size_t push_slot_bytes(const TensorView& inout, const PeerAllReduceBuffers& b,
                       PeerAllReduceAlgo algo) {
  if (algo != PeerAllReduceAlgo::kPushTwoShot || b.world_size < 1) return inout.nbytes();
  return static_cast<size_t>(cuda::peer::ceil_div64((inout.numel() + 7) / 8, b.world_size)) * 16;
}

// What peer_all_reduce_sum and peer_all_reduce_blocks accept.
void check_sum(const char* op, const TensorView& inout, const PeerAllReduceBuffers& b,
               PeerAllReduceAlgo algo, const PeerAllReduceShape& shape) {
  if (inout.dtype != DType::kBf16 || inout.on_cpu() || !inout.is_contiguous())
    cuda::peer::fail(op, "inout must be a contiguous bf16 tensor on the GPU");
  if (shape.threads != 128 && shape.threads != 256 && shape.threads != 512 && shape.threads != 1024)
    cuda::peer::fail(
        op, "threads " + std::to_string(shape.threads) + " not built (128, 256, 512 or 1024)");
  if (shape.max_blocks < 1 || shape.max_blocks > kPeerAllReduceMaxBlocks)
    cuda::peer::fail(op, "max_blocks " + std::to_string(shape.max_blocks) + " outside 1.." +
                             std::to_string(kPeerAllReduceMaxBlocks));
  const bool push = algo == PeerAllReduceAlgo::kPush || algo == PeerAllReduceAlgo::kPushTwoShot;
  cuda::peer::check_group(op, b, push ? push_slot_bytes(inout, b, algo) : inout.nbytes(), push);
  if (push && !cuda::vec_path(static_cast<const cuda::bf16*>(inout.data), inout.numel(), b))
    cuda::peer::fail(op,
                     "a push needs 16-byte vectors: an element count that divides by 8 and "
                     "16-byte aligned data");
}

}  // namespace

bool peer_all_reduce_supports(int world_size) {
  return world_size == 2 || world_size == 4 || world_size == 8;
}

void peer_all_reduce_sum(const TensorView& inout, const PeerAllReduceBuffers& b,
                         PeerAllReduceAlgo algo, cudaStream_t stream,
                         const PeerAllReduceShape& shape) {
  check_sum("peer_all_reduce_sum", inout, b, algo, shape);
  const int64_t elems = inout.numel();
  if (elems == 0) return;
  auto* data = static_cast<cuda::bf16*>(inout.data);
  cuda::peer::dispatch_world_size(b.world_size, [&](auto n) {
    cuda::dispatch_vec<decltype(n)::value>(data, elems, b, algo, shape, stream);
  });
}

bool peer_push_fits(const TensorView& inout, const PeerAllReduceBuffers& b,
                    PeerAllReduceAlgo algo) {
  if (inout.dtype != DType::kBf16 || inout.on_cpu() || !inout.is_contiguous()) return false;
  for (int r = 0; r < b.world_size; ++r)
    if (b.inbox[r] == nullptr) return false;
  return push_slot_bytes(inout, b, algo) <= b.inbox_bytes &&
         cuda::vec_path(static_cast<const cuda::bf16*>(inout.data), inout.numel(), b);
}

int peer_all_reduce_blocks(const TensorView& inout, const PeerAllReduceBuffers& b,
                           PeerAllReduceAlgo algo, const PeerAllReduceShape& shape) {
  check_sum("peer_all_reduce_blocks", inout, b, algo, shape);
  const int64_t elems = inout.numel();
  if (elems == 0) return 0;
  const bool vec = cuda::vec_path(static_cast<const cuda::bf16*>(inout.data), elems, b);
  return cuda::grid_for(vec ? elems / 8 : elems, b.world_size, algo, shape).blocks;
}

}  // namespace nanovllm::kernels
