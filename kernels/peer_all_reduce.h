// All-reduce (sum) of a bf16 tensor over the tensor-parallel ranks through peer memory (NVLink):
// the technique vLLM calls custom all-reduce and TensorRT-LLM its one-shot / two-shot
// all-reduce. Every rank maps every rank's staging buffer and flag block (CUDA IPC between
// processes, peer access within one); a call is one kernel, synchronised across the ranks by
// per-block flags in peer memory, never by the host, so it can live in a CUDA graph.
//
// - One-shot: each rank copies its input into its staging buffer, then reads every rank's
//   and sums (f32, ranks in order 0..N-1). N reads per element; best for small messages.
// - Two-shot: reduce-scatter (rank r sums part r of every rank's buffer into its own), then
//   all-gather (every rank reads part s from rank s). 2 reads per element over the links.
// - Push (one-shot without flags): each rank writes its input into slot `rank` of every peer's
//   inbox, then waits for its own inbox's slots to fill and sums. An inbox holds kPushEmpty
//   (bf16 -0) in every unwritten element, so the data is its own flag: no barrier, one one-way
//   trip over the links instead of a flag exchange and then remote reads. A -0 input is sent
//   as +0 (the sum is the same number), and the owner writes kPushEmpty back once it has read.
//   Calls alternate between two inbox generations: a peer writes generation g again only in
//   the call after next, which it reaches only once the owner has entered the call between
//   (its push or its start barrier), after emptying g (kernels run in stream order).
// - Push two-shot: the two-shot's reduce-scatter and all-gather as pushes. Each rank pushes
//   part p of its message into slot `rank` of rank p's scatter inbox, sums its own part as the
//   peers' pieces land (ranks in order), and pushes that sum into slot `rank` of every peer's
//   gather inbox, where each rank collects the other parts. 2/N of the push's bytes over the
//   links (half on 4 ranks), and neither the staging copy nor a barrier of the two-shot. The gather
//   region of generation g is written in call c only after its owner's scatter push of c,
//   which the owner makes after emptying both regions of g in call c - 2.
// Either way every rank ends with the same bits, and a run is deterministic: the sum order is
// fixed, never who arrives first.
//
// Every rank must make the same calls with the same sizes in the same order (as with NCCL):
// each rank counts its calls on the device (PeerAllReduceBuffers::counters, one per block
// index, all advanced by every call whatever its grid), and the count is the flag value that
// call waits for, so a graph replays correctly without host-side epochs. A flag wait past
// kPeerWaitTimeoutNs traps (a dead or diverged peer turns into a launch error, not a hang).
// Calls alternate between the two halves of every staging buffer (the count's parity), so a
// call ends without waiting for its peers to finish reading: a rank writes a half again only
// in the call after next, which it reaches after every peer has started the call between
// (that call's start barrier), and so ended every read of the half (kernels run in stream
// order). That saves the end barrier, one cross-GPU flag exchange a call.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/tensor.h"

