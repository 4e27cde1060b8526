// One decode-size GEMM problem, its CPU reference and its device buffers, shared by the tests of
// our GEMM kernels (skinny_gemm_cuda_test, hopper_gemm_cuda_test): y = x @ w^T (+ bias) against
// kernels::cpu::linear. Every element is checked, not only a norm: |got - ref| <= rtol |ref| +
// atol rms(ref), with f32 output rtol 1e-4 (both sum in f32, in another order) and bf16 output
// rtol 1/64 (two roundings of nearly equal sums may land one bf16 step apart, 2^-7 relative at
// most), so one wrong element fails. y is poisoned first (NaN) and its row padding must stay
// poisoned; x and y rows are strided (pitches x width + 24 and N + 5) to prove the strides are
// honoured.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "kernels/linear.h"
#include "tests/kernels/cuda_test_util.h"

namespace nanovllm::test {

struct GemmProblem {
  int64_t m, n, k;
  bool bias = false;
  DType out = DType::kBf16;
  bool silu_mul = false;  // x is gate_up [M, 2K], the kernel applies silu_and_mul on load
  uint32_t seed = 1;
};

// Host data and the CPU reference y of one problem. `weights_of`: reuse another case's w and
// bias (same shapes), drawing only a new x. `given_x`: x [M, K] contiguous instead of random.
struct GemmCase {
  explicit GemmCase(const GemmProblem& p, const GemmCase* weights_of = nullptr,
                    const std::vector<uint16_t>* given_x = nullptr)
      : p(p) {
    std::mt19937 rng(p.seed);
    x_width = p.silu_mul ? 2 * p.k : p.k;
    x_pitch = given_x ? x_width : x_width + 24;
    y_pitch = p.n + 5;
    x = given_x ? *given_x
                : random_bf16(p.m * x_pitch, rng, p.silu_mul ? -3.f : -1.f, p.silu_mul ? 3.f : 1.f);
    w = weights_of ? weights_of->w : random_bf16(p.n * p.k, rng, -0.1f, 0.1f);
    b = weights_of ? weights_of->b : random_bf16(p.n, rng);
    TensorView hx = host_view(x.data(), DType::kBf16, {p.m, x_width});
    hx.stride[0] = x_pitch;
    std::vector<uint16_t> act;  // [M, K] bf16: silu_and_mul(gate_up), the fused input
    if (p.silu_mul) {
      act.resize(p.m * p.k);
      kernels::cpu::silu_and_mul(host_view(act.data(), DType::kBf16, {p.m, p.k}), hx);
      hx = host_view(act.data(), DType::kBf16, {p.m, p.k});
    }
    ref.resize(p.m * p.n);
    std::vector<uint8_t> raw(p.m * p.n * esize());  // [M, N] in y's dtype
    const TensorView none;
    kernels::cpu::linear(
        host_view(raw.data(), p.out, {p.m, p.n}), hx, host_view(w.data(), DType::kBf16, {p.n, p.k}),
        p.bias ? host_view(b.data(), DType::kBf16, {p.n}) : none, reference_threads());
    for (int64_t i = 0; i < p.m * p.n; ++i) ref[i] = value(raw.data(), i);
    double ss = 0;
    for (float v : ref) ss += double{v} * v;
    rms = std::sqrt(ss / static_cast<double>(ref.size()));
  }
  size_t esize() const { return p.out == DType::kF32 ? 4 : 2; }
  float value(const uint8_t* base, int64_t i) const {
    if (p.out == DType::kF32) {
      float f;
      std::memcpy(&f, base + i * 4, 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, base + i * 2, 2);
    return bf16_to_float(h);
  }

  GemmProblem p;
  int64_t x_width = 0, x_pitch = 0, y_pitch = 0;
  std::vector<uint16_t> x, w, b;  // [M, x_pitch], [N, K], [N] bf16
  std::vector<float> ref;         // [M, N]
  double rms = 0;
};

// Device copies of a GemmCase's inputs and a poisoned, strided y.
struct GemmDeviceCase {
  explicit GemmDeviceCase(const GemmCase& c)
      : c(c), dx(c.x), dw(c.w), db(c.b), dy(c.p.m * c.y_pitch * c.esize()) {}
  TensorView x() const {
    TensorView v = dx.view(DType::kBf16, {c.p.m, c.x_width});
    v.stride[0] = c.x_pitch;
    return v;
  }
  TensorView y() const {
    TensorView v = dy.view(c.p.out, {c.p.m, c.p.n});
    v.stride[0] = c.y_pitch;
    return v;
  }
  TensorView w() const { return dw.view(DType::kBf16, {c.p.n, c.p.k}); }
  TensorView bias() const {
    TensorView none;
    none.device = Device::kCuda;
    return c.p.bias ? db.view(DType::kBf16, {c.p.n}) : none;
  }
  void poison_y() const { dy.mem.poison(); }

