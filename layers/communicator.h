// Collective operations between the tensor-parallel ranks. Single-rank: no-ops. CPU backend
// across processes: shared memory (ipc/). CUDA: NCCL. Layers see only this interface.
#pragma once

#include "kernels/exec_context.h"
#include "kernels/tensor.h"

namespace nanovllm {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // inout: any contiguous bf16/f32 tensor, summed element-wise over all ranks, in place.
  virtual void all_reduce_sum(const TensorView& inout, const ExecContext& ctx) = 0;
  // send: [rows, cols] contiguous on every rank; recv (root only, else ignored):
  //   [world_size, rows, cols], rank r's part at index r.
  virtual void gather_to_root(const TensorView& send, const TensorView& recv,
                              const ExecContext& ctx) = 0;
};

class SingleRankCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void all_reduce_sum(const TensorView&, const ExecContext&) override {}
  void gather_to_root(const TensorView& send, const TensorView& recv,
                      const ExecContext& ctx) override;
};

}  // namespace nanovllm
