#include "rank/peer_communicator.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "kernels/check.h"

namespace nanovllm {

AllReducePath choose_all_reduce(int world_size, size_t bytes, size_t staging_bytes, bool peer_on) {
  if (!peer_on || world_size < 2 || bytes > staging_bytes) return AllReducePath::kNccl;
  if (world_size == 2) return AllReducePath::kOneShot;
  if (bytes <= (size_t{512} << 10)) return AllReducePath::kOneShot;
  if (bytes <= (size_t{4} << 20)) return AllReducePath::kTwoShot;
  return AllReducePath::kNccl;
}

bool takes_push(int world_size, size_t bytes, size_t inbox_bytes, bool push_on) {
  if (!push_on || bytes > inbox_bytes) return false;
  if (world_size == 2) return bytes <= (size_t{512} << 10);
  return world_size == 4 && bytes <= (size_t{64} << 10);
}

bool takes_push_two_shot(int world_size, size_t bytes, size_t inbox_bytes, bool push_on) {
  const size_t vectors = (bytes + 15) / 16;
  const size_t part = (vectors + world_size - 1) / world_size * 16;  // whole vectors
  return push_on && world_size == 4 && part <= inbox_bytes;
}

bool push_fuses_norm(size_t bytes) {
  return bytes <= (size_t{256} << 10);
}

kernels::PeerAllReduceShape peer_launch_shape(int world_size) {
  kernels::PeerAllReduceShape shape;
  shape.threads = world_size <= 2 ? 512 : 256;
  return shape;
}

PeerCommunicator::PeerCommunicator(NcclCommunicator& nccl, std::unique_ptr<PeerMemory> peer)
    : nccl_(nccl), peer_(std::move(peer)) {
  const char* env = std::getenv("NANOVLLM_PEER_PUSH");
  push_on_ = peer_ != nullptr && peer_->buffers().inbox_bytes > 0 &&
             !(env != nullptr && std::string(env) == "off");
  copy_engine_on_ = peer_ != nullptr && peer_->copy_engine().slot_bytes > 0;
}

size_t PeerCommunicator::copy_engine_sum_bytes() const {
  return copy_engine_on_ ? peer_->copy_engine().slot_bytes : 0;
}

bool PeerCommunicator::takes_copy_engine(const TensorView& x, cudaStream_t stream) const {
  if (!copy_engine_on_ || !kernels::copy_engine_fits(x, peer_->copy_engine())) return false;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  return capture == cudaStreamCaptureStatusNone;  // the call numbers are the host's
}

kernels::PeerAllReduceAlgo PeerCommunicator::one_shot_algo(size_t bytes, bool vectors) const {
  return vectors && takes_push(world_size(), bytes, peer_->buffers().inbox_bytes, push_on_)
             ? kernels::PeerAllReduceAlgo::kPush
             : kernels::PeerAllReduceAlgo::kOneShot;
}

bool PeerCommunicator::all_reduce_in_kernels(size_t bytes) const {
  if (knocked_out_) return true;  // no all-reduce at all
  return peer_ != nullptr && choose_all_reduce(world_size(), bytes, peer_->buffers().capacity_bytes,
                                               true) != AllReducePath::kNccl;
}

void PeerCommunicator::all_reduce_sum(const TensorView& inout, const ExecContext& ctx) {
  if (knocked_out_) return;
  const bool peer_on = peer_ != nullptr && inout.dtype == DType::kBf16 && inout.is_contiguous();
  const AllReducePath path = choose_all_reduce(
      world_size(), inout.nbytes(), peer_ ? peer_->buffers().capacity_bytes : 0, peer_on);
  if (path == AllReducePath::kNccl) return nccl_.all_reduce_sum(inout, ctx);
  kernels::PeerAllReduceAlgo algo = kernels::PeerAllReduceAlgo::kTwoShot;
  if (path == AllReducePath::kOneShot)
    algo = one_shot_algo(inout.nbytes(), kernels::peer_push_fits(inout, peer_->buffers()));
  else if (takes_push_two_shot(world_size(), inout.nbytes(), peer_->buffers().inbox_bytes,
                               push_on_) &&
           kernels::peer_push_fits(inout, peer_->buffers(),
                                   kernels::PeerAllReduceAlgo::kPushTwoShot))
    algo = kernels::PeerAllReduceAlgo::kPushTwoShot;
  kernels::peer_all_reduce_sum(inout, peer_->buffers(), algo, ctx.stream,
                               peer_launch_shape(world_size()));
}

void PeerCommunicator::all_reduce_add_rms_norm(const TensorView& x, const TensorView& residual,
                                               const TensorView& weight, float eps,
                                               const ExecContext& ctx) {
  // Knocked out: the base's sum (skipped above), then the add and the norm.
  if (knocked_out_) return Communicator::all_reduce_add_rms_norm(x, residual, weight, eps, ctx);
  const bool rows_ok = peer_ != nullptr && x.dtype == DType::kBf16 && x.ndim == 2 &&
                       x.stride[1] == 1 && x.size(1) % 8 == 0 && x.stride[0] % 8 == 0 &&
                       residual.stride[0] % 8 == 0 &&
                       reinterpret_cast<uintptr_t>(x.data) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(residual.data) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(weight.data) % 16 == 0;
  const size_t bytes = static_cast<size_t>(x.numel()) * 2;
  if (rows_ok && choose_all_reduce(world_size(), bytes, peer_->buffers().capacity_bytes, true) ==
                     AllReducePath::kOneShot) {
    const kernels::PeerAllReduceAlgo algo = one_shot_algo(bytes, true);
    if (algo == kernels::PeerAllReduceAlgo::kOneShot || push_fuses_norm(bytes)) {
      kernels::peer_all_reduce_add_rms_norm(x, residual, weight, eps, peer_->buffers(), ctx.stream,
                                            algo);
      return;
    }
  }
  Communicator::all_reduce_add_rms_norm(x, residual, weight, eps, ctx);
}

void PeerCommunicator::copy_engine_add_rms_norm(const TensorView& x, const TensorView& residual,
                                                const TensorView& weight, float eps,
                                                const ExecContext& ctx) {
  if (knocked_out_ || !takes_copy_engine(x, ctx.stream))
    return all_reduce_add_rms_norm(x, residual, weight, eps, ctx);
  kernels::copy_engine_add_rms_norm(x, residual, weight, eps, peer_->copy_engine(),
                                    ++copy_engine_calls_, ctx.stream);
}

}  // namespace nanovllm
