// Which tensor-parallel sizes a model can be split over, checked once before any rank loads a
// weight (the layers' own CHECKs would fire later, one rank at a time, as bugs). The rules
// follow how the layers shard (layers/linear.h, layers/vocab_embedding.h):
//   - q heads split evenly (QKVParallelLinear; o_proj's input columns follow them);
//   - intermediate_size splits evenly (gate_up_proj rows, down_proj columns);
//   - kv heads split evenly, or, with fewer kv heads than ranks, tp is a multiple of them and
//     each rank holds a replica of the one kv head its q heads read (as vLLM does);
//   - the vocabulary needs no divisibility: each rank holds ceil(V / tp) rows, the last one
//     zero-padded; it only needs a row per rank (tp <= V).
#pragma once

#include "layers/model_config.h"

namespace nanovllm {

// Throws std::invalid_argument naming the model's numbers and tp when the model cannot be
// split over `tp` ranks (tp < 1 included).
void check_tensor_parallel_shape(const ModelConfig& config, int tp);

}  // namespace nanovllm
