// The fp8 KV cache on the device (the format is kernels/fp8.h's): encoding a row with its
// power-of-two exponent, decoding 8 cached bytes to f32, and where a row's exponent lives.
// The encoder and the exponent rule give the host's bytes exactly (rotary_cuda_test pins it).
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace nanovllm::kernels::cuda {

// 2^e as a float, for e in [-126, 126] (the row exponent's range): built from the bits.
__device__ __forceinline__ float pow2i(int e) {
  return __int_as_float((e + 127) << 23);
}

// kernels/fp8.h's fp8_row_exponent, from frexpf the same way.
__device__ __forceinline__ int fp8_row_exponent_dev(float max_abs) {
  if (!(max_abs > 0.f) || isinf(max_abs)) return 0;
  int x = 0;
  const float m = frexpf(max_abs, &x);
  const int e = m <= 0.875f ? x - 9 : x - 8;
  return min(max(e, -126), 126);
}

// x (already divided by its row's 2^e) as OCP E4M3: round to nearest even, saturate to
// +-448 (as fp8_e4m3_from_float does).
__device__ __forceinline__ uint8_t fp8_encode(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

// 8 cached bytes (little-endian in a uint2) to f32, unscaled: fp8 -> f16 is exact (every E4M3
// value is a normal f16), two at a time on the conversion unit.
__device__ __forceinline__ void fp8x8_to_f32(uint2 raw, float* out) {
  const uint32_t w[2] = {raw.x, raw.y};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const auto pair = static_cast<__nv_fp8x2_storage_t>((w[i] >> (16 * h)) & 0xffffu);
      const __half2 v(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3));
      const float2 f = __half22float2(v);
      out[4 * i + 2 * h] = f.x;
      out[4 * i + 2 * h + 1] = f.y;
    }
  }
}

// Index of the exponent of (slot, kv head hk) in one layer's [num_blocks, Hkv, block_size]
// exponents (kernels/attention.h says why head-major).
__device__ __forceinline__ int64_t fp8_exponent_index(int64_t slot, int hk, int hkv,
                                                      int block_size) {
  return (slot / block_size * hkv + hk) * block_size + slot % block_size;
}

}  // namespace nanovllm::kernels::cuda
