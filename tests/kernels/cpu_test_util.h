// Helpers for the CPU kernel tests: host tensors (tests/kernels/host_tensors.h) and the error
// measure their comparisons use.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/tensor.h"
#include "tests/kernels/host_tensors.h"

namespace nanovllm::test {

inline double bf(uint16_t x) {
  return static_cast<double>(bf16_to_float(x));
}

// |got - want| <= atol + rtol * |want|, with bf16-sized defaults.
inline bool close(double got, double want, double atol = 1e-2, double rtol = 1e-2) {
  return std::abs(got - want) <= atol + rtol * std::abs(want);
}

}  // namespace nanovllm::test
