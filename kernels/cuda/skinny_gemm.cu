// Launchers and configs of the decode-size GEMM (kernels/skinny_gemm.h); the kernel and its
// design are in skinny_gemm_kernel.cuh.
#include <algorithm>
#include <cstdio>
#include <limits>

#include "kernels/cuda/skinny_gemm_kernel.cuh"
#include "kernels/skinny_gemm.h"

namespace nanovllm::kernels {
namespace {

// Resident warps that cover an H100/H200 (132 SMs x ~16 warps): below this a config splits K
// further, so small weights still spread over every SM.
constexpr int64_t kTargetWarps = 2048;
constexpr size_t kMaxSmem = 100 * 1024;  // keep >= 2 blocks per SM

int row_tiles(const SkinnyGemmConfig& c) {
  return c.rows / 16;
}
int n_tiles(int64_t m) {  // 8-token MMA n-tiles the kernel is built for: 1, 2, 4 or 8
  return m <= 8 ? 1 : m <= 16 ? 2 : m <= 32 ? 4 : 8;
}
size_t smem_bytes(const SkinnyGemmConfig& c, int64_t m) {
  return cuda::skinny::smem_bytes(row_tiles(c), n_tiles(m), c.warps);
}
int64_t total_chunks(int64_t k) {
  return (k + cuda::skinny::kChunkK - 1) / cuda::skinny::kChunkK;
}
int64_t chunks_per_rank(int64_t k, int cluster) {
  return (total_chunks(k) + cluster - 1) / cluster;
}

}  // namespace

std::string SkinnyGemmConfig::name() const {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "r%dw%dc%d%s%s", rows, warps, cluster, pdl ? "+pdl" : "",
                next_after_wait ? "+after" : "");
  return buf;
}

bool skinny_next_launch_after_wait(int tp_size, SkinnyNextLaunch choice) {
  if (choice != SkinnyNextLaunch::kAuto) return choice == SkinnyNextLaunch::kAfterWait;
  return tp_size > 1;
}

bool skinny_gemm_supports(int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  return m >= 1 && m <= kSkinnyGemmMaxM && n >= 1 && n <= kIntMax - 64 && k >= 8 && k % 8 == 0 &&
         k <= kIntMax / 2 - cuda::skinny::kChunkK;
}

std::vector<SkinnyGemmConfig> skinny_gemm_configs(int64_t m, int64_t n, int64_t k, bool silu_mul) {
  std::vector<SkinnyGemmConfig> out;
  if (!skinny_gemm_supports(m, n, k)) return out;
  // Best guess first (H200 timings): 32-row blocks where they alone cover the GPU (large
  // weights, many waves of blocks), where 16-row ones would need a 4-way K split anyway and
  // more than 8 tokens share each tile, and for the fused activation (recomputed by every
  // block); else 16-row blocks (more blocks for small weights). With many tokens taller
  // blocks, as x is fetched once per block (M / rows per weight row).
  const bool big = (n + 31) / 32 * 8 >= kTargetWarps;
  const bool split_anyway = m > 8 && (n + 15) / 16 * 8 * 4 <= kTargetWarps;
  std::vector<int> rows_options =
      big || split_anyway || silu_mul ? std::vector<int>{32, 16} : std::vector<int>{16, 32};
  if (m > 16) rows_options.push_back(64);
  if (m > 32) rows_options = {32, 64};
  const std::vector<int> warps_options = m > 32 ? std::vector<int>{4, 8} : std::vector<int>{8, 4};
  for (int rows : rows_options)
    for (int warps : warps_options) {
      const int64_t tiles = (n + rows - 1) / rows;
      const auto fits = [&](int cluster) {  // every warp of every rank gets a chunk
        return cluster <= 8 && (cluster == 1 || chunks_per_rank(k, cluster) >= warps) &&
               smem_bytes({rows, warps, cluster}, m) <= kMaxSmem;
      };
      // The smallest cluster that puts kTargetWarps warps on the GPU, and twice that: timing
      // decides. Twice first where warps would still loop over >= 8 chunks each (long K).
      int first = 1;
      while (first < 8 && tiles * first * warps < kTargetWarps && fits(first * 2)) first *= 2;
      if (!fits(first)) continue;
      std::vector<int> clusters{first};
      if (fits(first * 2) && tiles * first * warps < 4 * kTargetWarps) {
        const bool long_k = chunks_per_rank(k, first * 2) >= 8 * warps;
        clusters.insert(long_k ? clusters.begin() : clusters.end(), first * 2);
      }
      for (int cluster : clusters) {
        const SkinnyGemmConfig c{rows, warps, cluster};
        if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
      }
    }
  return out;
}

