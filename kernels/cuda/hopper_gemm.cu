// Launcher and configs of the decode-size Hopper GEMM (kernels/hopper_gemm.h); the kernel and
// its design are in hopper_gemm_kernel.cuh.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>

#include "kernels/cuda/hopper_gemm_kernel.cuh"
#include "kernels/cuda/sm90_device.h"
#include "kernels/cuda/tensor_map.h"
#include "kernels/hopper_gemm.h"

namespace nanovllm::kernels {
static_assert(cuda::hgemm::kMaxSplit == kHopperGemmMaxSplit, "the kernel's sum unrolls the ranks");
namespace {

constexpr int64_t kSms = 132;        // H100 SXM / H200: the blocks a config aims to put on the GPU
constexpr int kMinStepsPerRank = 2;  // 64-k steps a split rank keeps at least (configs only)

int64_t k_steps(int64_t k) {
  return (k + cuda::hgemm::kStepK - 1) / cuda::hgemm::kStepK;
}
int64_t steps_per_rank(int64_t k, int split) {
  return (k_steps(k) + split - 1) / split;
}
int token_tile(int64_t m) {  // wgmma N: the smallest of 16, 32, 64 that holds M tokens
  int tok = 16;
  while (tok < m) tok *= 2;
  return tok;
}

}  // namespace

std::string HopperGemmConfig::name() const {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "wg%ds%d%s", warpgroups, split, pdl ? "+pdl" : "");
  return buf;
}

bool hopper_gemm_supports(int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  return m >= 1 && m <= kHopperGemmMaxM && n >= 1 && n <= kIntMax - 128 && k >= 8 && k % 8 == 0 &&
         k <= kIntMax / 2 && cuda::sm90a_built() && cuda::device_is_sm90();
}

