#include "kernels/activation.h"

#include <cmath>

#include "kernels/cpu/cpu_util.h"

namespace nanovllm::kernels::cpu {

void silu_and_mul(const TensorView& out, const TensorView& x) {
  CHECK(out.dtype == DType::kBf16 && x.dtype == DType::kBf16);
  CHECK_EQ(out.size(0), x.size(0));
  CHECK_EQ(x.size(1), 2 * out.size(1));
  CHECK(out.stride[1] == 1 && x.stride[1] == 1);
  const int64_t inter = out.size(1);
  for (int64_t t = 0; t < x.size(0); ++t) {
    const uint16_t* gate = elem<uint16_t>(x, t);
    const uint16_t* up = gate + inter;
    uint16_t* dst = elem<uint16_t>(out, t);
    for (int64_t i = 0; i < inter; ++i) {
      const float g = bf16_to_float(gate[i]);
      dst[i] = float_to_bf16(g / (1.0f + std::exp(-g)) * bf16_to_float(up[i]));
    }
  }
}

}  // namespace nanovllm::kernels::cpu
