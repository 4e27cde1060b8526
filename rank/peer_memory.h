// The peer-memory all-reduce's buffers across the rank processes (kernels/peer_all_reduce.h):
// each rank allocates one block, [flags | staging buffer], exports it as a CUDA IPC handle,
// every rank gathers every handle (one NCCL all-gather of 64-byte handles at start-up: NCCL is
// already joined, so no further hand-over through the run's segment is needed) and opens its
// peers'. Made only where every rank reaches every other by peer access (NVLink, or PCIe P2P):
// the ranks agree on that first, so they all use it or none does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "kernels/copy_engine_all_reduce.h"
#include "kernels/peer_all_reduce.h"
#include "rank/nccl_communicator.h"

namespace nanovllm {

class PeerMemory {
 public:
  // The largest message the peer path takes; a rank's staging buffer holds two halves of it
  // (calls alternate between them: kernels/peer_all_reduce.h).
  static constexpr size_t kStagingBytes = size_t{8} << 20;
  // One inbox slot (kernels/peer_all_reduce.h's push algorithms): the largest pushed message,
  // or the largest part of a push two-shot (rank/peer_communicator.h's takes_push sends at most
  // 512 KiB; its push two-shot takes 4 MiB on 4 ranks); the inbox holds 4 x world_size slots
  // (16 MiB on 4 ranks).
  static constexpr size_t kPushBytes = size_t{1} << 20;
  // One copy-engine inbox slot (kernels/copy_engine_all_reduce.h): the largest row piece of a
  // prefill step whose sum the copy engines move (layers/prefill_overlap.h cuts the steps'
  // rows to fit): 2,048 rows of the 8B shape's 4,096. The inbox holds 2 x world_size slots.
  static constexpr size_t kCopyEngineSlotBytes = size_t{16} << 20;
  // The slot a group of `world_size` ranks gets (pure): kCopyEngineSlotBytes on 2 and 4 ranks
  // (64 and 128 MiB of inbox a rank), none on 8 (not measured). On 4 ranks the calls take two
  // phases (reduce-scatter, all-gather: NCCL's ring's bytes); the first form there, each rank
  // copying its whole piece to 3 peers, took the 8B shape's 32k-token prompt 546 ms with the
  // copies in order and 508 with one stream a peer, against NCCL's 427; on 2 H200s 0.94x NCCL's
  // time (bench/results/h200x4-2026-11-27-issue31_copy_engine.txt).
  static size_t copy_engine_slot_bytes(int world_size) {
    return world_size == 2 || world_size == 4 ? kCopyEngineSlotBytes : 0;
  }

  // Collective over `nccl`'s ranks (every rank calls it, on its own GPU): nullopt-like (an
  // empty pointer) when some pair of ranks has no peer access; throws CollectiveError when a
  // peer fails during the exchange.
  static std::unique_ptr<PeerMemory> open(NcclCommunicator& nccl);
  ~PeerMemory();
  PeerMemory(const PeerMemory&) = delete;
  PeerMemory& operator=(const PeerMemory&) = delete;

  const kernels::PeerAllReduceBuffers& buffers() const { return buffers_; }
  const kernels::CopyEngineBuffers& copy_engine() const { return copy_engine_; }

 private:
  PeerMemory() = default;
  // [flag bytes | 2 x kStagingBytes (two halves) | inbox | copy-engine flags | copy-engine
  // inbox] on this rank's GPU
  void* own_ = nullptr;
  uint32_t* counters_ = nullptr;               // [kPeerAllReduceMaxBlocks], this rank's own
  void* opened_[kernels::kMaxPeerRanks] = {};  // peers' blocks mapped here (cudaIpcOpenMemHandle)
  kernels::PeerAllReduceBuffers buffers_;
  kernels::CopyEngineBuffers copy_engine_;
};

}  // namespace nanovllm