  const GemmCase& c;
  DevVec<uint16_t> dx, dw, db;
  DevVec<uint8_t> dy;
};

// "M=.. N=.. K=.. [bias] f32|bf16 [silu_mul] CONFIG".
template <typename Config>
std::string describe_gemm(const GemmProblem& p, const Config& cfg) {
  std::ostringstream os;
  os << "M=" << p.m << " N=" << p.n << " K=" << p.k << (p.bias ? " bias" : "")
     << (p.out == DType::kF32 ? " f32" : " bf16") << (p.silu_mul ? " silu_mul" : "") << " "
     << cfg.name();
  return os.str();
}

// Every element of the downloaded y against the reference; the padding of each row untouched.
inline void expect_gemm_matches(const GemmCase& c, const std::vector<uint8_t>& got,
                                const std::string& what) {
  const double rtol = c.p.out == DType::kF32 ? 1e-4 : 1.0 / 64, atol = rtol * c.rms + 1e-6;
  int64_t bad = 0, first = -1;
  for (int64_t r = 0; r < c.p.m; ++r)
    for (int64_t j = 0; j < c.p.n; ++j) {
      const double g = c.value(got.data(), r * c.y_pitch + j), ref = c.ref[r * c.p.n + j];
      if (!(std::abs(g - ref) <= rtol * std::abs(ref) + atol)) {
        if (bad++ == 0) first = r * c.p.n + j;
      }
    }
  const int64_t at = std::max<int64_t>(first, 0);
  EXPECT_EQ(bad, 0) << what << ": first bad element (token " << at / c.p.n << ", row " << at % c.p.n
                    << "): got " << c.value(got.data(), (at / c.p.n) * c.y_pitch + at % c.p.n)
                    << ", want " << c.ref[at];
  int64_t touched = 0;
  for (int64_t r = 0; r < c.p.m; ++r)
    for (int64_t j = c.p.n; j < c.y_pitch; ++j)
      for (size_t byte = 0; byte < c.esize(); ++byte)
        touched += got[(r * c.y_pitch + j) * c.esize() + byte] != 0xFF;
  EXPECT_EQ(touched, 0) << what << ": bytes written past N in y's row padding";
}

// One GEMM launch (run(d, stream) on the device case d) captured in a CUDA graph after an eager
// run, then replayed with c1's x and with c2's (same shapes and weights) uploaded under it: each
// replay must give its own case's result. what: describe_gemm of the launch.
template <class Run>
void expect_graph_replays_follow_x(const GemmCase& c1, const GemmCase& c2, const std::string& what,
                                   cudaStream_t stream, const Run& run) {
  GemmDeviceCase d(c1);
  run(d, stream);  // eager first: one-time set-up (attributes) stays out of the capture
  CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  run(d, stream);
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    const GemmCase& c = replay == 0 ? c1 : c2;
    d.dx.mem.upload(c.x);
    d.poison_y();
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    expect_gemm_matches(c, d.dy.host(), what + " replay " + std::to_string(replay));
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
}

}  // namespace nanovllm::test