std::vector<HopperGemmConfig> hopper_gemm_configs(int64_t m, int64_t n, int64_t k,
                                                  bool gate_up_act) {
  std::vector<HopperGemmConfig> out;
  if (!hopper_gemm_supports(m, gate_up_act ? 2 * n : n, k)) return out;
  const int64_t rows_out = gate_up_act ? 32 : 64;  // output rows of a warpgroup's 64 weight rows
  const auto add = [&](int wg, int split) {
    const HopperGemmConfig c{wg, split};
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  // One block of R rows per tile and K split so that tiles x split first reaches 7/8 of a
  // block per SM (then every block's weight share is small enough to be requested whole
  // before the wait), each rank keeping >= kMinStepsPerRank steps; for the first block height
  // also twice that split, or half where it cannot grow. 64-row blocks first: gemm_bench on an
  // H200 (bench/results/h200-2026-11-28-issue33_hopper_gemm.txt) ran the 0.6B's qkv_proj and
  // gate_up_proj faster with them than with 128-row ones at every M from 16 to 64.
  for (const int wg : {1, 2}) {
    const int64_t tiles = (n + rows_out * wg - 1) / (rows_out * wg);
    int split = 1;
    while (split < kHopperGemmMaxSplit && tiles * split < kSms * 7 / 8) ++split;
    while (split > 1 && steps_per_rank(k, split) < kMinStepsPerRank) --split;
    add(wg, split);
    if (wg > 1) continue;
    const int twice = std::min(2 * split, kHopperGemmMaxSplit);
    if (twice != split && tiles * twice <= 2 * kSms && steps_per_rank(k, twice) >= kMinStepsPerRank)
      add(wg, twice);
    else if (split > 1)
      add(wg, split / 2);  // fewer ranks to sum where the split is already the largest
  }
  return out;
}

bool hopper_gemm_qkv_rope_supports(int64_t m, int64_t n, int64_t k, const QkvRopeStore& r,
                                   bool has_bias) {
  return n == (r.num_heads + 2 * r.num_kv_heads) * cuda::hgemm::kRopeHeadDim && !has_bias &&
         r.k_cache.dtype == DType::kBf16 && r.v_cache.dtype == DType::kBf16 &&
         hopper_gemm_supports(m, n, k);
}

namespace cuda {
namespace {

using hgemm::Params;

template <int kTok, int kWg, bool kAct, bool kRope = false>
void raise_smem_limit() {
  CUDA_CHECK(cudaFuncSetAttribute(hgemm::hopper_gemm_kernel<kTok, kWg, kAct, kRope>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  hgemm::smem_bytes(kTok, kWg, hgemm::max_stages(kTok, kWg))));
}

template <bool kAct>
void raise_smem_limits_of() {
  raise_smem_limit<16, 1, kAct>();
  raise_smem_limit<32, 1, kAct>();
  raise_smem_limit<64, 1, kAct>();
  raise_smem_limit<16, 2, kAct>();
  raise_smem_limit<32, 2, kAct>();
  raise_smem_limit<64, 2, kAct>();
}

// Every variant's shared-memory limit, once per process on the first call (a host-side
// attribute: kept out of graph captures whatever size a captured call has).
void raise_smem_limits() {
  static const bool raised = [] {
    raise_smem_limits_of<false>();
    raise_smem_limits_of<true>();
    raise_smem_limit<16, 2, false, true>();
    raise_smem_limit<32, 2, false, true>();
    raise_smem_limit<64, 2, false, true>();
    return true;
  }();
  (void)raised;
}

template <int kTok, int kWg, bool kAct, bool kRope>
void launch(const Params& p, const CUtensorMap& tm_w, const CUtensorMap& tm_x, int64_t tiles,
            bool pdl, cudaStream_t stream) {
  const auto kernel = hgemm::hopper_gemm_kernel<kTok, kWg, kAct, kRope>;
  Params q = p;
  // As many slots as steps where they fit: the block's whole weight share is then requested
  // before its wait. More slots than steps buy nothing; fewer bytes let two blocks share an SM.
  // Two at least: with one, a slot is refilled only after the next step's wgmmas were issued
  // (deadlock).
  q.stages = std::clamp(p.steps_per_rank, 2, hgemm::max_stages(kTok, kWg));
  CHECK_LE(tiles * p.split, std::numeric_limits<int>::max());
  cudaLaunchAttribute attrs[2];
  const cudaLaunchConfig_t config = split_k_launch_config(
      dim3(static_cast<unsigned>(tiles * p.split)), dim3(hgemm::threads(kWg)),
      hgemm::smem_bytes(kTok, kWg, q.stages), static_cast<unsigned>(p.split), pdl, stream, attrs);
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, tm_w, tm_x, q));
}

// kAct: w holds 2 p.n rows ([gate; up]) and each 64 weight rows of a block are 32 output rows.
template <int kWg, bool kAct, bool kRope = false>
void dispatch_tokens(const Params& p, const TensorView& x, const TensorView& w, bool pdl,
                     cudaStream_t stream) {
  const int tok = token_tile(p.m);
  constexpr int kOut = kAct ? 32 * kWg : 64 * kWg;  // output rows of a block
  const int64_t tiles = (p.n + kOut - 1) / kOut;
  const CUtensorMap tm_w =
      swizzled_matrix_tile_map(w.data, w.size(0), w.size(1), w.stride[0], kOut, "hopper_gemm w");
  const CUtensorMap tm_x =
      swizzled_matrix_tile_map(x.data, p.m, x.size(1), x.stride[0], tok, "hopper_gemm x");
  const auto go = [&](auto t) {
    launch<decltype(t)::value, kWg, kAct, kRope>(p, tm_w, tm_x, tiles, pdl, stream);
  };
  switch (tok) {
    case 16:
      return go(std::integral_constant<int, 16>{});
    case 32:
      return go(std::integral_constant<int, 32>{});
    default:
      return go(std::integral_constant<int, 64>{});
  }
}

// The bf16 matrices of the fused entry points (out: act or qkv), each a 2-D CUDA tensor; fn
// names the entry point in the messages.
void check_bf16_matrices(const TensorView& out, const TensorView& x, const TensorView& w,
                         const std::string& fn) {
  check_cuda_tensor(x, DType::kBf16, (fn + " x").c_str());
  check_cuda_tensor(w, DType::kBf16, (fn + " w").c_str());
  check_cuda_tensor(out, DType::kBf16, (fn + " output").c_str());
  CHECK(x.ndim == 2 && w.ndim == 2 && out.ndim == 2);
}

// The checks both entry points share; kAct: w has 2 n rows.
void check_operands(const TensorView& x, const TensorView& w, int64_t m, int64_t n, int64_t k,
                    const HopperGemmConfig& cfg, bool act) {
  CHECK_MSG(hopper_gemm_supports(m, act ? 2 * n : n, k),
            "hopper_gemm: unsupported size M=" << m << " N=" << n << " K=" << k
                                               << " (or no sm_90a build / sm_90 device)");
  // TMA: 16-byte aligned bases and row strides.
  CHECK_MSG(aligned16(x.data) && x.stride[0] % 8 == 0,
            "hopper_gemm x must be 16-byte aligned with a row stride that is a multiple of 8");
  CHECK_MSG(aligned16(w.data) && w.stride[0] % 8 == 0,
            "hopper_gemm w must be 16-byte aligned with a row stride that is a multiple of 8");
  CHECK(cfg.warpgroups == 1 || cfg.warpgroups == 2);
  CHECK(cfg.split >= 1 && cfg.split <= kHopperGemmMaxSplit);
}

Params make_params(const TensorView& y, const TensorView& w, int64_t m, int64_t n, int64_t k,
                   const HopperGemmConfig& cfg) {
  Params p{};
  p.w = w.data;
  p.y = y.data;
  p.ldy = y.stride[0];
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.k_steps = static_cast<int>(k_steps(k));
  p.split = cfg.split;
  p.steps_per_rank = static_cast<int>(steps_per_rank(k, cfg.split));
  p.f32_out = y.dtype == DType::kF32;
  return p;
}

}  // namespace

