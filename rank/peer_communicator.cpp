#include "rank/peer_communicator.h"

#include <utility>

namespace nanovllm {

AllReducePath choose_all_reduce(int world_size, size_t bytes, size_t staging_bytes, bool peer_on) {
  if (!peer_on || world_size < 2 || bytes > staging_bytes) return AllReducePath::kNccl;
  if (world_size == 2) return AllReducePath::kOneShot;
  if (bytes <= (size_t{512} << 10)) return AllReducePath::kOneShot;
  if (bytes <= (size_t{1} << 20)) return AllReducePath::kNccl;
  if (bytes <= (size_t{4} << 20)) return AllReducePath::kTwoShot;
  return AllReducePath::kNccl;
}

PeerCommunicator::PeerCommunicator(NcclCommunicator& nccl, std::unique_ptr<PeerMemory> peer)
    : nccl_(nccl), peer_(std::move(peer)) {}

void PeerCommunicator::all_reduce_sum(const TensorView& inout, const ExecContext& ctx) {
  const bool peer_on = peer_ != nullptr && inout.dtype == DType::kBf16 && inout.is_contiguous();
  const AllReducePath path = choose_all_reduce(
      world_size(), inout.nbytes(), peer_ ? peer_->buffers().capacity_bytes : 0, peer_on);
  if (path == AllReducePath::kNccl) return nccl_.all_reduce_sum(inout, ctx);
  kernels::peer_all_reduce_sum(inout, peer_->buffers(),
                               path == AllReducePath::kOneShot
                                   ? kernels::PeerAllReduceAlgo::kOneShot
                                   : kernels::PeerAllReduceAlgo::kTwoShot,
                               ctx.stream);
}

}  // namespace nanovllm
