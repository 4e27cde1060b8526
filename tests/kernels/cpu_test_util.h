// Helpers for the CPU kernel tests: random bf16 tensors held in std::vector, and views on them.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/tensor.h"

namespace nanovllm::test {

// bf16 values drawn uniformly from [lo, hi), stored as their bit patterns.
inline std::vector<uint16_t> random_bf16(size_t n, std::mt19937& rng, float lo = -1.0f,
                                         float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<uint16_t> out(n);
  for (auto& x : out) x = float_to_bf16(dist(rng));
  return out;
}

inline double bf(uint16_t x) {
  return static_cast<double>(bf16_to_float(x));
}

inline TensorView view(std::vector<uint16_t>& v, std::initializer_list<int64_t> dims) {
  return TensorView(v.data(), DType::kBf16, dims);
}
inline TensorView view(std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
  return TensorView(v.data(), DType::kI32, dims);
}
inline TensorView view(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  return TensorView(v.data(), DType::kF32, dims);
}
inline TensorView view(std::vector<int64_t>& v, std::initializer_list<int64_t> dims) {
  return TensorView(v.data(), DType::kI64, dims);
}

// |got - want| <= atol + rtol * |want|, with bf16-sized defaults.
inline bool close(double got, double want, double atol = 1e-2, double rtol = 1e-2) {
  return std::abs(got - want) <= atol + rtol * std::abs(want);
}

}  // namespace nanovllm::test
