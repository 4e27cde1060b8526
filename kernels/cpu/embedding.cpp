#include "kernels/embedding.h"

#include <cstring>

#include "kernels/cpu/cpu_util.h"

namespace nanovllm::kernels::cpu {

void embedding(const TensorView& out, const TensorView& ids, const TensorView& weight,
               int64_t vocab_start) {
  CHECK(out.dtype == DType::kBf16 && weight.dtype == DType::kBf16 && ids.dtype == DType::kI32);
  CHECK_EQ(out.size(0), ids.size(0));
  CHECK_EQ(out.size(1), weight.size(1));
  CHECK(out.stride[1] == 1 && weight.stride[1] == 1);
  const int64_t hidden = out.size(1);
  const int64_t shard_rows = weight.size(0);
  for (int64_t t = 0; t < ids.size(0); ++t) {
    const int64_t local = int64_t{*elem<int32_t>(ids, t)} - vocab_start;
    uint16_t* dst = elem<uint16_t>(out, t);
    if (local >= 0 && local < shard_rows) {
      std::memcpy(dst, elem<uint16_t>(weight, local), hidden * sizeof(uint16_t));
    } else {
      std::memset(dst, 0, hidden * sizeof(uint16_t));  // bf16 +0.0 is all-zero bits
    }
  }
}

}  // namespace nanovllm::kernels::cpu
