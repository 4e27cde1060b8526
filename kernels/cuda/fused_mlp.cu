// The fused decode MLP's host side (kernels/fused_mlp.h): the plan on this device, the rule, and
// the launch of fused_mlp_kernel.cuh's kernel.
#include "kernels/attention.h"
#include "kernels/check.h"
#include "kernels/cuda/fused_mlp_kernel.cuh"
#include "kernels/cuda/fused_mlp_stream_kernel.cuh"
#include "kernels/cuda/sm90_device.h"
#include "kernels/env_choice.h"
#include "kernels/fused_mlp.h"

namespace nanovllm::kernels::cuda {
namespace {

using fused::kStaticSmem;
using fused::kThreads;
using fused::Params;

// The plan on this device, or none where this build or device has no sm_90 kernels.
std::optional<FusedMlpPlan> device_plan(int64_t m, int64_t hidden, int64_t inter) {
  if (!sm90a_built() || !device_is_sm90()) return {};
  return fused_mlp_plan(m, hidden, inter, multiprocessor_count(),
                        shared_memory_optin() - kStaticSmem);
}

// NANOVLLM_FUSED_MLP (read once): "auto" (unset) takes the fused MLP up to kFusedMlpAutoMaxM
// tokens, "on" wherever it runs, "off" never (whole-run comparisons).
enum class FusedMlpSetting { kAuto, kOn, kOff };
FusedMlpSetting fused_mlp_setting() {
  static const FusedMlpSetting v =
      env_enum("NANOVLLM_FUSED_MLP", {std::pair{"auto", FusedMlpSetting::kAuto},
                                      {"on", FusedMlpSetting::kOn},
                                      {"off", FusedMlpSetting::kOff}});
  return v;
}
constexpr int64_t kFusedMlpAutoMaxM = 1;

// One block an SM, as the plan says, launched early (programmatic dependent launch).
template <auto kKernel>
void launch_kernel(const Params& p, const FusedMlpPlan& plan, cudaStream_t stream) {
  // Once per kernel (a host call, not one a launch): every plan fits this limit.
  static const bool limit_set = [] {
    CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    shared_memory_optin() - kStaticSmem));
    return true;
  }();
  (void)limit_set;
  cudaLaunchAttribute attrs[2];
  const cudaLaunchConfig_t config =
      launch_config(dim3(plan.blocks), dim3(kThreads), static_cast<size_t>(plan.smem_bytes), 0,
                    true, stream, attrs);
  CUDA_CHECK(cudaLaunchKernelEx(&config, kKernel, p));
}

template <int kTok, int kXChunks, bool kNorm, int kOChunks>
void launch(const Params& p, const FusedMlpPlan& plan, cudaStream_t stream) {
  launch_kernel<fused::fused_mlp_kernel<kTok, kXChunks, kNorm, kOChunks>>(p, plan, stream);
}

template <int kXChunks, bool kNorm, int kOChunks>
void launch_tokens(const Params& p, const FusedMlpPlan& plan, cudaStream_t stream) {
  if (p.m == 1)
    launch<1, kXChunks, kNorm, kOChunks>(p, plan, stream);
  else
    launch<2, kXChunks, kNorm, kOChunks>(p, plan, stream);
}

// o_chunks: 0 (no output projection in front), 4 or 8.
template <int kXChunks>
void launch_hidden(const Params& p, const FusedMlpPlan& plan, bool norm, int o_chunks,
                   cudaStream_t stream) {
  if (!norm)
    launch_tokens<kXChunks, false, 0>(p, plan, stream);
  else if (o_chunks == 0)
    launch_tokens<kXChunks, true, 0>(p, plan, stream);
  else if (o_chunks == 4)
    launch_tokens<kXChunks, true, 4>(p, plan, stream);
  else
    launch_tokens<kXChunks, true, 8>(p, plan, stream);
}

// NANOVLLM_FUSED_OUT_PROJ (read once): "auto" (unset) takes the output projection in front
// wherever the caller offers it and the plan holds it; "off" leaves it to the caller.
bool fused_out_proj_allowed() {
  static const bool v = env_choice("NANOVLLM_FUSED_OUT_PROJ", {"auto", "off"}) != "off";
  return v;
}

}  // namespace

bool fused_mlp_supports(int64_t m, int64_t hidden, int64_t inter) {
  return device_plan(m, hidden, inter).has_value();
}

