// hopper_gemm_qkv_rope (the qkv projection with the q/k norm, rotary and KV store in the Hopper
// decode GEMM's epilogue) against the two kernels it replaces: hopper_gemm with the same config
// followed by qk_norm_rope_store must give the same qkv and the same cache bytes, bit for bit;
// and against the CPU reference (linear, qk_norm_rope, store_kvcache) within bf16 rounding.
// Shapes: the 0.6B's heads at tp 1 and 2, the 8B's at tp 4; with and without the per-head norm;
// tokens whose slot is -1 store nothing. Skips without an sm_90 device and an sm_90a build.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/hopper_gemm.h"
#include "kernels/kv_cache.h"
#include "kernels/linear.h"
#include "kernels/rotary.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/host_tensors.h"

namespace nanovllm::test {
namespace {

using kernels::HopperGemmConfig;

constexpr int64_t kD = 128, kBlockSize = 16, kBlocks = 8;

struct Shape {
  int64_t hq, hkv, k;
  bool norm;
};

std::string describe(const Shape& s, int64_t m, const HopperGemmConfig& cfg) {
  return "Hq=" + std::to_string(s.hq) + " Hkv=" + std::to_string(s.hkv) +
         " K=" + std::to_string(s.k) + " M=" + std::to_string(m) + (s.norm ? " norm " : " ") +
         cfg.name();
}

// Host data of one case, and the device copies each path starts from.
struct Case {
  Case(const Shape& s, int64_t m, uint32_t seed) : s(s), m(m), n((s.hq + 2 * s.hkv) * kD) {
    std::mt19937 rng(seed);
    x = random_bf16(m * s.k, rng, -1.f, 1.f);
    w = random_bf16(n * s.k, rng, -0.1f, 0.1f);
    q_w = random_bf16(kD, rng, 0.5f, 1.5f);
    k_w = random_bf16(kD, rng, 0.5f, 1.5f);
    std::uniform_int_distribution<int32_t> pos(0, 40000);
    for (int64_t t = 0; t < m; ++t) positions.push_back(pos(rng));
    // Distinct slots, every fifth token without one.
    std::vector<int32_t> slots(kBlocks * kBlockSize);
    for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int32_t>(i);
    std::shuffle(slots.begin(), slots.end(), rng);
    for (int64_t t = 0; t < m; ++t) slot_mapping.push_back(t % 5 == 4 ? -1 : slots[t]);
    for (int64_t i = 0; i < kD / 2; ++i)
      inv_freq.push_back(static_cast<float>(std::pow(1e6, -2.0 * i / kD)));
  }
  Shape s;
  int64_t m, n;
  std::vector<uint16_t> x, w, q_w, k_w;
  std::vector<int32_t> positions, slot_mapping;
  std::vector<float> inv_freq;
};

// One path's device buffers: qkv [M, N] (poisoned), caches [blocks, block_size, Hkv, D]
// (poisoned) and the inputs.
struct Run {
  explicit Run(const Case& c)
      : c(c),
        x(c.x),
        w(c.w),
        q_w(c.q_w),
        k_w(c.k_w),
        positions(c.positions),
        slots(c.slot_mapping),
        inv_freq(c.inv_freq),
        qkv(c.m * c.n),
        k_cache(kBlocks * kBlockSize * c.s.hkv * kD),
        v_cache(kBlocks * kBlockSize * c.s.hkv * kD) {
    for (const DeviceMem* mem : {&qkv.mem, &k_cache.mem, &v_cache.mem})
      CUDA_CHECK(cudaMemset(mem->get(), 0xFF, mem->bytes()));
    r.num_heads = c.s.hq;
    r.num_kv_heads = c.s.hkv;
    if (c.s.norm) {
      r.q_norm_weight = q_w.view(DType::kBf16, {kD});
      r.k_norm_weight = k_w.view(DType::kBf16, {kD});
    }
    r.positions = positions.view(DType::kI32, {c.m});
    r.eps = 1e-6f;
    r.rope = {inv_freq.view(DType::kF32, {kD / 2}), 1.0f};
    r.k_cache = k_cache.view(DType::kBf16, {kBlocks, kBlockSize, c.s.hkv, kD});
    r.v_cache = v_cache.view(DType::kBf16, {kBlocks, kBlockSize, c.s.hkv, kD});
    r.slot_mapping = slots.view(DType::kI32, {c.m});
  }
  TensorView heads(int64_t first, int64_t num) const {
    TensorView v(static_cast<uint16_t*>(qkv.mem.get()) + first * kD, DType::kBf16, {c.m, num, kD},
                 Device::kCuda);
    v.stride[0] = c.n;
    return v;
  }
  const Case& c;
  DevVec<uint16_t> x, w, q_w, k_w;
  DevVec<int32_t> positions, slots;
  DevVec<float> inv_freq;
  DevVec<uint16_t> qkv, k_cache, v_cache;
  kernels::QkvRopeStore r;
};

// The CPU reference: linear, then qk_norm_rope in place, then store_kvcache.
struct Reference {
  explicit Reference(const Case& c)
      : qkv(c.m * c.n),
        k_cache(kBlocks * kBlockSize * c.s.hkv * kD, 0xFFFF),
        v_cache(kBlocks * kBlockSize * c.s.hkv * kD, 0xFFFF) {
    auto w = c.w, x = c.x, q_w = c.q_w, k_w = c.k_w;
    auto positions = c.positions, slots = c.slot_mapping;
    auto inv_freq = c.inv_freq;
    kernels::cpu::linear(host_view(qkv.data(), DType::kBf16, {c.m, c.n}),
                         host_view(x.data(), DType::kBf16, {c.m, c.s.k}),
                         host_view(w.data(), DType::kBf16, {c.n, c.s.k}), TensorView(),
                         reference_threads());
    const auto heads = [&](int64_t first, int64_t num) {
      TensorView v(qkv.data() + first * kD, DType::kBf16, {c.m, num, kD}, Device::kCpu);
      v.stride[0] = c.n;
      return v;
    };
    const TensorView none;
    kernels::cpu::qk_norm_rope(heads(0, c.s.hq), heads(c.s.hq, c.s.hkv),
                               c.s.norm ? host_view(q_w.data(), DType::kBf16, {kD}) : none,
                               c.s.norm ? host_view(k_w.data(), DType::kBf16, {kD}) : none,
                               host_view(positions.data(), DType::kI32, {c.m}), 1e-6f,
                               {host_view(inv_freq.data(), DType::kF32, {kD / 2}), 1.0f});
    kernels::cpu::store_kvcache(
        heads(c.s.hq, c.s.hkv), heads(c.s.hq + c.s.hkv, c.s.hkv),
        host_view(k_cache.data(), DType::kBf16, {kBlocks, kBlockSize, c.s.hkv, kD}),
        host_view(v_cache.data(), DType::kBf16, {kBlocks, kBlockSize, c.s.hkv, kD}),
        host_view(slots.data(), DType::kI32, {c.m}));
  }
  std::vector<uint16_t> qkv, k_cache, v_cache;
};

// Elements whose bits differ.
int64_t differing(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

// Elements off the reference by more than bf16 rounding of the larger of the two values (the
// GEMM's sum order differs from the CPU's), the poison counted as off.
int64_t off_reference(const std::vector<uint16_t>& got, const std::vector<uint16_t>& ref) {
  int64_t off = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (ref[i] == 0xFFFF) {  // a slot nothing stores to keeps its poison
      off += got[i] != 0xFFFF;
      continue;
    }
    const double a = bf16_to_float(got[i]), b = bf16_to_float(ref[i]);
    off += !(std::abs(a - b) <= std::max(std::abs(a), std::abs(b)) / 64 + 1e-2);
  }
  return off;
}

void check_shape(const Shape& s, int64_t m, uint32_t seed) {
  const Case c(s, m, seed);
  const Reference ref(c);
  std::vector<HopperGemmConfig> configs;
  for (int split : {1, 2, 4, 8}) configs.push_back({2, split});
  configs.push_back(kernels::hopper_gemm_qkv_rope_config(m, c.n, s.k));
  for (HopperGemmConfig cfg : configs) {
    const std::string what = describe(s, m, cfg);
    Run apart(c), fused(c);
    kernels::cuda::hopper_gemm(apart.qkv.view(DType::kBf16, {m, c.n}),
                               apart.x.view(DType::kBf16, {m, s.k}),
                               apart.w.view(DType::kBf16, {c.n, s.k}), TensorView(), cfg, nullptr);
    const kernels::QkvRopeStore& r = apart.r;
    kernels::cuda::qk_norm_rope_store(apart.heads(0, s.hq), apart.heads(s.hq, s.hkv),
                                      apart.heads(s.hq + s.hkv, s.hkv), r.q_norm_weight,
                                      r.k_norm_weight, r.positions, r.eps, r.rope, r.k_cache,
                                      r.v_cache, r.slot_mapping, nullptr);
    kernels::cuda::hopper_gemm_qkv_rope(
        fused.qkv.view(DType::kBf16, {m, c.n}), fused.x.view(DType::kBf16, {m, s.k}),
        fused.w.view(DType::kBf16, {c.n, s.k}), fused.r, cfg, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(differing(fused.qkv.host(), apart.qkv.host()), 0)
        << what << ": qkv, of the two kernels'";
    EXPECT_EQ(differing(fused.k_cache.host(), apart.k_cache.host()), 0) << what << ": k cache";
    EXPECT_EQ(differing(fused.v_cache.host(), apart.v_cache.host()), 0) << what << ": v cache";
    EXPECT_EQ(off_reference(fused.qkv.host(), ref.qkv), 0) << what << ": qkv off the CPU";
    EXPECT_EQ(off_reference(fused.k_cache.host(), ref.k_cache), 0) << what << ": k cache off";
    EXPECT_EQ(off_reference(fused.v_cache.host(), ref.v_cache), 0) << what << ": v cache off";
  }
}

#define SKIP_UNLESS_QKV_ROPE()                                                          \
  do {                                                                                  \
    SKIP_WITHOUT_CUDA();                                                                \
    if (!kernels::hopper_gemm_supports(1, 64, 64))                                      \
      GTEST_SKIP() << "hopper_gemm_qkv_rope needs an sm_90 device and an sm_90a build"; \
  } while (0)

TEST(HopperGemmQkvRope, IsTheGemmThenQkNormRopeStoreBitForBitOnThe06BHeads) {
  SKIP_UNLESS_QKV_ROPE();
  for (int64_t m : {1, 9, 16, 17, 32, 33, 64})
    check_shape({16, 8, 1024, true}, m, static_cast<uint32_t>(10 + m));
}

TEST(HopperGemmQkvRope, TensorParallelShardsAndNoNorm) {
  SKIP_UNLESS_QKV_ROPE();
  for (int64_t m : {5, 24}) {
    check_shape({8, 4, 1024, true}, m, static_cast<uint32_t>(100 + m));  // 0.6B at tp 2
    check_shape({8, 2, 4096, true}, m, static_cast<uint32_t>(200 + m));  // 8B at tp 4
    check_shape({4, 2, 256, false}, m, static_cast<uint32_t>(300 + m));  // no q/k norm
  }
}

TEST(HopperGemmQkvRope, ServesOnlyHeadDim128BfloatCachesWithoutBias) {
  SKIP_UNLESS_QKV_ROPE();
  kernels::QkvRopeStore r;
  r.num_heads = 16;
  r.num_kv_heads = 8;
  r.k_cache.dtype = r.v_cache.dtype = DType::kBf16;
  EXPECT_TRUE(kernels::hopper_gemm_qkv_rope_supports(16, 4096, 1024, r, false));
  EXPECT_FALSE(kernels::hopper_gemm_qkv_rope_supports(16, 4096, 1024, r, true));   // a bias
  EXPECT_FALSE(kernels::hopper_gemm_qkv_rope_supports(16, 2048, 1024, r, false));  // head dim 64
  EXPECT_FALSE(kernels::hopper_gemm_qkv_rope_supports(65, 4096, 1024, r, false));  // 65 tokens
  r.k_cache.dtype = r.v_cache.dtype = DType::kFp8E4M3;
  EXPECT_FALSE(kernels::hopper_gemm_qkv_rope_supports(16, 4096, 1024, r, false));  // fp8 cache
}

}  // namespace
}  // namespace nanovllm::test
