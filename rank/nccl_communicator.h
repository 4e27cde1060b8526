// Tensor parallelism across GPUs, one process per rank: the Communicator over NCCL. The
// communicator is nonblocking (ncclConfig_t::blocking = 0), so no NCCL call blocks the host:
// initialisation and every enqueue that reports ncclInProgress are polled, and every
// host-side wait goes through a CollectiveWatchdog that aborts the communicator and throws
// CollectiveError when NCCL reports an async error or the stop predicate (rank 0 / launcher
// liveness) fires.
//
// Collectives run on ctx.stream, in stream order, and may be captured into CUDA graphs
// (all_reduce_sum and gather_to_root enqueue only; all_reduce_min and warm_up wait).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/communicator.h"
#include "kernels/device_buffer.h"
#include "rank/collective_watchdog.h"

namespace nanovllm {

class NcclCommunicator final : public Communicator {
 public:
  // Rank 0 only: a fresh id (it also starts NCCL's bootstrap listener in this process, so it
  // is called after fork, in rank 0). The bytes travel through ipc/rendezvous.h.
  static ncclUniqueId create_unique_id();
  static std::vector<uint8_t> unique_id_bytes(const ncclUniqueId& id);  // [NCCL_UNIQUE_ID_BYTES]
  static ncclUniqueId unique_id_from_bytes(std::span<const uint8_t> bytes);  // CHECKs the size

  // Joins the communicator of `world_size` ranks as `rank`, on the CUDA device the caller has
  // already set (cudaSetDevice), and returns once every rank has joined. `stream` is the
  // rank's stream (warm_up runs on it). Throws CollectiveError when a peer never
  // comes (stop predicate, policy.timeout) or NCCL fails.
  NcclCommunicator(int rank, int world_size, const ncclUniqueId& id, cudaStream_t stream,
                   StopPredicate stop, WatchdogPolicy policy = {});
  // A healthy communicator is finalised (bounded wait) and destroyed; otherwise aborted.
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  // inout: contiguous CUDA tensor of BF16, F16 or F32; ncclAllReduce(sum) in place.
  void all_reduce_sum(const TensorView& inout, const ExecContext& ctx) override;
  // send: contiguous CUDA [rows, cols] (any dtype); recv (rank 0): contiguous CUDA
  // [world_size, rows, cols] of send's dtype. Rank 0 copies its own part and receives rank
  // r's part straight into recv[r] (one ncclRecv per peer, one ncclSend on every other rank,
  // in one NCCL group).
  void gather_to_root(const TensorView& send, const TensorView& recv,
                      const ExecContext& ctx) override;
  // ncclAllReduce(min) of one int64 through device scratch; waits (under the watchdog).
  int64_t all_reduce_min(int64_t value, const ExecContext& ctx) override;
  // Every rank's `mine` (the same length on every rank), rank r's at [r * size, (r + 1) * size);
  // waits (under the watchdog): a start-up exchange (peer-memory handles), never in a graph.
  std::vector<uint8_t> all_gather_bytes(std::span<const uint8_t> mine);
  // ncclCommAbort, once; every later collective throws CollectiveError. Never throws.
  void abort() override;

  // One all-reduce, one gather and a wait: NCCL connects its rings and its peer-to-peer
  // channels (allocating their device buffers) at the first collective of each kind, so the
  // model runner calls this before it measures free memory for the KV cache, and before any
  // CUDA graph capture.
  void warm_up();
  // cudaStreamSynchronize under the watchdog: a dead peer or an NCCL error ends the wait
  // with CollectiveError (after an abort) instead of a hang.
  void synchronize(cudaStream_t stream) override;
  CollectiveWatchdog& watchdog() { return watchdog_; }

 private:
  ncclResult_t state() const;  // ncclCommGetAsyncError's verdict
  std::string async_error() const;
  void abort_comm() noexcept;
  // Turns an NCCL call's result into: return (ncclSuccess), a watched wait until the
  // communicator leaves ncclInProgress, or an abort and a thrown error naming `call`.
  void complete(CollectiveWatchdog& dog, ncclResult_t result, const char* call, const char* file,
                int line);
  // Throws CollectiveError once the communicator was aborted.
  void check_usable(const char* what) const;

  int rank_;
  int world_size_;
  cudaStream_t stream_;
  ncclComm_t comm_ = nullptr;
  DeviceBuffer scratch_;  // [64 + 64 * world_size] bytes: the min operand, the warm-up gather
  std::unique_ptr<int64_t, void (*)(int64_t*)> host_value_;  // pinned [1]: all_reduce_min
  CollectiveWatchdog watchdog_;
};

}  // namespace nanovllm
