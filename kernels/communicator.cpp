#include "kernels/communicator.h"

#include <cuda_runtime_api.h>

#include <cstring>

#include "kernels/rms_norm.h"

namespace nanovllm {

void Communicator::all_reduce_add_rms_norm(const TensorView& x, const TensorView& residual,
                                           const TensorView& weight, float eps,
                                           const ExecContext& ctx) {
  all_reduce_sum(x, ctx);
  kernels::fused_add_rms_norm(x, residual, weight, eps, ctx);
}

void Communicator::synchronize(cudaStream_t stream) {
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

void SingleRankCommunicator::gather_to_root(const TensorView& send, const TensorView& recv,
                                            const ExecContext& ctx) {
  CHECK(send.is_contiguous());
  CHECK_GE(recv.nbytes(), send.nbytes());
  if (send.on_cpu() && recv.on_cpu()) {
    std::memcpy(recv.data, send.data, send.nbytes());
  } else {
    CUDA_CHECK(cudaMemcpyAsync(recv.data, send.data, send.nbytes(), cudaMemcpyDefault, ctx.stream));
  }
}

}  // namespace nanovllm
