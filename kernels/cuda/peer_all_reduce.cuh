// What the peer-memory all-reduce kernels share (kernels/cuda/peer_all_reduce.cu: the sums;
// kernels/cuda/peer_all_reduce_norm.cu: the sums fused with the residual add and RMSNorm): the
// per-block flag barrier across the ranks, the ordered sum of one unit over the ranks, the
// per-block call counter, and the host-side checks and rank-count dispatch.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/cuda/common.cuh"
#include "kernels/peer_all_reduce.h"

namespace nanovllm::kernels::cuda::peer {

enum Barrier { kStart = 0, kMiddle = 1 };

__device__ __forceinline__ void store_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
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
// Rank r's staging half of call `call` (kernels/peer_all_reduce.h: calls alternate halves).
template <typename U>
__device__ __forceinline__ U* staging(const PeerAllReduceBuffers& b, int r, uint32_t call) {
  return reinterpret_cast<U*>(static_cast<uint8_t*>(b.data[r]) + (call & 1u) * b.capacity_bytes);
}

template <int N, bool VEC>
__device__ __forceinline__ typename Unit<VEC>::T sum_unit(const PeerAllReduceBuffers& b,
                                                          uint32_t call, int64_t i) {
  using U = typename Unit<VEC>::T;
  if constexpr (VEC) {
    float acc[8] = {};
#pragma unroll
    for (int r = 0; r < N; ++r) {
      const uint4 raw = __ldcg(staging<const uint4>(b, r, call) + i);
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
    for (int r = 0; r < N; ++r) acc += to_f32(staging<const bf16>(b, r, call)[i]);
    return to_bf16(acc);
  }
}

// The inbox regions (kernels/peer_all_reduce.h's peer_push_inbox_bytes).
enum Region { kScatter = 0, kGather = 1 };

// Push (kernels/peer_all_reduce.h): slot `slot` of region `region` of rank `owner`'s inbox for
// call `call`, as U.
template <typename U>
__device__ __forceinline__ U* inbox(const PeerAllReduceBuffers& b, int owner, uint32_t call,
                                    int slot, Region region = kScatter) {
  const size_t cell =
      ((call & 1u) * 2 + static_cast<size_t>(region)) * static_cast<size_t>(b.world_size) +
      static_cast<size_t>(slot);
  return reinterpret_cast<U*>(static_cast<uint8_t*>(b.inbox[owner]) + cell * b.inbox_bytes);
}

// Eight kPushEmpty elements: what the owner writes back into a slot it has read.
__device__ __forceinline__ uint4 empty_unit() {
  constexpr uint32_t kPair = uint32_t{kPushEmpty} * 0x10001u;
  return make_uint4(kPair, kPair, kPair, kPair);
}

// v with every -0 element made +0, so that no sent element reads as kPushEmpty.
__device__ __forceinline__ uint4 without_negative_zero(uint4 v) {
  uint32_t* w = &v.x;
#pragma unroll
  for (int k = 0; k < 4; ++k)
    w[k] &= ~(__vcmpeq2(w[k], uint32_t{kPushEmpty} * 0x10001u) & 0x80008000u);
  return v;
}

// Whether some element of v is still kPushEmpty (its sender's store has not landed).
__device__ __forceinline__ bool has_empty(const uint4& v) {
  constexpr uint32_t kPair = uint32_t{kPushEmpty} * 0x10001u;
  return (__vcmpeq2(v.x, kPair) | __vcmpeq2(v.y, kPair) | __vcmpeq2(v.z, kPair) |
          __vcmpeq2(v.w, kPair)) != 0;
}

// A load that goes to memory every time (the inbox is written by peers over the links).
__device__ __forceinline__ uint4 load_volatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// The unit at p once rank `from` has pushed all of it (v: a first load of p); traps after
// kPeerWaitTimeoutNs, naming the ranks, as block_barrier does.
__device__ __forceinline__ uint4 wait_pushed(const PeerAllReduceBuffers& b, const uint4* p, uint4 v,
                                             int from, uint32_t call) {
  if (!has_empty(v)) return v;
  const uint64_t start = global_ns();
  while (has_empty(v = load_volatile(p))) {
    if (global_ns() - start > kPeerWaitTimeoutNs) {
      printf(
          "peer all-reduce: rank %d, block %d waited more than 10 s for rank %d's push of "
          "call %u\n",
          b.rank, blockIdx.x, from, call);
      __trap();
    }
  }
  return v;
}

// Pushes unit i of this rank's message (v, -0 already made +0) into every peer's inbox.
template <int N>
__device__ __forceinline__ void push_unit(const PeerAllReduceBuffers& b, uint32_t call, int64_t i,
                                          const uint4& v, Region region = kScatter) {
#pragma unroll
  for (int p = 0; p < N; ++p)
    if (p != b.rank) inbox<uint4>(b, p, call, b.rank, region)[i] = v;
}

// The sum over the ranks of unit i of the scatter slots (ranks in order 0..N-1, f32, rounded
// once), this rank's own being `own` (-0 made +0, as sent); then every peer slot of unit i is
// emptied for the call after next.
template <int N>
__device__ __forceinline__ uint4 sum_pushed_unit(const PeerAllReduceBuffers& b, uint32_t call,
                                                 int64_t i, const uint4& own) {
  uint4 got[N];
#pragma unroll
  for (int s = 0; s < N; ++s)  // every slot's load in flight at once
    got[s] = s == b.rank ? own : load_volatile(inbox<const uint4>(b, b.rank, call, s) + i);
  float acc[8] = {};
#pragma unroll
  for (int s = 0; s < N; ++s) {
    if (s != b.rank)
      got[s] = wait_pushed(b, inbox<const uint4>(b, b.rank, call, s) + i, got[s], s, call);
    const Bf16x8 v = *reinterpret_cast<const Bf16x8*>(&got[s]);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] += to_f32(v.v[j]);
  }
#pragma unroll
  for (int s = 0; s < N; ++s)
    if (s != b.rank) inbox<uint4>(b, b.rank, call, s)[i] = empty_unit();
  Bf16x8 out;
#pragma unroll
  for (int j = 0; j < 8; ++j) out.v[j] = to_bf16(acc[j]);
  return *reinterpret_cast<const uint4*>(&out);
}

// Unit i of the gather slot `from` once it has landed; the slot is emptied for the call after
// next.
__device__ __forceinline__ uint4 take_gathered_unit(const PeerAllReduceBuffers& b, uint32_t call,
                                                    int from, int64_t i) {
  uint4* p = inbox<uint4>(b, b.rank, call, from, kGather) + i;
  const uint4 v = wait_pushed(b, p, load_volatile(p), from, call);
  *p = empty_unit();
  return v;
}

// The call number of this block: one more than its last (the same on every rank, since every
// rank makes the same calls). Written back by thread 0 at the end.
//
// Every kernel starts here, and this is where a kernel launched early (launch_peer_kernel
// below) waits for the previous one: nothing of this rank's is read before (the counters
// included, which the previous all-reduce wrote). It then lets the next kernel launch: a
// projection after the all-reduce streams its weights in while this one waits on its peers'
// flags, and reads our output only after its own wait (common.cuh).
__device__ __forceinline__ uint32_t next_call(const PeerAllReduceBuffers& b) {
  wait_for_previous_grid();
  allow_next_grid();
  __shared__ uint32_t call;
  if (threadIdx.x == 0) call = b.counters[blockIdx.x] + 1;
  __syncthreads();
  return call;
}

// The call's last act: every block index's count becomes `call`, the launched blocks' by
// themselves and the others' by block 0, so that all counts (and the staging half) stay in
// step whatever grid the next call has. Read again only by the next kernel.
__device__ __forceinline__ void end_call(const PeerAllReduceBuffers& b, uint32_t call) {
  if (threadIdx.x == 0) b.counters[blockIdx.x] = call;
  if (blockIdx.x == 0)
    for (unsigned j = gridDim.x + threadIdx.x; j < kPeerAllReduceMaxBlocks; j += blockDim.x)
      b.counters[j] = call;
}

// Whether the all-reduce kernels are launched early (programmatic dependent launch): the
// default; NANOVLLM_PEER_ALL_REDUCE_LAUNCH=plain launches them after the previous kernel ends,
// as before (comparisons). Read once per process.
bool peer_launch_early();

// kernel<<<blocks, threads, 0, stream>>>(args...), early (launch_dependent) where
// peer_launch_early() says so.
template <typename... Params, typename... Args>
void launch_peer_kernel(void (*kernel)(Params...), int blocks, int threads, cudaStream_t stream,
                        Args&&... args) {
  launch_early_or_plain(peer_launch_early(), kernel, dim3(blocks), dim3(threads), stream,
                        std::forward<Args>(args)...);
}

inline int64_t ceil_div64(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

[[noreturn]] inline void fail(const char* op, const std::string& why) {
  throw std::invalid_argument(std::string(op) + ": " + why);
}

// The group every call needs: a built rank count, this rank in it, every rank's buffers mapped,
// call counters, and `bytes` within the staging buffers (a push: bytes is what one inbox slot
// must take).
inline void check_group(const char* op, const PeerAllReduceBuffers& b, size_t bytes,
                        bool push = false) {
  if (!peer_all_reduce_supports(b.world_size))
    fail(op, "world_size " + std::to_string(b.world_size) + " not built (2, 4 or 8)");
  if (b.rank < 0 || b.rank >= b.world_size)
    fail(op, "rank " + std::to_string(b.rank) + " outside the group");
  for (int r = 0; r < b.world_size; ++r)
    if (b.data[r] == nullptr || b.flags[r] == nullptr)
      fail(op, "rank " + std::to_string(r) + "'s buffers are not mapped");
  if (b.counters == nullptr) fail(op, "no call counters");
  if (push) {
    for (int r = 0; r < b.world_size; ++r)
      if (b.inbox[r] == nullptr) fail(op, "rank " + std::to_string(r) + "'s inbox is not mapped");
    if (bytes > b.inbox_bytes)
      fail(op,
           std::to_string(bytes) + " bytes exceed the inboxes' " + std::to_string(b.inbox_bytes));
    return;
  }
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

}  // namespace nanovllm::kernels::cuda::peer