namespace nanovllm::kernels {

inline constexpr int kMaxPeerRanks = 8;
inline constexpr int kPeerAllReduceMaxBlocks = 128;
inline constexpr uint64_t kPeerWaitTimeoutNs = 10'000'000'000ull;  // 10 s

// Flags a rank's flag block holds: [2 barriers (start, middle)][blocks][ranks] u32.
inline constexpr size_t kPeerFlagWords = size_t{2} * kPeerAllReduceMaxBlocks * kMaxPeerRanks;
// What an unwritten inbox element holds: bf16 -0 (the push algorithm above).
inline constexpr uint16_t kPushEmpty = 0x8000;

enum class PeerAllReduceAlgo { kOneShot, kTwoShot, kPush, kPushTwoShot };

// Bytes of one rank's inbox with slots of `slot_bytes`: [2 generations (calls alternate, as
// with the staging halves)][2 regions (the push's and the push two-shot's scatter; the push
// two-shot's gather)][world_size slots][slot_bytes]. A push takes messages of up to slot_bytes,
// a push two-shot parts of up to that (world_size * slot_bytes). Fill it with kPushEmpty
// before the first call.
inline size_t peer_push_inbox_bytes(int world_size, size_t slot_bytes) {
  return 4 * static_cast<size_t>(world_size) * slot_bytes;
}

// One rank's view of the group's buffers. data[r] and flags[r] are rank r's, mapped into this
// process (data[rank] and flags[rank] are its own). Zero the flags and the counters once,
// before the first call of any rank.
struct PeerAllReduceBuffers {
  int rank = 0;
  int world_size = 0;
  void* data[kMaxPeerRanks] = {};       // rank r's staging buffer [2, capacity_bytes]
  uint32_t* flags[kMaxPeerRanks] = {};  // rank r's flag block [kPeerFlagWords]
  uint32_t* counters = nullptr;         // this rank's own [kPeerAllReduceMaxBlocks], device
  size_t capacity_bytes = 0;            // each half of every staging buffer
  // Push: rank r's inbox [2][2][world_size][inbox_bytes] (peer_push_inbox_bytes); null when
  // the group has none (then kPush and kPushTwoShot are refused).
  void* inbox[kMaxPeerRanks] = {};
  size_t inbox_bytes = 0;  // one slot: the largest pushed message, or push two-shot part
};

// The rank counts the kernels are built for (2, 4, 8): a group of another size keeps NCCL.
bool peer_all_reduce_supports(int world_size);

// The launch shape of a peer_all_reduce_sum: threads a block (128, 256, 512 or 1024) and the
// most blocks (1 .. kPeerAllReduceMaxBlocks, which the flags and counters are laid out for).
// blocks = min(max_blocks, ceil(work / threads)), work being the units (16-byte vectors, or
// elements off the vector path) of the message (one-shot) or of one rank's part (two-shot).
// The runtime picks one per rank count (rank/peer_communicator.h's peer_launch_shape: 512 on
// 2 ranks, 256 on more); all_reduce_bench --sweep-shapes times them all. Every
// rank must pass the same shape (block b waits for block b of every peer). The sum of an
// element is the same whatever the shape, so every shape gives the same bits.
struct PeerAllReduceShape {
  int threads = 512;
  int max_blocks = kPeerAllReduceMaxBlocks;
};

// The largest message (bytes) the buffers take: capacity_bytes (inbox_bytes for kPush,
// world_size parts of inbox_bytes for kPushTwoShot). inout: contiguous bf16 on this rank's
// device, at most that, the same element count on every rank; summed in place. kPush and
// kPushTwoShot also need 16-byte vectors (peer_push_fits). Throws std::invalid_argument on a
// bad argument (too large, not bf16, a rank count peer_all_reduce_supports refuses, a shape
// outside the above, a push without an inbox or vectors).
void peer_all_reduce_sum(const TensorView& inout, const PeerAllReduceBuffers& buffers,
                         PeerAllReduceAlgo algo, cudaStream_t stream,
                         const PeerAllReduceShape& shape = {});

// Whether `algo` (kPush or kPushTwoShot) takes inout: an inbox, at most inbox_bytes (kPush) or
// parts of at most that (kPushTwoShot), 16-byte vectors (an element count that divides by 8,
// and 16-byte aligned data).
bool peer_push_fits(const TensorView& inout, const PeerAllReduceBuffers& buffers,
                    PeerAllReduceAlgo algo = PeerAllReduceAlgo::kPush);

// The blocks peer_all_reduce_sum launches for these arguments (0 for an empty tensor); launches
// nothing. For the benchmark's tables. Throws as peer_all_reduce_sum does.
int peer_all_reduce_blocks(const TensorView& inout, const PeerAllReduceBuffers& buffers,
                           PeerAllReduceAlgo algo, const PeerAllReduceShape& shape = {});

// The one-shot or push all-reduce fused with the residual add and the RMSNorm after it (the
// decoder's row-parallel outputs): y = the ordered f32 sum over the ranks of x, rounded to bf16
// (as peer_all_reduce_sum with `algo` leaves it); residual = bf16(y + residual); x = bf16(
// residual * rsqrt(mean(residual^2) + eps) * weight). x, residual: [T, H] bf16, rows contiguous
// (any row stride for residual), H a multiple of 8; weight: [H] bf16; T * H * 2 bytes at most
// capacity_bytes (inbox_bytes for kPush); algo kOneShot or kPush.
// Each block owns whole rows, so the norm needs no second pass over the ranks. (A two-shot form
// that reads each row's sum from the rank that reduced it lost to the two-shot sum followed by
// the norm kernel on 4 H200s at every size: bench/results/h200x4-2026-11-26-issue31_all_reduce_
// shapes.txt.) Throws std::invalid_argument on a bad argument.
void peer_all_reduce_add_rms_norm(const TensorView& x, const TensorView& residual,
                                  const TensorView& weight, float eps,
                                  const PeerAllReduceBuffers& buffers, cudaStream_t stream,
                                  PeerAllReduceAlgo algo = PeerAllReduceAlgo::kOneShot);

}  // namespace nanovllm::kernels
