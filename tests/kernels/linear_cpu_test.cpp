#include <gtest/gtest.h>

#include "kernels/linear.h"
#include "tests/kernels/cpu_test_util.h"

namespace nanovllm {
namespace {

using test::bf;

// y[m][n] = sum_k x[m][k] * w[n][k] + bias[n], in double.
std::vector<double> reference(const std::vector<uint16_t>& x, int64_t x_stride,
                              const std::vector<uint16_t>& w, const std::vector<uint16_t>& bias,
                              int64_t m, int64_t n, int64_t k) {
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c) {
      double acc = bias.empty() ? 0.0 : bf(bias[c]);
      for (int64_t i = 0; i < k; ++i) acc += bf(x[r * x_stride + i]) * bf(w[c * k + i]);
      y[r * n + c] = acc;
    }
  return y;
}

struct Shape {
  int64_t m, n, k;
};

TEST(LinearCpu, MatchesDoubleReferenceOverOddShapesWithF32Output) {
  std::mt19937 rng(1);
  for (const Shape s : {Shape{1, 1, 1}, Shape{1, 37, 1002}, Shape{3, 65, 17}, Shape{7, 130, 64},
                        Shape{16, 9, 256}, Shape{33, 257, 129}}) {
    auto x = test::random_bf16(s.m * s.k, rng);
    auto w = test::random_bf16(s.n * s.k, rng);
    std::vector<float> y(s.m * s.n);
    kernels::cpu::linear(test::view(y, {s.m, s.n}), test::view(x, {s.m, s.k}),
                         test::view(w, {s.n, s.k}), TensorView(), 3);
    const auto want = reference(x, s.k, w, {}, s.m, s.n, s.k);
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(y[i], want[i], 1e-5 * (1.0 + std::sqrt(double(s.k))))
          << "m=" << s.m << " n=" << s.n << " k=" << s.k << " at " << i;
  }
}

TEST(LinearCpu, AddsBiasAndRoundsToBf16Output) {
  std::mt19937 rng(2);
  const int64_t m = 5, n = 23, k = 40;
  auto x = test::random_bf16(m * k, rng);
  auto w = test::random_bf16(n * k, rng);
  auto bias = test::random_bf16(n, rng, -4.0f, 4.0f);
  std::vector<uint16_t> y(m * n);
  kernels::cpu::linear(test::view(y, {m, n}), test::view(x, {m, k}), test::view(w, {n, k}),
                       test::view(bias, {n}), 2);
  const auto want = reference(x, k, w, bias, m, n, k);
  for (size_t i = 0; i < y.size(); ++i)
    EXPECT_TRUE(test::close(bf(y[i]), want[i], 1e-3, 8e-3))
        << i << ": " << bf(y[i]) << " vs " << want[i];
}

TEST(LinearCpu, ReadsRowsOfAStridedInput) {
  std::mt19937 rng(3);
  const int64_t m = 4, n = 11, k = 24, row_stride = 40;  // x is the left part of [4, 40]
  auto x = test::random_bf16(m * row_stride, rng);
  auto w = test::random_bf16(n * k, rng);
  TensorView xv = test::view(x, {m, row_stride});
  xv.shape[1] = k;
  std::vector<float> y(m * n);
  kernels::cpu::linear(test::view(y, {m, n}), xv, test::view(w, {n, k}), TensorView(), 1);
  const auto want = reference(x, row_stride, w, {}, m, n, k);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-4);
}

TEST(LinearCpu, ResultIsBitIdenticalForAnyThreadCount) {
  std::mt19937 rng(4);
  const int64_t m = 3, n = 101, k = 77;
  auto x = test::random_bf16(m * k, rng);
  auto w = test::random_bf16(n * k, rng);
  std::vector<float> y1(m * n), y4(m * n);
  kernels::cpu::linear(test::view(y1, {m, n}), test::view(x, {m, k}), test::view(w, {n, k}),
                       TensorView(), 1);
  kernels::cpu::linear(test::view(y4, {m, n}), test::view(x, {m, k}), test::view(w, {n, k}),
                       TensorView(), 4);
  EXPECT_EQ(y1, y4);
}

}  // namespace
}  // namespace nanovllm
