// Collective operations between the tensor-parallel ranks. Single-rank: no-ops. CPU backend
// across processes: shared memory (ipc/). CUDA: NCCL (rank/nccl_communicator.h). Layers see
// only this interface. All ranks must call the same collectives in the same order with the
// same shapes.
#pragma once

#include <cstddef>
#include <cstdint>

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
  // The row-parallel output's sum, the residual add and the next RMSNorm: residual =
  // bf16(all-reduced x + residual); x = rms_norm(residual) * weight (kernels/rms_norm.h's
  // fused_add_rms_norm on the summed x). x, residual: [T, H] bf16; weight: [H]. Default: the two
  // steps; a backend may do them in one kernel (rank/peer_communicator.h).
  virtual void all_reduce_add_rms_norm(const TensorView& x, const TensorView& residual,
                                       const TensorView& weight, float eps, const ExecContext& ctx);
  // all_reduce_add_rms_norm with the sum's bytes moved by the copy engines instead of SMs
  // (kernels/copy_engine_all_reduce.h), so that it can run under compute on a second stream
  // (layers/prefill_overlap.h), for x of at most copy_engine_sum_bytes(); 0 where this backend
  // has no such path. Default: 0, and all_reduce_add_rms_norm.
  virtual size_t copy_engine_sum_bytes() const { return 0; }
  virtual void copy_engine_add_rms_norm(const TensorView& x, const TensorView& residual,
                                        const TensorView& weight, float eps,
                                        const ExecContext& ctx) {
    all_reduce_add_rms_norm(x, residual, weight, eps, ctx);
  }
  // The smallest `value` over all ranks, returned on every rank (exact for any int64, unlike
  // a float reduction). Host in, host out: it waits for the collective, so it is a start-up
  // agreement (e.g. the KV-cache block count), never part of a captured CUDA graph.
  virtual int64_t all_reduce_min(int64_t value, const ExecContext& ctx) = 0;
  // Whether a bf16 all-reduce of `bytes` (and of every smaller size) runs as this backend's own
  // kernel rather than an NCCL call, so that a captured graph holds no NCCL node for it (the
  // graphs' memory estimate, rank/cuda_graph_runner.h). Default: no.
  virtual bool all_reduce_in_kernels(size_t /*bytes*/) const { return false; }
  // The stop path: a rank that gives up calls abort() so that its pending and later
  // collectives end with an error instead of waiting for peers that will never come (and,
  // where the backend can, so that its peers' do too). Idempotent. Default: nothing to abort.
  virtual void abort() {}
  // Waits for the work queued on `stream` (a CUDA stream; the host path never calls it). The
  // NCCL backend polls under its watchdog, so a dead peer ends the wait with an error instead
  // of a hang; the default is cudaStreamSynchronize.
  virtual void synchronize(cudaStream_t stream);
};

class SingleRankCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void all_reduce_sum(const TensorView&, const ExecContext&) override {}
  void gather_to_root(const TensorView& send, const TensorView& recv,
                      const ExecContext& ctx) override;
  int64_t all_reduce_min(int64_t value, const ExecContext&) override { return value; }
};

}  // namespace nanovllm
