// The fused decode MLP (kernels::cuda::fused_mlp_any_rule, and fused_mlp's rule): act and y within
// bf16 rounding of the CPU reference (cpu::linear, cpu::silu_and_mul, cpu::linear) for 1-2 tokens
// of the shapes it serves, including one whose last blocks own no act column; y written over its
// own input x (the model's call); the post-attention norm and the output projection in front;
// and a CUDA graph of two calls replayed with new inputs each time,
// which passes the grid barrier's counter through many generations.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "kernels/exec_context.h"
#include "kernels/fused_mlp.h"
#include "kernels/linear.h"
#include "kernels/rms_norm.h"
#include "tests/kernels/cuda_test_util.h"

namespace nanovllm::test {
namespace {

// x [M, H] (pitch H + 8), w_gate_up [2I, H] = [gate; up], w_down [H, I].
struct Mlp {
  Mlp(int64_t m, int64_t hidden, int64_t inter, uint32_t seed)
      : m(m), hidden(hidden), inter(inter) {
    std::mt19937 rng(seed);
    x = random_bf16(m * (hidden + 8), rng, -1.f, 1.f);
    w_gate_up = random_bf16(2 * inter * hidden, rng, -0.1f, 0.1f);
    w_down = random_bf16(hidden * inter, rng, -0.1f, 0.1f);
  }
  TensorView host_x() {
    TensorView v = host_view(x.data(), DType::kBf16, {m, hidden});
    v.stride[0] = hidden + 8;
    return v;
  }
  // act [M, I] and y [M, H] of the CPU reference.
  void reference(std::vector<uint16_t>& act, std::vector<uint16_t>& y) {
    std::vector<uint16_t> gate_up(m * 2 * inter);
    act.assign(m * inter, 0);
    y.assign(m * hidden, 0);
    kernels::cpu::linear(host_view(gate_up.data(), DType::kBf16, {m, 2 * inter}), host_x(),
                         host_view(w_gate_up.data(), DType::kBf16, {2 * inter, hidden}),
                         TensorView(), reference_threads());
    kernels::cpu::silu_and_mul(host_view(act.data(), DType::kBf16, {m, inter}),
                               host_view(gate_up.data(), DType::kBf16, {m, 2 * inter}));
    kernels::cpu::linear(host_view(y.data(), DType::kBf16, {m, hidden}),
                         host_view(act.data(), DType::kBf16, {m, inter}),
                         host_view(w_down.data(), DType::kBf16, {hidden, inter}), TensorView(),
                         reference_threads());
  }
  std::string name() const {
    std::ostringstream os;
    os << "M=" << m << " H=" << hidden << " I=" << inter;
    return os.str();
  }
  int64_t m, hidden, inter;
  std::vector<uint16_t> x, w_gate_up, w_down;
};

// The device side of one Mlp: x with its pitch, act and y poisoned, the barrier zeroed.
struct DeviceMlp {
  explicit DeviceMlp(const Mlp& p)
      : p(p),
        dx(p.x),
        dgu(p.w_gate_up),
        ddown(p.w_down),
        act(p.m * p.inter),
        y(p.m * p.hidden),
        barrier(1) {
    CUDA_CHECK(cudaMemset(barrier.mem.get(), 0, sizeof(uint64_t)));
    finish_legacy_stream();
  }
  TensorView x() const {
    TensorView v = dx.view(DType::kBf16, {p.m, p.hidden});
    v.stride[0] = p.hidden + 8;
    return v;
  }
  bool run(const TensorView& out, const ExecContext& ctx) const {
    return kernels::cuda::fused_mlp_any_rule(
        out, x(), dgu.view(DType::kBf16, {2 * p.inter, p.hidden}),
        ddown.view(DType::kBf16, {p.hidden, p.inter}), act.view(DType::kBf16, {p.m, p.inter}),
        static_cast<uint64_t*>(barrier.mem.get()), nullptr, ctx);
  }
  TensorView y_view() const { return y.view(DType::kBf16, {p.m, p.hidden}); }
  const Mlp& p;
  DevVec<uint16_t> dx, dgu, ddown, act, y;
  DevVec<uint64_t> barrier;
};

// The token rows [M, H] of a buffer with the row pitch H + 8 (x's).
std::vector<uint16_t> unpitched(const std::vector<uint16_t>& v, int64_t m, int64_t h) {
  std::vector<uint16_t> rows(m * h);
  for (int64_t t = 0; t < m; ++t)
    for (int64_t c = 0; c < h; ++c) rows[t * h + c] = v[t * (h + 8) + c];
  return rows;
}

// The CPU after the attention block: residual r += x (x pitched as Mlp's), x = rms_norm(r) * w,
// then p's MLP on x; returns y [M, H] (r updated).
std::vector<uint16_t> cpu_norm_then_mlp(Mlp& p, std::vector<uint16_t> x, std::vector<uint16_t>& r,
                                        std::vector<uint16_t> norm_w, float eps) {
  TensorView hx = host_view(x.data(), DType::kBf16, {p.m, p.hidden});
  hx.stride[0] = p.hidden + 8;
  kernels::cpu::fused_add_rms_norm(hx, host_view(r.data(), DType::kBf16, {p.m, p.hidden}),
                                   host_view(norm_w.data(), DType::kBf16, {p.hidden}), eps);
  p.x = x;
  std::vector<uint16_t> want_act, want_y;
  p.reference(want_act, want_y);
  return want_y;
}

void expect_matches(Mlp& p, const std::vector<uint16_t>& act, const std::vector<uint16_t>& y,
                    const std::string& what) {
  std::vector<uint16_t> want_act, want_y;
  p.reference(want_act, want_y);
  const ErrorStats ea = compare_bf16(act, want_act), ey = compare_bf16(y, want_y);
  EXPECT_TRUE(ea.finite && ey.finite) << what << ": unwritten or NaN output";
  EXPECT_LT(ea.rel_l2, 1e-2) << what << ": act against the CPU reference";
  EXPECT_LT(ey.rel_l2, 1e-2) << what << ": y against the CPU reference";
}

#define SKIP_WITHOUT_FUSED_MLP(m, h, i)                                                    \
  do {                                                                                     \
    SKIP_WITHOUT_CUDA();                                                                   \
    if (!kernels::cuda::fused_mlp_supports(m, h, i))                                       \
      GTEST_SKIP() << "the fused MLP needs an sm_90 build and device (and a plan for it)"; \
  } while (0)

// The 0.6B (H 1024, I 3072), its tp-2 shard (I 1536), the 1.7B's tp-4 shard (H 2048, I 1536),
// and I 1000, whose plan leaves the last blocks without act columns (8 a block, 125 blocks'
// worth) but with down rows.
TEST(FusedMlpCuda, MatchesTheCpuForOneAndTwoTokens) {
  SKIP_WITHOUT_FUSED_MLP(1, 1024, 3072);
  const int64_t shapes[][2] = {{1024, 3072}, {1024, 1536}, {2048, 1536}, {1024, 1000}};
  ExecContext ctx;
  for (const auto& s : shapes) {
    for (int64_t m = 1; m <= 2; ++m) {
      Mlp p(m, s[0], s[1], 7 + static_cast<uint32_t>(m + s[1]));
      DeviceMlp d(p);
      ASSERT_TRUE(d.run(d.y_view(), ctx)) << p.name() << ": not taken";
      CUDA_CHECK(cudaGetLastError());
      expect_matches(p, d.act.host(), d.y.host(), p.name());
    }
  }
}

// The 8B's shards at --tp 4 and 8 (H 4096, I 3072 and 1536), whose gate and up rows each warp
// streams (FusedMlpPlan::stream_gate_up), one token; y written over x as the model calls it;
// a post-attention norm in front is left to the caller.
TEST(FusedMlpCuda, StreamedGateUpMatchesTheCpu) {
  SKIP_WITHOUT_FUSED_MLP(1, 4096, 3072);
  ExecContext ctx;
  for (const int64_t inter : {3072, 1536}) {
    Mlp p(1, 4096, inter, 11 + static_cast<uint32_t>(inter));
    DeviceMlp d(p);
    ASSERT_TRUE(d.run(d.y_view(), ctx)) << p.name() << ": not taken";
    CUDA_CHECK(cudaGetLastError());
    expect_matches(p, d.act.host(), d.y.host(), p.name());
    // Then twice with out == x on one device copy: the second call (the barrier's second
    // generation) takes the first call's y as its input.
    DeviceMlp in_place(p);
    ASSERT_TRUE(in_place.run(in_place.x(), ctx)) << p.name();
    std::vector<uint16_t> x1 = in_place.dx.host();
    expect_matches(p, in_place.act.host(), unpitched(x1, p.m, p.hidden), p.name() + ", y over x");
    ASSERT_TRUE(in_place.run(in_place.x(), ctx)) << p.name();
    Mlp second = p;
    second.x = x1;
    expect_matches(second, in_place.act.host(), unpitched(in_place.dx.host(), p.m, p.hidden),
                   p.name() + ", the second call over the first's y");
  }
  Mlp p(1, 4096, 3072, 21);
  DeviceMlp d(p);
  std::vector<uint16_t> r(p.hidden, 0), w(p.hidden, 0);
  DevVec<uint16_t> dr(r), dw(w);
  const kernels::FusedMlpNorm norm{
      dr.view(DType::kBf16, {1, p.hidden}), dw.view(DType::kBf16, {p.hidden}), 1e-6f, {}, {}};
  EXPECT_FALSE(kernels::cuda::fused_mlp_any_rule(
      d.y_view(), d.x(), d.dgu.view(DType::kBf16, {2 * p.inter, p.hidden}),
      d.ddown.view(DType::kBf16, {p.hidden, p.inter}), d.act.view(DType::kBf16, {1, p.inter}),
      static_cast<uint64_t*>(d.barrier.mem.get()), &norm, ctx));
  EXPECT_TRUE(std::isnan(bf16_to_float(d.y.host()[0]))) << "y untouched";
}

// The decoder calls it with out == x: every block reads x before the grid barrier and writes
// y only after it.
TEST(FusedMlpCuda, WritesOverItsOwnInput) {
  SKIP_WITHOUT_FUSED_MLP(2, 1024, 3072);
  Mlp p(2, 1024, 3072, 99);
  DeviceMlp d(p);
  ExecContext ctx;
  ASSERT_TRUE(d.run(d.x(), ctx));
  const std::vector<uint16_t> xs = d.dx.host();
  std::vector<uint16_t> y(p.m * p.hidden);
  for (int64_t t = 0; t < p.m; ++t)
    for (int64_t c = 0; c < p.hidden; ++c) y[t * p.hidden + c] = xs[t * (p.hidden + 8) + c];
  expect_matches(p, d.act.host(), y, "y over x");
}

// Two calls captured in one graph (y, then y again from the same x), replayed four times with
// a new x each time: each replay's y matches that x's reference, so the barrier's counter
// (2 x blocks arrivals a replay: 128 on an H100 or H200; never reset) keeps separating the calls.
TEST(FusedMlpCuda, GraphReplaysFollowNewInputs) {
  SKIP_WITHOUT_FUSED_MLP(2, 1024, 3072);
  Mlp p(2, 1024, 3072, 5);
  DeviceMlp d(p);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ExecContext ctx;
  ctx.stream = stream;
  ASSERT_TRUE(d.run(d.y_view(), ctx));  // eager first: the shared-memory attribute
  CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  d.run(d.y_view(), ctx);
  d.run(d.y_view(), ctx);
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 4; ++replay) {
    Mlp next(2, 1024, 3072, 50 + static_cast<uint32_t>(replay));
    p.x = next.x;
    d.dx.mem.upload(p.x);
    d.y.mem.poison();
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    expect_matches(p, d.act.host(), d.y.host(), "replay " + std::to_string(replay));
  }
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::optional<kernels::FusedMlpPlan> plan =
      kernels::fused_mlp_plan(2, 1024, 3072, sms, int64_t{1} << 30);
  ASSERT_TRUE(plan.has_value());
  const std::vector<uint64_t> arrivals = d.barrier.host();
  EXPECT_EQ(arrivals[0], static_cast<uint64_t>(plan->blocks) * (1 + 2 * 4))
      << "every block of every call arrived once";
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
}

// The post-attention norm in front (the decoder's one-GPU call: y over x, the residual updated):
// residual and y bit-identical to kernels::fused_add_rms_norm then the fused MLP without it, and
// y within rounding of the CPU's fused_add_rms_norm, silu_and_mul MLP.
TEST(FusedMlpCuda, PostNormInFrontIsBitIdenticalToTheNormKernelFirst) {
  SKIP_WITHOUT_FUSED_MLP(1, 1024, 3072);
  const int64_t shapes[][2] = {{1024, 3072}, {2048, 1536}};
  for (const auto& s : shapes) {
    for (int64_t m = 1; m <= 2; ++m) {
      const int64_t h = s[0], inter = s[1];
      Mlp p(m, h, inter, 21 + static_cast<uint32_t>(m + h));
      std::mt19937 rng(77);
      const std::vector<uint16_t> res = random_bf16(m * h, rng, -2.f, 2.f),
                                  norm_w = random_bf16(h, rng, 0.5f, 1.5f);
      constexpr float kEps = 1e-6f;
      ExecContext ctx;
      // Two kernels: the norm, then the MLP.
      DeviceMlp two(p);
      DevVec<uint16_t> res_two(res), weight(norm_w);
      const TensorView wv = weight.view(DType::kBf16, {h});
      kernels::cuda::fused_add_rms_norm(two.x(), res_two.view(DType::kBf16, {m, h}), wv, kEps,
                                        nullptr);
      ASSERT_TRUE(two.run(two.x(), ctx));
      // One kernel.
      DeviceMlp one(p);
      DevVec<uint16_t> res_one(res);
      const kernels::FusedMlpNorm post{res_one.view(DType::kBf16, {m, h}), wv, kEps};
      ASSERT_TRUE(kernels::cuda::fused_mlp_any_rule(
          one.x(), one.x(), one.dgu.view(DType::kBf16, {2 * inter, h}),
          one.ddown.view(DType::kBf16, {h, inter}), one.act.view(DType::kBf16, {m, inter}),
          static_cast<uint64_t*>(one.barrier.mem.get()), &post, ctx));
      CUDA_CHECK(cudaGetLastError());
      const std::string what = p.name() + " with the norm in front";
      EXPECT_EQ(res_one.host(), res_two.host()) << what << ": residual";
      EXPECT_EQ(one.dx.host(), two.dx.host()) << what << ": y (over x)";
      // The CPU: residual += x, x = norm(residual), then the MLP on x.
      std::vector<uint16_t> r = res;
      const std::vector<uint16_t> want_y = cpu_norm_then_mlp(p, p.x, r, norm_w, kEps);
      const ErrorStats e = compare_bf16(unpitched(one.dx.host(), m, h), want_y);
      EXPECT_TRUE(e.finite) << what;
      EXPECT_LT(e.rel_l2, 1e-2) << what << ": y against the CPU";
      EXPECT_EQ(res_one.host(), r) << what << ": residual against the CPU";
    }
  }
}

// The output projection in front as well (the decoder's one-GPU call at one token): x is first
// attn @ out_proj^T, written over x by the kernel; residual and y within rounding of the CPU's
// linear, fused_add_rms_norm, silu_and_mul MLP, and every block arrived twice (two grid
// barriers). A q width the lanes cannot hold is refused with nothing written.
TEST(FusedMlpCuda, OutputProjectionInFrontMatchesTheCpu) {
  SKIP_WITHOUT_FUSED_MLP(1, 1024, 3072);
  for (int64_t m = 1; m <= 2; ++m) {
    const int64_t h = 1024, inter = 3072, kq = 2048;
    Mlp p(m, h, inter, 31 + static_cast<uint32_t>(m));
    std::mt19937 rng(91);
    const std::vector<uint16_t> attn = random_bf16(m * kq, rng, -1.f, 1.f),
                                w_out = random_bf16(h * kq, rng, -0.05f, 0.05f),
                                res = random_bf16(m * h, rng, -2.f, 2.f),
                                norm_w = random_bf16(h, rng, 0.5f, 1.5f);
    constexpr float kEps = 1e-6f;
    DeviceMlp d(p);
    d.dx.mem.poison();  // x is the kernel's to write
    DevVec<uint16_t> dattn(attn), dw_out(w_out), dres(res), weight(norm_w);
    const kernels::FusedMlpNorm post{
        dres.view(DType::kBf16, {m, h}), weight.view(DType::kBf16, {h}), kEps,
        dattn.view(DType::kBf16, {m, kq}), dw_out.view(DType::kBf16, {h, kq})};
    ExecContext ctx;
    ASSERT_TRUE(kernels::cuda::fused_mlp_any_rule(
        d.x(), d.x(), d.dgu.view(DType::kBf16, {2 * inter, h}),
        d.ddown.view(DType::kBf16, {h, inter}), d.act.view(DType::kBf16, {m, inter}),
        static_cast<uint64_t*>(d.barrier.mem.get()), &post, ctx))
        << "M=" << m << ": not taken";
    CUDA_CHECK(cudaGetLastError());
    // The CPU: x = attn @ out_proj^T, residual += x, x = norm(residual), then the MLP on x.
    std::vector<uint16_t> x(m * (h + 8), 0), r = res;
    TensorView hx = host_view(x.data(), DType::kBf16, {m, h});
    hx.stride[0] = h + 8;
    kernels::cpu::linear(hx, host_view(const_cast<uint16_t*>(attn.data()), DType::kBf16, {m, kq}),
                         host_view(const_cast<uint16_t*>(w_out.data()), DType::kBf16, {h, kq}),
                         TensorView(), reference_threads());
    const std::vector<uint16_t> want_y = cpu_norm_then_mlp(p, x, r, norm_w, kEps);
    const std::string what = "M=" + std::to_string(m) + " with o_proj in front";
    const ErrorStats ey = compare_bf16(unpitched(d.dx.host(), m, h), want_y),
                     er = compare_bf16(dres.host(), r);
    EXPECT_TRUE(ey.finite && er.finite) << what;
    EXPECT_LT(ey.rel_l2, 1e-2) << what << ": y against the CPU";
    EXPECT_LT(er.rel_l2, 1e-3) << what << ": residual against the CPU";
    int device = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const std::optional<kernels::FusedMlpPlan> plan =
        kernels::fused_mlp_plan(m, h, inter, sms, int64_t{1} << 30);
    ASSERT_TRUE(plan.has_value());
    EXPECT_EQ(d.barrier.host()[0], static_cast<uint64_t>(plan->blocks) * 2) << what;

    // Kq 1536: 6 chunks a lane, which no instantiation holds.
    const int64_t odd = 1536;
    DevVec<uint16_t> attn_odd(random_bf16(m * odd, rng, -1.f, 1.f)),
        w_odd(random_bf16(h * odd, rng, -0.05f, 0.05f));
    const kernels::FusedMlpNorm post_odd{
        dres.view(DType::kBf16, {m, h}), weight.view(DType::kBf16, {h}), kEps,
        attn_odd.view(DType::kBf16, {m, odd}), w_odd.view(DType::kBf16, {h, odd})};
    d.y.mem.poison();
    EXPECT_FALSE(kernels::cuda::fused_mlp_any_rule(
        d.y_view(), d.x(), d.dgu.view(DType::kBf16, {2 * inter, h}),
        d.ddown.view(DType::kBf16, {h, inter}), d.act.view(DType::kBf16, {m, inter}),
        static_cast<uint64_t*>(d.barrier.mem.get()), &post_odd, ctx))
        << what << ": Kq 1536 taken";
    EXPECT_TRUE(std::isnan(bf16_to_float(d.y.host()[0]))) << what << ": y untouched";
  }
}

// By the rule (NANOVLLM_FUSED_MLP unset): one token only; three tokens and a hidden size the
// lanes cannot hold are left to the caller, whatever the rule.
TEST(FusedMlpCuda, LeavesWhatItDoesNotServe) {
  SKIP_WITHOUT_FUSED_MLP(1, 1024, 3072);
  ExecContext ctx;
  for (int64_t m : {1, 2}) {
    Mlp p(m, 1024, 3072, 8);
    DeviceMlp d(p);
    const bool took = kernels::cuda::fused_mlp(
        d.y_view(), d.x(), d.dgu.view(DType::kBf16, {2 * p.inter, p.hidden}),
        d.ddown.view(DType::kBf16, {p.hidden, p.inter}), d.act.view(DType::kBf16, {m, p.inter}),
        static_cast<uint64_t*>(d.barrier.mem.get()), nullptr, ctx);
    EXPECT_EQ(took, m == 1) << "M=" << m;
  }
  Mlp three(3, 1024, 3072, 3);
  DeviceMlp d3(three);
  EXPECT_FALSE(d3.run(d3.y_view(), ctx));
  Mlp wide(1, 2560, 1024, 4);
  DeviceMlp dw(wide);
  EXPECT_FALSE(dw.run(dw.y_view(), ctx));
  const std::vector<uint16_t> y = dw.y.host();
  EXPECT_TRUE(std::isnan(bf16_to_float(y[0]))) << "y untouched";
}

}  // namespace
}  // namespace nanovllm::test
