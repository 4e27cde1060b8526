#include "kernels/communicator.h"

#include <cuda_runtime_api.h>

#include <cstring>

namespace nanovllm {

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
