// The 8-bit KV caches on the device (the formats are kernels/fp8.h's and kernels/int8_kv.h's):
// encoding a row with its exponent or scale code, decoding cached bytes, the row's scale, and
// where a row's exponent lives. The encoders and the scale rules give the host's bytes exactly
// (rotary_cuda_test pins it).
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mma_ops.cuh"
#include "kernels/int8_kv.h"

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

// The kernels' FP8 template argument names the cache's element: 0 bf16, kCacheE4m3 (fp8) or
// kCacheInt8. Everything but the conversion of a row's bytes and its scale treats the two 8-bit
// caches alike: the same bytes, layout and one i8 beside each row.
inline constexpr int kCacheE4m3 = 1, kCacheInt8 = 2;

// That argument for a cache of element t (host side).
inline int kv_cache_format(DType t) {
  return t == DType::kFp8E4M3 ? kCacheE4m3 : t == DType::kI8 ? kCacheInt8 : 0;
}

// Calls f.template operator()<F>() with F = format (0, kCacheE4m3 or kCacheInt8): each
// launcher's one switch from the cache's element to its kernels.
template <class Fn>
void dispatch_kv_cache(int format, Fn&& f) {
  if (format == kCacheInt8)
    f.template operator()<kCacheInt8>();
  else if (format == kCacheE4m3)
    f.template operator()<kCacheE4m3>();
  else
    f.template operator()<0>();
}

// 8 cached bytes to f32, unscaled, in either 8-bit format.
template <int F>
__device__ __forceinline__ void kv8x8_to_f32(uint2 raw, float* out) {
  if constexpr (F == kCacheInt8) {
    const uint32_t w[2] = {raw.x, raw.y};
#pragma unroll
    for (int i = 0; i < 8; ++i)
      out[i] = static_cast<float>(
          int8_kv_level(static_cast<uint8_t>((w[i / 4] >> (8 * (i % 4))) & 0xffu)));
  } else {
    fp8x8_to_f32(raw, out);
  }
}

// What the f16 values of kv8x4_to_f16x2_biased carry on top of the cached value: int8's
// bytes (q + 128) permuted under 0x64 are the f16 1024 + q + 128, exact; E4M3's carry nothing.
template <int F>
inline constexpr float kKv16Bias = F == kCacheInt8 ? 1024.f + kInt8KvBias : 0.f;

// Four cached bytes (a word, the low byte first) as two f16x2 (exact), each value plus
// kKv16Bias<F>: lo holds bytes 0 and 1, hi bytes 2 and 3. The K side of the decode MMAs takes
// int8 this way, two permutes for four bytes as E4M3 takes two conversions, and each score
// takes the bias off once: 1152 times the sum of its query's f16 values (the MMAs' products
// are exact, their sums in f32).
template <int F>
__device__ __forceinline__ void kv8x4_to_f16x2_biased(uint32_t word, uint32_t& lo, uint32_t& hi) {
  if constexpr (F == kCacheInt8) {
    lo = __byte_perm(word, 0x64646464u, 0x4140);
    hi = __byte_perm(word, 0x64646464u, 0x4342);
  } else {
    e4m3x4_to_f16x2(word, lo, hi);
  }
}

// The same four bytes without the bias: the V side. Its sums would carry 1152 times the
// weights' sum, far above the weighted values when the weights spread over many tokens, and
// the f32 accumulators lose the difference: taken off once at the end (as K's is), the output
// of one 16k-token piece at G 2 drifted 4.8 % (rel L2) from the CPU's, against 1 % allowed.
template <int F>
__device__ __forceinline__ void kv8x4_to_f16x2(uint32_t word, uint32_t& lo, uint32_t& hi) {
  kv8x4_to_f16x2_biased<F>(word, lo, hi);
  if constexpr (F == kCacheInt8) {
    const __half2 bias = __half2half2(__ushort_as_half(0x6480));  // kKv16Bias: 1152
    const __half2 lv = __hsub2(*reinterpret_cast<const __half2*>(&lo), bias);
    const __half2 hv = __hsub2(*reinterpret_cast<const __half2*>(&hi), bias);
    lo = *reinterpret_cast<const uint32_t*>(&lv);
    hi = *reinterpret_cast<const uint32_t*>(&hv);
  }
}

// 1152 times the sum of the f16 pairs in words[0 .. n) (a lane's query fragments), in f32:
// the part of int8 scores that kKv16Bias put there.
template <int N>
__device__ __forceinline__ float f16x2_sum_times_bias(const uint32_t (&words)[N]) {
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&words[i]));
    sum += f.x + f.y;
  }
  return kKv16Bias<kCacheInt8> * sum;
}

// A row's scale from its i8: fp8 2^e; int8 2^(c / 4), from kernels/int8_kv.h's constants so
// the host gets the same float.
template <int F>
__device__ __forceinline__ float kv_row_scale(int code) {
  if constexpr (F == kCacheInt8) {
    const int k = code & 3;
    const float frac = k == 0   ? 1.f
                       : k == 1 ? kQuarterBinade1
                       : k == 2 ? kQuarterBinade2
                                : kQuarterBinade3;
    return frac * pow2i(code >> 2);
  } else {
    return pow2i(code);
  }
}

// Its log2 (a V row's scale joins its softmax weight's exponent).
template <int F>
__device__ __forceinline__ float kv_row_log2_scale(int code) {
  return F == kCacheInt8 ? 0.25f * static_cast<float>(code) : static_cast<float>(code);
}

// A row's scale for the decode kernels' scores and weights: kv_row_scale, but int8's on the
// special-function unit (ex2.approx, ~2 ulp, which no score needs): three instructions for the
// selects of kv_row_scale, in loops that issue about as fast as the SM allows. The store and the
// staging, which must give the host's values bit for bit, keep kv_row_scale.
template <int F>
__device__ __forceinline__ float kv_row_decode_scale(int code) {
  if constexpr (F == kCacheInt8)
    return fast_exp2(kv_row_log2_scale<F>(code));
  else
    return kv_row_scale<F>(code);
}

// kernels/int8_kv.h's int8_kv_scale_code, from frexpf the same way.
__device__ __forceinline__ int int8_kv_scale_code_dev(float max_abs) {
  if (!(max_abs > 0.f)) return 0;
  if (isinf(max_abs)) return 127;
  int e = 0;
  const float m = 2.f * frexpf(max_abs / kInt8KvMax, &e);
  --e;
  const int k = m <= 1.f               ? 0
                : m <= kQuarterBinade1 ? 1
                : m <= kQuarterBinade2 ? 2
                : m <= kQuarterBinade3 ? 3
                                       : 4;
  return min(max(4 * e + k, -128), 127);
}

// kernels/int8_kv.h's int8_kv_byte of int8_kv_from_float: x / s to nearest even, saturated
// (a NaN stores level 0), plus 128.
__device__ __forceinline__ uint8_t int8_kv_encode(float x, float s) {
  if (isnan(x)) return int8_kv_byte(0);
  return int8_kv_byte(
      static_cast<int8_t>(__float2int_rn(fminf(fmaxf(x / s, -kInt8KvMax), kInt8KvMax))));
}

// Index of the exponent of (slot, kv head hk) in one layer's [num_blocks, Hkv, block_size]
// exponents (kernels/attention.h says why head-major).
__device__ __forceinline__ int64_t fp8_exponent_index(int64_t slot, int hk, int hkv,
                                                      int block_size) {
  return (slot / block_size * hkv + hk) * block_size + slot % block_size;
}

}  // namespace nanovllm::kernels::cuda
