#pragma once

#include "kernels/exec_context.h"
#include "kernels/tensor.h"

namespace nanovllm::kernels {

// out:    [T, H] bf16
// ids:    [T] i32, full-vocabulary ids
// weight: [V_shard, H] bf16, rows [vocab_start, vocab_start + V_shard) of the full table.
// Ids outside this rank's shard produce zero rows (the all-reduce adds the owner's row).
namespace cpu {
void embedding(const TensorView& out, const TensorView& ids, const TensorView& weight,
               int64_t vocab_start);
}
namespace cuda {
void embedding(const TensorView& out, const TensorView& ids, const TensorView& weight,
               int64_t vocab_start, cudaStream_t stream);
}

inline void embedding(const TensorView& out, const TensorView& ids, const TensorView& weight,
                      int64_t vocab_start, const ExecContext& ctx) {
  if (out.on_cpu())
    cpu::embedding(out, ids, weight, vocab_start);
  else
    cuda::embedding(out, ids, weight, vocab_start, ctx.stream);
}

}  // namespace nanovllm::kernels