namespace cuda {
namespace {

using skinny::Params;

// kFused: what the kernel fuses: kNone, kSiluMulIn (the activation of its input) or kActOut (the
// activation of its gate_up output).
enum Fused { kNone, kSiluMulIn, kActOut };

template <int kRowTiles, int kNt, typename OutT, Fused kFused>
void launch(const Params& p, int warps, bool pdl, cudaStream_t stream) {
  const auto kernel =
      skinny::skinny_gemm_kernel<kRowTiles, kNt, OutT, kFused == kSiluMulIn, kFused == kActOut>;
  constexpr size_t kMaxBytes = skinny::smem_bytes(kRowTiles, kNt, skinny::kMaxThreads / 32);
  if constexpr (kMaxBytes > 48 * 1024) {
    // Once per kernel variant, on the first (eager) call: see the header on graph capture.
    static const bool raised = [&] {
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kMaxBytes)));
      return true;
    }();
    (void)raised;
  }
  constexpr int kOutRows = kFused == kActOut ? 8 * kRowTiles : 16 * kRowTiles;  // y rows a block
  const int64_t tiles = (int64_t{p.n} + kOutRows - 1) / kOutRows;
  CHECK_LE(tiles * p.cluster, std::numeric_limits<int>::max());
  cudaLaunchAttribute attrs[2];
  const cudaLaunchConfig_t config = split_k_launch_config(
      dim3(static_cast<unsigned>(tiles * p.cluster)), dim3(static_cast<unsigned>(32 * warps)),
      skinny::smem_bytes(kRowTiles, kNt, warps), static_cast<unsigned>(p.cluster), pdl, stream,
      attrs);
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, p));
}

template <int kRowTiles, Fused kFused>
void dispatch_tokens(const Params& p, bool f32_out, int warps, bool pdl, cudaStream_t stream) {
  const auto go = [&](auto nt) {
    if constexpr (kFused != kActOut) {
      if (f32_out)
        return launch<kRowTiles, decltype(nt)::value, float, kFused>(p, warps, pdl, stream);
    }
    launch<kRowTiles, decltype(nt)::value, bf16, kFused>(p, warps, pdl, stream);
  };
  switch (n_tiles(p.m)) {
    case 1:
      return go(std::integral_constant<int, 1>{});
    case 2:
      return go(std::integral_constant<int, 2>{});
    case 4:
      return go(std::integral_constant<int, 4>{});
    default:
      return go(std::integral_constant<int, 8>{});
  }
}

template <Fused kFused>
void dispatch(const Params& p, const SkinnyGemmConfig& cfg, bool f32_out, cudaStream_t stream) {
  switch (cfg.rows) {
    case 16:
      return dispatch_tokens<1, kFused>(p, f32_out, cfg.warps, cfg.pdl, stream);
    case 32:
      return dispatch_tokens<2, kFused>(p, f32_out, cfg.warps, cfg.pdl, stream);
    case 64:
      return dispatch_tokens<4, kFused>(p, f32_out, cfg.warps, cfg.pdl, stream);
    default:
      CHECK_MSG(false, "skinny_gemm: rows " << cfg.rows << " (supported: 16, 32, 64)");
  }
}