void hopper_gemm(const TensorView& y, const TensorView& x, const TensorView& w,
                 const TensorView& bias, const HopperGemmConfig& cfg, cudaStream_t stream) {
  check_cuda_tensor(x, DType::kBf16, "hopper_gemm x");
  check_cuda_tensor(w, DType::kBf16, "hopper_gemm w");
  CHECK_MSG(y.dtype == DType::kBf16 || y.dtype == DType::kF32, "hopper_gemm y must be bf16 or f32");
  check_cuda_tensor(y, y.dtype, "hopper_gemm y");
  CHECK(x.ndim == 2 && w.ndim == 2 && y.ndim == 2);
  const int64_t m = x.size(0), n = w.size(0), k = w.size(1);
  CHECK_EQ(x.size(1), k);
  CHECK_EQ(y.size(0), m);
  CHECK_EQ(y.size(1), n);
  if (m == 0 || n == 0) return;
  check_operands(x, w, m, n, k, cfg, false);
  const bool has_bias = bias.data != nullptr;
  if (has_bias) {
    check_cuda_tensor(bias, DType::kBf16, "hopper_gemm bias");
    CHECK_EQ(bias.numel(), n);
  }
  raise_smem_limits();
  Params p = make_params(y, w, m, n, k, cfg);
  p.bias = has_bias ? bias.ptr<bf16>() : nullptr;
  if (cfg.warpgroups == 1)
    dispatch_tokens<1, false>(p, x, w, cfg.pdl, stream);
  else
    dispatch_tokens<2, false>(p, x, w, cfg.pdl, stream);
}

void hopper_gemm_gate_up_act(const TensorView& act, const TensorView& x, const TensorView& w,
                             const HopperGemmConfig& cfg, cudaStream_t stream) {
  check_bf16_matrices(act, x, w, "hopper_gemm_gate_up_act");
  const int64_t m = x.size(0), inter = act.size(1), k = w.size(1);
  CHECK_EQ(x.size(1), k);
  CHECK_EQ(w.size(0), 2 * inter);
  CHECK_EQ(act.size(0), m);
  if (m == 0 || inter == 0) return;
  check_operands(x, w, m, inter, k, cfg, true);
  raise_smem_limits();
  const Params p = make_params(act, w, m, inter, k, cfg);
  if (cfg.warpgroups == 1)
    dispatch_tokens<1, true>(p, x, w, cfg.pdl, stream);
  else
    dispatch_tokens<2, true>(p, x, w, cfg.pdl, stream);
}

