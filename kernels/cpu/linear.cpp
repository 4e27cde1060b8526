#include "kernels/linear.h"

#include <vector>

#include "kernels/cpu/cpu_util.h"

namespace nanovllm::kernels::cpu {

namespace {

constexpr int64_t kRowBlock = 8;  // rows of w converted to f32 at a time (stays in L1/L2)
constexpr int kLanes = 8;         // independent partial sums, so the compiler can vectorize

void to_f32(float* dst, const uint16_t* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
}

// Fixed summation order (lane sums, then lanes in order, then the tail): the same result
// for any thread count and any M.
float dot(const float* a, const float* b, int64_t k) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= k; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lanes[j] += a[i + j] * b[i + j];
  float sum = 0.0f;
  for (int j = 0; j < kLanes; ++j) sum += lanes[j];
  for (; i < k; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

void linear(const TensorView& y, const TensorView& x, const TensorView& w,
            const TensorView& bias, int threads) {
  CHECK(x.dtype == DType::BF16 && w.dtype == DType::BF16);
  CHECK(y.dtype == DType::BF16 || y.dtype == DType::F32);
  CHECK(x.ndim == 2 && w.ndim == 2 && y.ndim == 2);
  CHECK(x.stride[1] == 1 && w.stride[1] == 1 && y.stride[1] == 1);
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  CHECK_EQ(w.size(1), k);
  CHECK_EQ(y.size(0), m);
  CHECK_EQ(y.size(1), n);
  const uint16_t* b = static_cast<const uint16_t*>(bias.data);
  if (b != nullptr) CHECK(bias.dtype == DType::BF16 && bias.size(0) == n);

  std::vector<float> xf(static_cast<size_t>(m * k));  // [M, K] f32
  for (int64_t r = 0; r < m; ++r) to_f32(xf.data() + r * k, elem<uint16_t>(x, r), k);

  // Split over output columns (rows of w): each thread streams its own part of the weight.
  parallel_for(n, threads, [&](int64_t n_begin, int64_t n_end) {
    std::vector<float> wf(static_cast<size_t>(kRowBlock * k));  // [kRowBlock, K] f32
    for (int64_t n0 = n_begin; n0 < n_end; n0 += kRowBlock) {
      const int64_t rows = std::min(kRowBlock, n_end - n0);
      for (int64_t j = 0; j < rows; ++j) to_f32(wf.data() + j * k, elem<uint16_t>(w, n0 + j), k);
      for (int64_t r = 0; r < m; ++r) {
        const float* xr = xf.data() + r * k;
        for (int64_t j = 0; j < rows; ++j) {
          float acc = dot(xr, wf.data() + j * k, k);
          if (b != nullptr) acc += bf16_to_float(b[n0 + j]);
          if (y.dtype == DType::F32) *elem<float>(y, r, n0 + j) = acc;
          else *elem<uint16_t>(y, r, n0 + j) = float_to_bf16(acc);
        }
      }
    }
  });
}

}  // namespace nanovllm::kernels::cpu
