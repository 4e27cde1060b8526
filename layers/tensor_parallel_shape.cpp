#include "layers/tensor_parallel_shape.h"

#include <sstream>
#include <stdexcept>

namespace nanovllm {

void check_tensor_parallel_shape(const ModelConfig& c, int tp) {
  std::ostringstream why;
  const int64_t q = c.num_attention_heads, kv = c.num_key_value_heads;
  if (tp < 1) {
    why << "the tensor-parallel size must be at least 1";
  } else if (q % tp != 0) {
    why << q << " attention (q) heads do not split evenly over " << tp << " ranks";
  } else if (kv < 1 || q % kv != 0) {
    why << q << " q heads do not group evenly over " << kv << " kv heads";
  } else if (kv >= tp && kv % tp != 0) {
    why << kv << " kv heads do not split evenly over " << tp << " ranks";
  } else if (kv < tp && tp % kv != 0) {
    why << tp << " ranks are not a multiple of the " << kv
        << " kv heads (each kv head would need a whole number of replicas)";
  } else if (c.intermediate_size % tp != 0) {
    why << "intermediate_size " << c.intermediate_size << " does not split evenly over " << tp
        << " ranks";
  } else if (c.vocab_size < tp) {
    why << "vocab_size " << c.vocab_size << " gives some of the " << tp << " ranks no row";
  } else {
    return;
  }
  throw std::invalid_argument("--tp " + std::to_string(tp) + " does not fit the model (" +
                              std::to_string(q) + " q heads, " + std::to_string(kv) +
                              " kv heads, intermediate_size " +
                              std::to_string(c.intermediate_size) + "): " + why.str());
}

}  // namespace nanovllm