// Checks shared by the entry points; x_width: K, or 2K for the fused gate_up input.
void run(const TensorView& y, const TensorView& x, int64_t x_width, const TensorView& w,
         const TensorView& bias, const SkinnyGemmConfig& cfg, Fused fused, cudaStream_t stream) {
  check_cuda_tensor(x, DType::kBf16, "skinny_gemm x");
  check_cuda_tensor(w, DType::kBf16, "skinny_gemm w");
  CHECK_MSG(y.dtype == DType::kBf16 || y.dtype == DType::kF32, "skinny_gemm y must be bf16 or f32");
  check_cuda_tensor(y, y.dtype, "skinny_gemm y");
  CHECK(x.ndim == 2 && w.ndim == 2 && y.ndim == 2);
  const int64_t m = x.size(0), k = w.size(1);
  // kActOut: y has one column per gate/up row pair.
  const int64_t n = fused == kActOut ? w.size(0) / 2 : w.size(0);
  if (fused == kActOut) {
    CHECK_EQ(w.size(0) % 2, 0);
    CHECK_MSG(y.dtype == DType::kBf16 && bias.data == nullptr,
              "skinny_gemm_gate_up_act writes bf16 and takes no bias");
  }
  CHECK_EQ(x.size(1), x_width);
  CHECK_EQ(y.size(0), m);
  CHECK_EQ(y.size(1), n);
  if (m == 0 || n == 0) return;
  CHECK_MSG(skinny_gemm_supports(m, w.size(0), k),
            "skinny_gemm: unsupported size M=" << m << " N=" << n << " K=" << k);
  CHECK_MSG(aligned16(x.data) && x.stride[0] % 8 == 0,
            "skinny_gemm x must be 16-byte aligned with a row stride that is a multiple of 8");
  CHECK_MSG(aligned16(w.data) && w.stride[0] % 8 == 0,
            "skinny_gemm w must be 16-byte aligned with a row stride that is a multiple of 8");
  CHECK(cfg.warps == 4 || cfg.warps == 8);
  CHECK(cfg.cluster == 1 || cfg.cluster == 2 || cfg.cluster == 4 || cfg.cluster == 8);
  const bool has_bias = bias.data != nullptr;
  if (has_bias) {
    check_cuda_tensor(bias, DType::kBf16, "skinny_gemm bias");
    CHECK_EQ(bias.numel(), n);
  }
  Params p{};
  p.x = x.ptr<bf16>();
  p.ldx = x.stride[0];
  p.w = w.ptr<bf16>();
  p.ldw = w.stride[0];
  p.bias = has_bias ? bias.ptr<bf16>() : nullptr;
  p.y = y.data;
  p.ldy = y.stride[0];
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.k = static_cast<int>(k);
  p.cluster = cfg.cluster;
  p.chunks_per_rank = static_cast<int>(chunks_per_rank(k, cfg.cluster));
  p.next_after_wait = cfg.next_after_wait ? 1 : 0;
  const bool f32_out = y.dtype == DType::kF32;
  switch (fused) {
    case kNone:
      return dispatch<kNone>(p, cfg, f32_out, stream);
    case kSiluMulIn:
      return dispatch<kSiluMulIn>(p, cfg, f32_out, stream);
    case kActOut:
      return dispatch<kActOut>(p, cfg, f32_out, stream);
  }
}

}  // namespace

void skinny_gemm(const TensorView& y, const TensorView& x, const TensorView& w,
                 const TensorView& bias, const SkinnyGemmConfig& cfg, cudaStream_t stream) {
  run(y, x, w.size(1), w, bias, cfg, kNone, stream);
}

void skinny_gemm_silu_mul(const TensorView& y, const TensorView& gate_up, const TensorView& w,
                          const TensorView& bias, const SkinnyGemmConfig& cfg,
                          cudaStream_t stream) {
  run(y, gate_up, 2 * w.size(1), w, bias, cfg, kSiluMulIn, stream);
}

void skinny_gemm_gate_up_act(const TensorView& act, const TensorView& x, const TensorView& w,
                             const SkinnyGemmConfig& cfg, cudaStream_t stream) {
  run(act, x, w.size(1), w, TensorView(), cfg, kActOut, stream);
}

}  // namespace cuda
}  // namespace nanovllm::kernels