namespace {

// Launches the kernel where it takes the shape and layout (by_rule: and NANOVLLM_FUSED_MLP's
// rule takes M); false, nothing done, elsewhere.
bool launch_where_taken(const TensorView& y, const TensorView& x, const TensorView& w_gate_up,
                        const TensorView& w_down, const TensorView& act, uint64_t* barrier,
                        const FusedMlpNorm* post_norm, const ExecContext& ctx, bool by_rule) {
  check_cuda_tensor(x, DType::kBf16, "fused_mlp x");
  check_cuda_tensor(y, DType::kBf16, "fused_mlp y");
  check_cuda_tensor(w_gate_up, DType::kBf16, "fused_mlp w_gate_up");
  check_cuda_tensor(w_down, DType::kBf16, "fused_mlp w_down");
  check_cuda_tensor(act, DType::kBf16, "fused_mlp act");
  CHECK(x.ndim == 2 && y.ndim == 2 && w_gate_up.ndim == 2 && w_down.ndim == 2 && act.ndim == 2);
  const int64_t m = x.size(0), hidden = x.size(1), inter = w_down.size(1);
  CHECK_EQ(w_gate_up.size(0), 2 * inter);
  CHECK_EQ(w_gate_up.size(1), hidden);
  CHECK_EQ(w_down.size(0), hidden);
  CHECK_EQ(y.size(0), m);
  CHECK_EQ(y.size(1), hidden);
  CHECK_EQ(act.size(0), m);
  CHECK_EQ(act.size(1), inter);
  if (m == 0) return false;
  if (by_rule) {
    const FusedMlpSetting setting = fused_mlp_setting();
    if (setting == FusedMlpSetting::kOff || ctx.cublas_only ||
        (setting == FusedMlpSetting::kAuto && m > kFusedMlpAutoMaxM))
      return false;
  }
  // Whole rows in bulk copies, and 16-byte chunks of x and act.
  if (w_gate_up.stride[0] != hidden || w_down.stride[0] != inter || x.stride[0] % 8 != 0 ||
      act.stride[0] % 8 != 0 || !aligned16(x.data) || !aligned16(act.data) ||
      !aligned16(w_gate_up.data) || !aligned16(w_down.data))
    return false;
  if (post_norm != nullptr &&
      (post_norm->residual.stride[0] % 8 != 0 || !aligned16(post_norm->residual.data) ||
       !aligned16(post_norm->weight.data)))
    return false;
  const std::optional<FusedMlpPlan> plan = device_plan(m, hidden, inter);
  // The streamed plan leaves the post-attention norm to the caller (a tensor-parallel rank's
  // sum takes it).
  if (!plan || (plan->stream_gate_up && post_norm != nullptr)) return false;
  // The output projection in front, where offered: taken whole or the call is refused (the
  // caller then projects and calls again without it).
  int o_chunks = 0;
  if (post_norm != nullptr && post_norm->attn.data != nullptr) {
    const TensorView& attn = post_norm->attn;
    const TensorView& w_out = post_norm->out_proj;
    check_cuda_tensor(attn, DType::kBf16, "fused_mlp attn");
    check_cuda_tensor(w_out, DType::kBf16, "fused_mlp out_proj");
    CHECK(attn.ndim == 2 && w_out.ndim == 2);
    const int64_t q_width = attn.size(1);
    CHECK_EQ(attn.size(0), m);
    CHECK_EQ(w_out.size(0), hidden);
    CHECK_EQ(w_out.size(1), q_width);
    if ((by_rule && !fused_out_proj_allowed()) || !fused_mlp_takes_out_proj(*plan, q_width) ||
        w_out.stride[0] != q_width || attn.stride[0] % 8 != 0 || !aligned16(attn.data) ||
        !aligned16(w_out.data))
      return false;
    o_chunks = static_cast<int>(q_width / 256);
  }
  CHECK_MSG(barrier != nullptr, "fused_mlp needs its call site's barrier counter");
  Params p;
  p.x = x.ptr<bf16>();
  p.ldx = x.stride[0];
  p.w_gate_up = w_gate_up.ptr<bf16>();
  p.w_down = w_down.ptr<bf16>();
  p.act = act.ptr<bf16>();
  p.ld_act = act.stride[0];
  p.y = y.ptr<bf16>();
  p.ldy = y.stride[0];
  p.barrier = reinterpret_cast<unsigned long long*>(barrier);
  p.m = static_cast<int>(m);
  p.hidden = static_cast<int>(hidden);
  p.inter = static_cast<int>(inter);
  p.act_per_block = plan->act_per_block;
  p.rows_per_block = plan->rows_per_block;
  p.blocks = plan->blocks;
  const bool norm = post_norm != nullptr;
  if (norm) {
    const TensorView& r = post_norm->residual;
    check_cuda_tensor(r, DType::kBf16, "fused_mlp residual");
    check_cuda_tensor(post_norm->weight, DType::kBf16, "fused_mlp norm weight");
    CHECK(r.ndim == 2 && r.size(0) == m && r.size(1) == hidden);
    CHECK_EQ(post_norm->weight.numel(), hidden);
    p.residual = r.ptr<bf16>();
    p.ld_res = r.stride[0];
    p.norm_weight = post_norm->weight.ptr<bf16>();
    p.eps = post_norm->eps;
    if (o_chunks > 0) {
      p.attn = post_norm->attn.ptr<bf16>();
      p.ld_attn = post_norm->attn.stride[0];
      p.w_out = post_norm->out_proj.ptr<bf16>();
    }
  }
  if (plan->stream_gate_up)
    launch_kernel<fused::fused_mlp_stream_kernel<kFusedMlpStreamHidden / 256>>(p, *plan,
                                                                               ctx.stream);
  else if (hidden == 1024)
    launch_hidden<4>(p, *plan, norm, o_chunks, ctx.stream);
  else
    launch_hidden<8>(p, *plan, norm, o_chunks, ctx.stream);
  return true;
}

}  // namespace

bool fused_mlp(const TensorView& y, const TensorView& x, const TensorView& w_gate_up,
               const TensorView& w_down, const TensorView& act, uint64_t* barrier,
               const FusedMlpNorm* post_norm, const ExecContext& ctx) {
  return launch_where_taken(y, x, w_gate_up, w_down, act, barrier, post_norm, ctx, true);
}

bool fused_mlp_any_rule(const TensorView& y, const TensorView& x, const TensorView& w_gate_up,
                        const TensorView& w_down, const TensorView& act, uint64_t* barrier,
                        const FusedMlpNorm* post_norm, const ExecContext& ctx) {
  return launch_where_taken(y, x, w_gate_up, w_down, act, barrier, post_norm, ctx, false);
}

}  // namespace nanovllm::kernels::cuda
