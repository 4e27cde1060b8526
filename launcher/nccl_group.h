// The CUDA backend's communicator under tensor parallelism, set up after fork (the launcher
// itself never touches CUDA): each rank binds GPU r of those visible (CUDA_VISIBLE_DEVICES
// respected), rank 0 creates the ncclUniqueId and publishes it through the run's segment
// (ipc/rendezvous.h: no files, no sockets), every rank joins and runs one warm-up collective,
// so NCCL's buffers exist before the model runner measures free memory for the KV cache.
#pragma once

#include <cuda_runtime_api.h>
#include <sys/types.h>

#include <chrono>
#include <memory>

#include "ipc/rendezvous.h"
#include "rank/nccl_communicator.h"
#include "rank/peer_communicator.h"

namespace nanovllm {

// One rank's membership: the communicator and the stream its warm-up ran on.
class NcclRank {
 public:
  // `began`: when this rank's set-up began (binding its GPU), for setup_s(). `peer_all_reduce`:
  // the small all-reduces go through peer memory where every pair of GPUs has peer access
  // (false: --disable-custom-all-reduce, NCCL everywhere).
  NcclRank(int rank, int world_size, const ncclUniqueId& id, StopPredicate stop,
           std::chrono::steady_clock::time_point began, bool peer_all_reduce);
  ~NcclRank();
  NcclRank(const NcclRank&) = delete;
  NcclRank& operator=(const NcclRank&) = delete;

  // NCCL, with the peer-memory all-reduce where it is on (rank/peer_communicator.h).
  Communicator& comm() { return *peer_comm_; }
  // RunSettings::knock_out_all_reduce: PeerCommunicator::knock_out_all_reduces, logged.
  void knock_out_all_reduces(int rank);
  // Seconds from binding the GPU to the warm-up collective's end (rank 0: the unique id's
  // creation included; never the wait for rank 0's id): the start-up line's NCCL set-up.
  double setup_s() const { return setup_s_; }

 private:
  double setup_s_ = 0;
  cudaStream_t stream_ = nullptr;  // the warm-up's; collectives later run on the runner's
  std::unique_ptr<NcclCommunicator> comm_;
  std::unique_ptr<PeerCommunicator> peer_comm_;  // over comm_; destroyed first
};

// Rank 0, once its requests validated: binds GPU 0, publishes a fresh id, joins. A dead
// launcher ends any wait inside NCCL (the watchdog aborts the communicator).
std::unique_ptr<NcclRank> start_nccl_rank0(RendezvousPublisher& publisher, int world_size,
                                           pid_t launcher, bool peer_all_reduce);
// The same with the caller's stop predicate (an embedded rank 0 watches its spawned workers:
// throwing from it aborts the communicator).
std::unique_ptr<NcclRank> start_nccl_rank0(RendezvousPublisher& publisher, int world_size,
                                           StopPredicate stop, bool peer_all_reduce);

// Rank r >= 1: waits for rank 0's id; nullptr when rank 0 abandoned the rendezvous (nothing
// to run). Binds GPU r and joins; a dead rank 0 or launcher ends any wait inside NCCL.
std::unique_ptr<NcclRank> join_nccl_rank(RendezvousWaiter& waiter, int rank, int world_size,
                                         bool peer_all_reduce);

}  // namespace nanovllm
