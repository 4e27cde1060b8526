#include "rank/peer_memory.h"

#include <cuda_runtime_api.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <span>
#include <vector>

#include "kernels/check.h"

namespace nanovllm {

namespace {

// The flag block comes first in each rank's allocation, padded so the staging buffer starts
// on a 256-byte boundary (16-byte vectors need 16).
constexpr size_t kFlagBytes = (kernels::kPeerFlagWords * sizeof(uint32_t) + 255) / 256 * 256;

// Whether this rank's GPU reaches every rank's (rank r on device r of those visible).
bool reaches_every_peer(int rank, int world_size) {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  for (int r = 0; r < world_size; ++r) {
    if (r == rank) continue;
    int ok = 0;
    if (cudaDeviceCanAccessPeer(&ok, device, device - rank + r) != cudaSuccess || !ok) {
      (void)cudaGetLastError();
      return false;
    }
  }
  return true;
}

}  // namespace

std::unique_ptr<PeerMemory> PeerMemory::open(NcclCommunicator& nccl) {
  const int rank = nccl.rank(), world = nccl.world_size();
  if (!kernels::peer_all_reduce_supports(world)) return nullptr;  // every rank alike
  ExecContext ctx;
  const int64_t all_reach =
      nccl.all_reduce_min(reaches_every_peer(rank, world) ? 1 : 0, ctx);  // the same verdict
  if (all_reach == 0) {
    spdlog::info("rank {}: not every pair of GPUs has peer access: all-reduce through NCCL only",
                 rank);
    return nullptr;
  }
  std::unique_ptr<PeerMemory> m(new PeerMemory());
  const size_t inbox_bytes = kernels::peer_push_inbox_bytes(world, kPushBytes);
  const size_t ce_at = kFlagBytes + 2 * kStagingBytes + inbox_bytes;  // two halves of staging
  const size_t ce_flag_bytes = (kernels::copy_engine_flag_bytes(world) + 255) / 256 * 256;
  const size_t ce_slot = copy_engine_slot_bytes(world);
  const size_t ce_inbox_bytes = kernels::copy_engine_inbox_bytes(world, ce_slot);
  CUDA_CHECK(cudaMalloc(&m->own_, ce_at + ce_flag_bytes + ce_inbox_bytes));
  CUDA_CHECK(cudaMemset(m->own_, 0, kFlagBytes));
  CUDA_CHECK(cudaMemset(static_cast<uint8_t*>(m->own_) + ce_at, 0, ce_flag_bytes));
  {  // every inbox element starts empty
    const std::vector<uint16_t> empty(inbox_bytes / sizeof(uint16_t), kernels::kPushEmpty);
    CUDA_CHECK(cudaMemcpy(static_cast<uint8_t*>(m->own_) + kFlagBytes + 2 * kStagingBytes,
                          empty.data(), inbox_bytes, cudaMemcpyHostToDevice));
  }
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&m->counters_),
                        kernels::kPeerAllReduceMaxBlocks * sizeof(uint32_t)));
  CUDA_CHECK(cudaMemset(m->counters_, 0, kernels::kPeerAllReduceMaxBlocks * sizeof(uint32_t)));
  CUDA_CHECK(cudaDeviceSynchronize());  // zeroed before any peer can learn the handle
  cudaIpcMemHandle_t handle;
  CUDA_CHECK(cudaIpcGetMemHandle(&handle, m->own_));
  const std::vector<uint8_t> all = nccl.all_gather_bytes(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&handle), sizeof handle));
  kernels::PeerAllReduceBuffers& b = m->buffers_;
  b.rank = rank;
  b.world_size = world;
  b.counters = m->counters_;
  b.capacity_bytes = kStagingBytes;
  b.inbox_bytes = kPushBytes;
  kernels::CopyEngineBuffers& ce = m->copy_engine_;
  ce.rank = rank;
  ce.world_size = world;
  ce.slot_bytes = ce_slot;
  for (int r = 0; r < world; ++r) {
    void* base = m->own_;
    if (r != rank) {
      cudaIpcMemHandle_t theirs;
      std::memcpy(&theirs, all.data() + static_cast<size_t>(r) * sizeof theirs, sizeof theirs);
      CUDA_CHECK(cudaIpcOpenMemHandle(&base, theirs, cudaIpcMemLazyEnablePeerAccess));
      m->opened_[r] = base;
    }
    b.flags[r] = static_cast<uint32_t*>(base);
    b.data[r] = static_cast<uint8_t*>(base) + kFlagBytes;
    b.inbox[r] = static_cast<uint8_t*>(base) + kFlagBytes + 2 * kStagingBytes;
    ce.flags[r] = reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(base) + ce_at);
    ce.inbox[r] = static_cast<uint8_t*>(base) + ce_at + ce_flag_bytes;
  }
  spdlog::info(
      "rank {}: peer-memory all-reduce over {} GPUs ({} MiB staging, {} MiB inbox, {} MiB "
      "copy-engine inbox a rank)",
      rank, world, kStagingBytes >> 20, inbox_bytes >> 20, ce_inbox_bytes >> 20);
  return m;
}

PeerMemory::~PeerMemory() {
  for (void* p : opened_)
    if (p) cudaIpcCloseMemHandle(p);
  if (counters_) cudaFree(counters_);
  if (own_) cudaFree(own_);
}

}  // namespace nanovllm
