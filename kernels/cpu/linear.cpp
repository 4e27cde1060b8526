#include "kernels/linear.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_util.h"

namespace nanovllm::kernels::cpu {

namespace {

// Every output element is dot(x row, w row) with one fixed summation order: kLanes
// independent partial sums over k (the vectorizable part), added in lane order, then the
// k % kLanes tail. Tiling, blocking and threading only change which elements are computed
// together, never that order, so y is bit-identical for any thread count and any M.
constexpr int kLanes = 8;
constexpr int kTileM = 2;        // x rows per micro-tile
constexpr int kTileN = 4;        // w rows per micro-tile (2 x 4 x 8 accumulators: 8 ymm)
constexpr int64_t kBlockN = 16;  // w rows converted to f32 at a time: [16, K] stays in L1/L2
constexpr int64_t kMinMacsPerPart = int64_t{1} << 17;  // below this a thread is not worth waking

inline void to_f32(float* __restrict dst, const uint16_t* __restrict src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
}

// kLanes floats as one value: the compiler maps it to whatever vector registers the ISA has
// (2 x SSE, 1 x AVX), with exactly the lane-wise mul and add of the scalar definition.
using Lanes = float __attribute__((vector_size(kLanes * sizeof(float))));

// (Loads go through memcpy, in place: the rows are not 32-byte aligned, and returning a
// vector by value would change the ABI between the clones.)

// out[r * out_stride + c] = dot(x[r], w[c]) for r < R, c < C.
// x: [R, K] f32 (row stride xs); w: [C, K] f32 (row stride k).
template <int R, int C>
[[gnu::always_inline]] inline void micro_tile(float* out, int64_t out_stride, const float* x,
                                              int64_t xs, const float* w, int64_t k) {
  Lanes acc[R][C] = {};
  int64_t i = 0;
  for (; i + kLanes <= k; i += kLanes) {
    Lanes xv[R];
    for (int r = 0; r < R; ++r) std::memcpy(&xv[r], x + r * xs + i, sizeof(Lanes));
    for (int c = 0; c < C; ++c) {
      Lanes wv;
      std::memcpy(&wv, w + c * k + i, sizeof(Lanes));
      for (int r = 0; r < R; ++r) acc[r][c] += xv[r] * wv;
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      float sum = 0.0f;
      for (int j = 0; j < kLanes; ++j) sum += acc[r][c][j];
      for (int64_t t = i; t < k; ++t) sum += x[r * xs + t] * w[c * k + t];
      out[r * out_stride + c] = sum;
    }
}

// out [M, cols] f32 (row stride out_stride) = xf [M, K] @ w [cols, K]^T, cols <= kBlockN;
// w: bf16 rows (row stride w_stride), converted once into wf [kBlockN, K] f32 scratch.
// Compiled for AVX2 and the baseline ISA (picked at load time). Neither clone may use FMA:
// a fused multiply-add rounds once instead of twice, so results would depend on the machine.
[[gnu::target_clones("avx2", "default")]] void block_matmul(float* out, int64_t out_stride,
                                                            const float* xf, int64_t m,
                                                            const uint16_t* w, int64_t w_stride,
                                                            int64_t cols, int64_t k, float* wf) {
  for (int64_t j = 0; j < cols; ++j) to_f32(wf + j * k, w + j * w_stride, k);
  int64_t r = 0;
  for (; r + kTileM <= m; r += kTileM) {
    const float* xr = xf + r * k;
    float* o = out + r * out_stride;
    int64_t c = 0;
    for (; c + kTileN <= cols; c += kTileN)
      micro_tile<kTileM, kTileN>(o + c, out_stride, xr, k, wf + c * k, k);
    for (; c < cols; ++c) micro_tile<kTileM, 1>(o + c, out_stride, xr, k, wf + c * k, k);
  }
  for (; r < m; ++r) {
    const float* xr = xf + r * k;
    float* o = out + r * out_stride;
    int64_t c = 0;
    for (; c + kTileN <= cols; c += kTileN)
      micro_tile<1, kTileN>(o + c, out_stride, xr, k, wf + c * k, k);
    for (; c < cols; ++c) micro_tile<1, 1>(o + c, out_stride, xr, k, wf + c * k, k);
  }
}

}  // namespace

void linear(const TensorView& y, const TensorView& x, const TensorView& w, const TensorView& bias,
            int threads) {
  CHECK(x.dtype == DType::kBf16 && w.dtype == DType::kBf16);
  CHECK(y.dtype == DType::kBf16 || y.dtype == DType::kF32);
  CHECK(x.ndim == 2 && w.ndim == 2 && y.ndim == 2);
  CHECK(x.stride[1] == 1 && w.stride[1] == 1 && y.stride[1] == 1);
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  CHECK_EQ(w.size(1), k);
  CHECK_EQ(y.size(0), m);
  CHECK_EQ(y.size(1), n);
  const uint16_t* b = static_cast<const uint16_t*>(bias.data);
  if (b != nullptr) CHECK(bias.dtype == DType::kBf16 && bias.size(0) == n);
  if (m == 0 || n == 0) return;

  std::vector<float> xf(static_cast<size_t>(m * k));  // [M, K] f32, converted once
  for (int64_t r = 0; r < m; ++r) to_f32(xf.data() + r * k, elem<uint16_t>(x, r), k);

  // Split over blocks of output columns (rows of w): each thread streams its own part of
  // the weight, converting every weight element once per call.
  const int64_t blocks = (n + kBlockN - 1) / kBlockN;
  const int64_t useful = std::max<int64_t>(1, m * n * k / kMinMacsPerPart);
  parallel_for(blocks, static_cast<int>(std::min<int64_t>(threads, useful)),
               [&](int64_t block_begin, int64_t block_end) {
                 std::vector<float> wf(static_cast<size_t>(kBlockN * k));   // [kBlockN, K] f32
                 std::vector<float> out(static_cast<size_t>(m * kBlockN));  // [M, kBlockN] f32
                 for (int64_t blk = block_begin; blk < block_end; ++blk) {
                   const int64_t n0 = blk * kBlockN, cols = std::min(kBlockN, n - n0);
                   block_matmul(out.data(), kBlockN, xf.data(), m, elem<uint16_t>(w, n0),
                                w.stride[0], cols, k, wf.data());
                   for (int64_t r = 0; r < m; ++r)
                     for (int64_t j = 0; j < cols; ++j) {
                       float acc = out[r * kBlockN + j];
                       if (b != nullptr) acc += bf16_to_float(b[n0 + j]);
                       if (y.dtype == DType::kF32)
                         *elem<float>(y, r, n0 + j) = acc;
                       else
                         *elem<uint16_t>(y, r, n0 + j) = float_to_bf16(acc);
                     }
                 }
               });
}

}  // namespace nanovllm::kernels::cpu
