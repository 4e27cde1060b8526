#include "launcher/nccl_group.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>

#include "ipc/liveness.h"
#include "kernels/check.h"

namespace nanovllm {

namespace {

void bind_gpu(int rank) {
  int visible = 0;
  CUDA_CHECK(cudaGetDeviceCount(&visible));
  CHECK_MSG(rank < visible, "rank " << rank << " needs GPU " << rank << " but " << visible
                                    << " are visible (CUDA_VISIBLE_DEVICES)");
  CUDA_CHECK(cudaSetDevice(rank));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

NcclRank::NcclRank(int rank, int world_size, const ncclUniqueId& id, StopPredicate stop,
                   std::chrono::steady_clock::time_point began, bool peer_all_reduce) {
  const auto t0 = std::chrono::steady_clock::now();
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  comm_ = std::make_unique<NcclCommunicator>(rank, world_size, id, stream_, std::move(stop));
  comm_->warm_up();
  spdlog::info("rank {}: joined NCCL ({} ranks, NCCL_NVLS_ENABLE={}) and warmed up in {:.2f} s",
               rank, world_size,
               std::getenv("NCCL_NVLS_ENABLE") ? std::getenv("NCCL_NVLS_ENABLE") : "",
               seconds_since(t0));
  // Every rank takes the same branch (the flag is the run's), so the exchange inside is
  // collective.
  std::unique_ptr<PeerMemory> peer;
  if (peer_all_reduce)
    peer = PeerMemory::open(*comm_);
  else
    spdlog::info("rank {}: --disable-custom-all-reduce: every all-reduce through NCCL", rank);
  peer_comm_ = std::make_unique<PeerCommunicator>(*comm_, std::move(peer));
  setup_s_ = seconds_since(began);
}

void NcclRank::knock_out_all_reduces(int rank) {
  spdlog::warn(
      "rank {}: every all-reduce of the forward pass is knocked out (nanovllm-bench "
      "--knock-out-all-reduce): a timing experiment, the outputs are wrong",
      rank);
  peer_comm_->knock_out_all_reduces();
}

NcclRank::~NcclRank() {
  peer_comm_.reset();
  comm_.reset();
  if (stream_) cudaStreamDestroy(stream_);
}

std::unique_ptr<NcclRank> start_nccl_rank0(RendezvousPublisher& publisher, int world_size,
                                           StopPredicate stop, bool peer_all_reduce) {
  const auto began = std::chrono::steady_clock::now();
  bind_gpu(0);
  const ncclUniqueId id = NcclCommunicator::create_unique_id();
  publisher.publish(NcclCommunicator::unique_id_bytes(id));
  return std::make_unique<NcclRank>(0, world_size, id, std::move(stop), began, peer_all_reduce);
}

std::unique_ptr<NcclRank> start_nccl_rank0(RendezvousPublisher& publisher, int world_size,
                                           pid_t launcher, bool peer_all_reduce) {
  return start_nccl_rank0(
      publisher, world_size,
      [launcher] {
        check_launcher_alive(launcher);  // throws: the watchdog aborts and reports it
        return false;
      },
      peer_all_reduce);
}

std::unique_ptr<NcclRank> join_nccl_rank(RendezvousWaiter& waiter, int rank, int world_size,
                                         bool peer_all_reduce) {
  const RendezvousResult got = waiter.wait();
  if (got.outcome == RendezvousOutcome::kAbandoned) return nullptr;
  const auto began = std::chrono::steady_clock::now();
  bind_gpu(rank);
  return std::make_unique<NcclRank>(
      rank, world_size, NcclCommunicator::unique_id_from_bytes(got.payload),
      [&waiter] {
        waiter.check_publisher_alive();  // rank 0 or the launcher gone: abort, report
        return false;
      },
      began, peer_all_reduce);
}

}  // namespace nanovllm
