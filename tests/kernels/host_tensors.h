// Host tensors for the kernel tests, CPU and CUDA alike: random bf16 values held in std::vector,
// and TensorViews on such vectors.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <thread>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/tensor.h"

namespace nanovllm::test {

// Workers for the CPU reference kernels a test compares against (their output does not depend
// on the count): every core, so that long references do not hold a GPU machine idle.
inline int reference_threads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// bf16 values drawn uniformly from [lo, hi), stored as their bit patterns.
inline std::vector<uint16_t> random_bf16(size_t n, std::mt19937& rng, float lo = -1.0f,
                                         float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<uint16_t> out(n);
  for (auto& x : out) x = float_to_bf16(dist(rng));
  return out;
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

}  // namespace nanovllm::test