void hopper_gemm_qkv_rope(const TensorView& qkv, const TensorView& x, const TensorView& w,
                          const QkvRopeStore& r, const HopperGemmConfig& cfg, cudaStream_t stream) {
  constexpr int64_t kD = hgemm::kRopeHeadDim;
  check_bf16_matrices(qkv, x, w, "hopper_gemm_qkv_rope");
  const int64_t m = x.size(0), n = w.size(0), k = w.size(1);
  CHECK_EQ(x.size(1), k);
  CHECK_EQ(n, (r.num_heads + 2 * r.num_kv_heads) * kD);
  CHECK_EQ(qkv.size(0), m);
  CHECK_EQ(qkv.size(1), n);
  CHECK_EQ(qkv.stride[0] % 4, 0);  // 8-byte stores of 4 dimensions
  CHECK_EQ(cfg.warpgroups, 2);     // a block is one head
  if (m == 0) return;
  check_operands(x, w, m, n, k, cfg, false);
  check_cuda_tensor(r.positions, DType::kI32, "hopper_gemm_qkv_rope positions");
  check_cuda_tensor(r.slot_mapping, DType::kI32, "hopper_gemm_qkv_rope slot_mapping");
  CHECK_EQ(r.positions.numel(), m);
  CHECK_EQ(r.slot_mapping.numel(), m);
  check_cuda_tensor(r.rope.inv_freq, DType::kF32, "hopper_gemm_qkv_rope inv_freq");
  CHECK_EQ(r.rope.inv_freq.numel(), kD / 2);
  const bool has_norm = r.q_norm_weight.data != nullptr;
  CHECK_EQ(has_norm, r.k_norm_weight.data != nullptr);
  if (has_norm) {
    check_cuda_tensor(r.q_norm_weight, DType::kBf16, "hopper_gemm_qkv_rope q_norm_weight");
    check_cuda_tensor(r.k_norm_weight, DType::kBf16, "hopper_gemm_qkv_rope k_norm_weight");
    CHECK_EQ(r.q_norm_weight.numel(), kD);
    CHECK_EQ(r.k_norm_weight.numel(), kD);
  }
  for (const TensorView* c : {&r.k_cache, &r.v_cache}) {
    check_cuda_tensor(*c, DType::kBf16, "hopper_gemm_qkv_rope k_cache / v_cache");
    CHECK(c->ndim == 4 && c->is_contiguous());
    CHECK_EQ(c->size(2), r.num_kv_heads);
    CHECK_EQ(c->size(3), kD);
  }
  raise_smem_limits();
  Params p = make_params(qkv, w, m, n, k, cfg);
  p.rope.q_w = has_norm ? r.q_norm_weight.ptr<bf16>() : nullptr;
  p.rope.k_w = has_norm ? r.k_norm_weight.ptr<bf16>() : nullptr;
  p.rope.positions = r.positions.ptr<int32_t>();
  p.rope.inv_freq = r.rope.inv_freq.ptr<float>();
  p.rope.slot_mapping = r.slot_mapping.ptr<int32_t>();
  p.rope.k_cache = r.k_cache.ptr<bf16>();
  p.rope.v_cache = r.v_cache.ptr<bf16>();
  p.rope.hq = static_cast<int>(r.num_heads);
  p.rope.hkv = static_cast<int>(r.num_kv_heads);
  p.rope.eps = r.eps;
  p.rope.attention_scaling = r.rope.attention_scaling;
  dispatch_tokens<2, false, true>(p, x, w, cfg.pdl, stream);
}

}  // namespace cuda
}  // namespace nanovllm::kernels
