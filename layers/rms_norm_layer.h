// RMSNorm with its checkpoint weight [H] (replicated on every rank).
#pragma once

#include <string>

#include "layers/linear.h"

namespace nanovllm {

class RMSNorm {
 public:
  RMSNorm(const Checkpoint& ckpt, const std::string& name, float eps, Device device);
  // out = norm(x) * w. out, x: [T, H] bf16.
  void forward(const TensorView& out, const TensorView& x, const ExecContext& ctx) const;
  // residual = x + residual; x = norm(residual) * w (in place).
  void forward_add(const TensorView& x, const TensorView& residual, const ExecContext& ctx) const;
  // The same on x = a row-parallel output not yet summed: comm sums it first (or in the same
  // kernel: Communicator::all_reduce_add_rms_norm).
  void forward_add_reduced(const TensorView& x, const TensorView& residual, Communicator& comm,
                           const ExecContext& ctx) const;
  // forward_add_reduced with the sum's bytes moved by the copy engines where comm has them
  // (Communicator::copy_engine_add_rms_norm; layers/prefill_overlap.h).
  void forward_add_reduced_by_copy_engines(const TensorView& x, const TensorView& residual,
                                           Communicator& comm, const ExecContext& ctx) const;
  const TensorView& weight() const { return weight_.view(); }  // [H] bf16
  float eps() const { return eps_; }

 private:
  Parameter weight_;
  float eps_;
};

}  // namespace nanovllm
