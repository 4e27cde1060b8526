#include "kernels/kv_cache.h"

#include <cstring>

#include "kernels/cpu/cpu_util.h"

namespace nanovllm::kernels::cpu {

void store_kvcache(const TensorView& k, const TensorView& v, const TensorView& k_cache,
                   const TensorView& v_cache, const TensorView& slot_mapping) {
  CHECK(k.ndim == 3 && v.ndim == 3 && k_cache.ndim == 4 && v_cache.ndim == 4);
  CHECK(k.stride[2] == 1 && v.stride[2] == 1 && k.stride[1] == k.size(2) &&
        v.stride[1] == v.size(2));
  CHECK(k_cache.is_contiguous() && v_cache.is_contiguous());
  const int64_t tokens = k.size(0);
  CHECK_EQ(slot_mapping.size(0), tokens);
  const int64_t block_size = k_cache.size(1);
  const int64_t num_slots = k_cache.size(0) * block_size;
  const size_t row_bytes = static_cast<size_t>(k.size(1) * k.size(2)) * sizeof(uint16_t);
  CHECK_EQ(static_cast<int64_t>(row_bytes), k_cache.stride[1] * 2);
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t slot = *elem<int32_t>(slot_mapping, t);
    if (slot < 0) continue;
    CHECK_LT(slot, num_slots);
    const int64_t block = slot / block_size, offset = slot % block_size;
    std::memcpy(elem<uint16_t>(k_cache, block, offset), elem<uint16_t>(k, t), row_bytes);
    std::memcpy(elem<uint16_t>(v_cache, block, offset), elem<uint16_t>(v, t), row_bytes);
  }
}

}  // namespace nanovllm::kernels::cpu
