#include "kernels/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_util.h"
#include "kernels/fp8.h"
#include "kernels/int8_kv.h"

namespace nanovllm::kernels::cpu {

void store_kvcache(const TensorView& k, const TensorView& v, const TensorView& k_cache,
                   const TensorView& v_cache, const TensorView& slot_mapping,
                   const TensorView& k_scale, const TensorView& v_scale) {
  CHECK(k.ndim == 3 && v.ndim == 3 && k_cache.ndim == 4 && v_cache.ndim == 4);
  CHECK(k.stride[2] == 1 && v.stride[2] == 1 && k.stride[1] == k.size(2) &&
        v.stride[1] == v.size(2));
  CHECK(k_cache.is_contiguous() && v_cache.is_contiguous());
  const int64_t tokens = k.size(0);
  CHECK_EQ(slot_mapping.size(0), tokens);
  const int64_t block_size = k_cache.size(1);
  const int64_t num_slots = k_cache.size(0) * block_size;
  const int64_t row = k.size(1) * k.size(2);  // elements of one token's heads
  CHECK_EQ(row, k_cache.stride[1]);
  CHECK(k_cache.dtype == v_cache.dtype);
  const bool fp8 = k_cache.dtype == DType::kFp8E4M3, int8 = k_cache.dtype == DType::kI8;
  CHECK(fp8 || int8 || k_cache.dtype == DType::kBf16);
  if (fp8 || int8) {
    CHECK(k_scale.dtype == DType::kI8 && v_scale.dtype == DType::kI8 && k_scale.ndim == 3 &&
          v_scale.ndim == 3);
    CHECK(k_scale.is_contiguous() && v_scale.is_contiguous());
    CHECK_EQ(k_scale.numel() * k.size(2), k_cache.numel());
    CHECK_EQ(k_scale.size(1), k.size(1));  // [num_blocks, Hkv, block_size]
    CHECK_EQ(k_scale.size(2), block_size);
  }
  const int64_t heads = k.size(1), d = k.size(2);
  const auto store_row = [&](const TensorView& cache, const TensorView& scale,
                             const TensorView& src, int64_t t, int64_t block, int64_t offset) {
    const uint16_t* from = elem<uint16_t>(src, t);
    if (!fp8 && !int8) {
      std::memcpy(elem<uint16_t>(cache, block, offset), from, static_cast<size_t>(row) * 2);
      return;
    }
    uint8_t* to = elem<uint8_t>(cache, block, offset);
    for (int64_t h = 0; h < heads; ++h) {  // one exponent (fp8) or scale code (int8) a row
      float max_abs = 0.0f;
      for (int64_t i = 0; i < d; ++i)
        max_abs = std::max(max_abs, std::fabs(bf16_to_float(from[h * d + i])));
      if (int8) {
        const int8_t code = int8_kv_scale_code(max_abs);
        *elem<int8_t>(scale, block, h, offset) = code;
        const float s = int8_kv_scale(code);
        for (int64_t i = 0; i < d; ++i)
          to[h * d + i] = int8_kv_byte(int8_kv_from_float(bf16_to_float(from[h * d + i]), s));
        continue;
      }
      const int8_t e = fp8_row_exponent(max_abs);
      *elem<int8_t>(scale, block, h, offset) = e;
      for (int64_t i = 0; i < d; ++i)
        to[h * d + i] = fp8_e4m3_from_float(std::ldexp(bf16_to_float(from[h * d + i]), -e));
    }
  };
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t slot = *elem<int32_t>(slot_mapping, t);
    if (slot < 0) continue;
    CHECK_LT(slot, num_slots);
    const int64_t block = slot / block_size, offset = slot % block_size;
    store_row(k_cache, k_scale, k, t, block, offset);
    store_row(v_cache, v_scale, v, t, block, offset);
  }
}

}  // namespace nanovllm::kernels::cpu
