#include "layers/rms_norm_layer.h"

#include "kernels/phase_timer.h"
#include "kernels/rms_norm.h"

namespace nanovllm {

RMSNorm::RMSNorm(const Checkpoint& ckpt, const std::string& name, float eps, Device device)
    : weight_(Parameter::load_full(checkpoint_tensor(ckpt, name, 1), device)), eps_(eps) {}

void RMSNorm::forward(const TensorView& out, const TensorView& x, const ExecContext& ctx) const {
  const PhaseScope phase(ctx, Phase::kElementwise);
  kernels::rms_norm(out, x, weight(), eps_, ctx);
}

void RMSNorm::forward_add(const TensorView& x, const TensorView& residual,
                          const ExecContext& ctx) const {
  const PhaseScope phase(ctx, Phase::kElementwise);
  kernels::fused_add_rms_norm(x, residual, weight(), eps_, ctx);
}

void RMSNorm::forward_add_reduced(const TensorView& x, const TensorView& residual,
                                  Communicator& comm, const ExecContext& ctx) const {
  // The all-reduce's phase: the norm rides in the same kernel where the backend fuses them.
  const PhaseScope phase(ctx, Phase::kAllReduce);
  comm.all_reduce_add_rms_norm(x, residual, weight(), eps_, ctx);
}

void RMSNorm::forward_add_reduced_by_copy_engines(const TensorView& x, const TensorView& residual,
                                                  Communicator& comm,
                                                  const ExecContext& ctx) const {
  const PhaseScope phase(ctx, Phase::kAllReduce);
  comm.copy_engine_add_rms_norm(x, residual, weight(), eps_, ctx);
}

}  // namespace nanovllm
