// CUDA elementwise kernels against the CPU reference on fresh random data. Copies
// (embedding, store_kvcache) must match bit for bit; the f32-math kernels round once to bf16
// on both sides, so they may differ by one bf16 ulp where the f32 sums round differently:
// relative L2 error < 1e-2 and max |diff| under 2 ulps of the largest output (|x| < 8 here).
#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/activation.h"
#include "kernels/embedding.h"
#include "kernels/kv_cache.h"
#include "kernels/pending_inputs.h"
#include "kernels/rms_norm.h"
#include "kernels/rotary.h"
#include "tests/kernels/cuda_test_util.h"

namespace nanovllm::test {
namespace {

TEST(EmbeddingCuda, GathersShardRowsAndZerosOthersExactly) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(1);
  for (int64_t hidden : {8, 1000, 1024, 37}) {
    const int64_t vocab = 97, start = 50, tokens = 33;
    auto w = random_bf16(vocab * hidden, rng);
    std::vector<int32_t> ids(tokens);
    std::uniform_int_distribution<int> pick(0, 200);
    for (auto& i : ids) i = pick(rng);
    ids[0] = start;              // first row of the shard
    ids[1] = start + vocab - 1;  // last row
    ids[2] = start + vocab;      // just past it
    ids[3] = start - 1;          // just before it
    std::vector<uint16_t> ref(tokens * hidden, 0xFFFF);
    kernels::cpu::embedding(host_view(ref.data(), DType::kBf16, {tokens, hidden}),
                            host_view(ids.data(), DType::kI32, {tokens}),
                            host_view(w.data(), DType::kBf16, {vocab, hidden}), start);
    DevVec<uint16_t> dw(w), dout(tokens * hidden);
    DevVec<int32_t> dids(ids);
    kernels::cuda::embedding(dout.view(DType::kBf16, {tokens, hidden}),
                             dids.view(DType::kI32, {tokens}),
                             dw.view(DType::kBf16, {vocab, hidden}), start, nullptr);
    EXPECT_EQ(dout.host(), ref) << "hidden " << hidden;
  }
}

TEST(ResolvePendingInputsCuda, MatchesCpuOnRandomBatches) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(5);
  for (int64_t rows : {1, 7, 256, 300}) {
    const int64_t num_slots = 512;
    std::vector<int32_t> last_tokens(num_slots), ids(rows), slots(rows);
    std::uniform_int_distribution<int32_t> token(0, 151935), slot(0, num_slots - 1), coin(0, 2);
    for (auto& t : last_tokens) t = token(rng);
    for (int64_t r = 0; r < rows; ++r) {
      ids[r] = coin(rng) == 0 ? token(rng) : -1;  // about two in three pending
      slots[r] = slot(rng);
    }
    std::vector<int32_t> ref = ids;
    kernels::cpu::resolve_pending_inputs(host_view(ref.data(), DType::kI32, {rows}),
                                         host_view(slots.data(), DType::kI32, {rows}),
                                         host_view(last_tokens.data(), DType::kI32, {num_slots}));
    DevVec<int32_t> dids(ids), dslots(slots), dlast(last_tokens);
    kernels::cuda::resolve_pending_inputs(dids.view(DType::kI32, {rows}),
                                          dslots.view(DType::kI32, {rows}),
                                          dlast.view(DType::kI32, {num_slots}), nullptr);
    EXPECT_EQ(dids.host(), ref) << "rows " << rows;
  }
}

TEST(RmsNormCuda, MatchesCpuOverHiddenSizesAndStrides) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(2);
  // 64-8192 keep the row in registers (1, 2 or 4 units a thread), 8448 takes the vector loop.
  for (int64_t hidden : {64, 1024, 4096, 8448, 100, 33}) {
    for (int64_t tokens : {1, 7, 512}) {
      const int64_t pitch = hidden + 8;  // strided rows
      auto x = random_bf16(tokens * pitch, rng, -4, 4);
      auto w = random_bf16(hidden, rng, 0.5, 1.5);
      std::vector<uint16_t> ref(tokens * hidden);
      TensorView hx = host_view(x.data(), DType::kBf16, {tokens, hidden});
      hx.stride[0] = pitch;
      kernels::cpu::rms_norm(host_view(ref.data(), DType::kBf16, {tokens, hidden}), hx,
                             host_view(w.data(), DType::kBf16, {hidden}), 1e-6f);
      DevVec<uint16_t> dx(x), dw(w), dout(tokens * hidden);
      TensorView vx = dx.view(DType::kBf16, {tokens, hidden});
      vx.stride[0] = pitch;
      kernels::cuda::rms_norm(dout.view(DType::kBf16, {tokens, hidden}), vx,
                              dw.view(DType::kBf16, {hidden}), 1e-6f, nullptr);
      const ErrorStats e = compare_bf16(dout.host(), ref);
      EXPECT_TRUE(e.finite);
      EXPECT_LT(e.rel_l2, 1e-2) << hidden << "x" << tokens;
      EXPECT_LT(e.max_abs, 2 * 8.0 / 128) << hidden << "x" << tokens;
    }
  }
}

TEST(FusedAddRmsNormCuda, MatchesCpuResidualExactlyAndNormClosely) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(3);
  for (int64_t hidden : {1024, 2560, 8448, 72, 30}) {  // registers, registers, loop, scalar
    for (int64_t tokens : {1, 13, 256}) {
      auto x = random_bf16(tokens * hidden, rng, -3, 3);
      auto r = random_bf16(tokens * hidden, rng, -3, 3);
      auto w = random_bf16(hidden, rng, 0.5, 1.5);
      auto x_ref = x, r_ref = r;
      kernels::cpu::fused_add_rms_norm(host_view(x_ref.data(), DType::kBf16, {tokens, hidden}),
                                       host_view(r_ref.data(), DType::kBf16, {tokens, hidden}),
                                       host_view(w.data(), DType::kBf16, {hidden}), 1e-6f);
      DevVec<uint16_t> dx(x), dr(r), dw(w);
      kernels::cuda::fused_add_rms_norm(dx.view(DType::kBf16, {tokens, hidden}),
                                        dr.view(DType::kBf16, {tokens, hidden}),
                                        dw.view(DType::kBf16, {hidden}), 1e-6f, nullptr);
      // The residual is one bf16 rounding of an exact f32 sum: identical on both sides.
      EXPECT_EQ(dr.host(), r_ref) << hidden << "x" << tokens;
      const ErrorStats e = compare_bf16(dx.host(), x_ref);
      EXPECT_TRUE(e.finite);
      EXPECT_LT(e.rel_l2, 1e-2);
      EXPECT_LT(e.max_abs, 2 * 8.0 / 128);
    }
  }
}

// A prefill step's rows (1,024 and more a call, rows of at most 2,048) take the warp-per-row
// kernel; the same rows in calls of 100 take the block-per-row one. The same bits, plain and
// fused (out, and the residual sum).
TEST(RmsNormCuda, PrefillSizedCallsGiveTheBitsOfDecodeSizedOnes) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(5);
  const int64_t tokens = 1500;
  for (int64_t hidden : {1024, 2048, 768}) {  // 4, 8 and 3 of the block kernel's warps hold units
    SCOPED_TRACE(::testing::Message() << "hidden " << hidden);
    const int64_t pitch = hidden + 16;
    const auto x = random_bf16(tokens * pitch, rng, -4, 4);
    const auto r = random_bf16(tokens * pitch, rng, -4, 4);
    const auto w = random_bf16(hidden, rng, 0.5, 1.5);
    DevVec<uint16_t> dw(w);
    const auto rows = [&](const DevVec<uint16_t>& m, int64_t t0, int64_t n) {
      TensorView v(static_cast<uint16_t*>(m.mem.get()) + t0 * pitch, DType::kBf16, {n, hidden},
                   Device::kCuda);
      v.stride[0] = pitch;
      return v;
    };
    const auto run = [&](int64_t chunk, bool fused) {
      DevVec<uint16_t> dx(x), dr(r), dout(tokens * pitch);
      for (int64_t t0 = 0; t0 < tokens; t0 += chunk) {
        const int64_t n = std::min(chunk, tokens - t0);
        if (fused)
          kernels::cuda::fused_add_rms_norm(rows(dx, t0, n), rows(dr, t0, n),
                                            dw.view(DType::kBf16, {hidden}), 1e-6f, nullptr);
        else
          kernels::cuda::rms_norm(rows(dout, t0, n), rows(dx, t0, n),
                                  dw.view(DType::kBf16, {hidden}), 1e-6f, nullptr);
      }
      return std::make_pair(fused ? dx.host() : dout.host(), dr.host());
    };
    for (bool fused : {false, true}) {
      const auto whole = run(tokens, fused), chunks = run(100, fused);
      EXPECT_EQ(whole.first, chunks.first) << "fused " << fused;
      EXPECT_EQ(whole.second, chunks.second) << "fused " << fused;
    }
  }
}

TEST(QkNormRopeCuda, MatchesCpuForHeadDims64And128WithAndWithoutNorm) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(4);
  struct Case {
    int64_t d, hq, hkv, tokens;
    bool norm;
  };
  for (const Case c : {Case{128, 16, 8, 5, true}, Case{64, 4, 2, 33, true},
                       Case{128, 8, 2, 300, false}, Case{64, 8, 1, 1, false}}) {
    // q and k are views into one qkv row [Hq*D | Hkv*D | Hkv*D], as in the model.
    const int64_t pitch = (c.hq + 2 * c.hkv) * c.d;
    auto qkv = random_bf16(c.tokens * pitch, rng, -2, 2);
    auto qw = random_bf16(c.d, rng, 0.5, 1.5), kw = random_bf16(c.d, rng, 0.5, 1.5);
    std::vector<int32_t> pos(c.tokens);
    std::uniform_int_distribution<int> pick(0, 4095);
    for (auto& p : pos) p = pick(rng);
    pos[0] = 0;
    if (c.tokens > 1) pos[1] = 4095;
    auto make = [&](void* base, Device dev, bool is_q) {
      TensorView t(static_cast<uint16_t*>(base) + (is_q ? 0 : c.hq * c.d), DType::kBf16,
                   {c.tokens, is_q ? c.hq : c.hkv, c.d}, dev);
      t.stride[0] = pitch;
      return t;
    };
    // Plain RoPE's table, theta 1e6: [D/2] f32 on each side.
    std::vector<float> inv_freq(c.d / 2);
    for (int64_t i = 0; i < c.d / 2; ++i)
      inv_freq[i] = static_cast<float>(std::pow(1e6, -2.0 * static_cast<double>(i) / c.d));
    DevVec<float> dinv_freq(inv_freq);
    const kernels::RopeFrequencies rope_cpu{host_view(inv_freq.data(), DType::kF32, {c.d / 2}),
                                            1.0f};
    const kernels::RopeFrequencies rope_cuda{dinv_freq.view(DType::kF32, {c.d / 2}), 1.0f};
    auto ref = qkv;
    const TensorView none;
    kernels::cpu::qk_norm_rope(make(ref.data(), Device::kCpu, true),
                               make(ref.data(), Device::kCpu, false),
                               c.norm ? host_view(qw.data(), DType::kBf16, {c.d}) : none,
                               c.norm ? host_view(kw.data(), DType::kBf16, {c.d}) : none,
                               host_view(pos.data(), DType::kI32, {c.tokens}), 1e-6f, rope_cpu);
    DevVec<uint16_t> dqkv(qkv), dqw(qw), dkw(kw);
    DevVec<int32_t> dpos(pos);
    TensorView none_dev;
    none_dev.device = Device::kCuda;
    kernels::cuda::qk_norm_rope(make(dqkv.mem.get(), Device::kCuda, true),
                                make(dqkv.mem.get(), Device::kCuda, false),
                                c.norm ? dqw.view(DType::kBf16, {c.d}) : none_dev,
                                c.norm ? dkw.view(DType::kBf16, {c.d}) : none_dev,
                                dpos.view(DType::kI32, {c.tokens}), 1e-6f, rope_cuda, nullptr);
    const auto got = dqkv.host();
    const ErrorStats e = compare_bf16(got, ref);
    EXPECT_TRUE(e.finite);
    // The same f32 table and angle on both sides: sincosf/norm ulps plus one bf16 rounding.
    EXPECT_LT(e.rel_l2, 1e-2) << "d " << c.d;
    EXPECT_LT(e.max_abs, 0.1) << "d " << c.d;
    // The v part of qkv is not touched.
    for (int64_t t = 0; t < c.tokens; ++t)
      for (int64_t i = (c.hq + c.hkv) * c.d; i < pitch; ++i)
        ASSERT_EQ(got[t * pitch + i], qkv[t * pitch + i]);
  }
}

TEST(SiluAndMulCuda, MatchesCpuIncludingOddWidths) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(5);
  for (int64_t inter : {3072, 1536, 37, 8}) {
    for (int64_t tokens : {1, 9, 512}) {
      auto x = random_bf16(tokens * 2 * inter, rng, -6, 6);
      std::vector<uint16_t> ref(tokens * inter);
      kernels::cpu::silu_and_mul(host_view(ref.data(), DType::kBf16, {tokens, inter}),
                                 host_view(x.data(), DType::kBf16, {tokens, 2 * inter}));
      DevVec<uint16_t> dx(x), dout(tokens * inter);
      kernels::cuda::silu_and_mul(dout.view(DType::kBf16, {tokens, inter}),
                                  dx.view(DType::kBf16, {tokens, 2 * inter}), nullptr);
      const ErrorStats e = compare_bf16(dout.host(), ref);
      EXPECT_TRUE(e.finite);
      EXPECT_LT(e.rel_l2, 1e-2);
      EXPECT_LT(e.max_abs, 2 * 36.0 / 128);  // |silu(g) * u| < 36
    }
  }
}

TEST(StoreKvcacheCuda, WritesSlotsExactlyAndSkipsMinusOne) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(6);
  for (int64_t d : {64, 128}) {
    const int64_t hkv = 4, blocks = 5, bs = 16, tokens = 40, slots = blocks * bs;
    const int64_t pitch = (8 + 2 * hkv) * d;  // k and v are views into qkv rows
    auto qkv = random_bf16(tokens * pitch, rng);
    std::vector<int32_t> slot(tokens);
    std::vector<int32_t> perm(slots);
    for (int i = 0; i < slots; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    // Distinct slots (a permutation), with the last slot of the last block used by token 1.
    std::swap(perm[1], *std::find(perm.begin(), perm.end(), slots - 1));
    for (int t = 0; t < tokens; ++t) slot[t] = t % 5 == 0 ? -1 : perm[t];
    auto cache0 = random_bf16(slots * hkv * d, rng);  // untouched slots keep these
    auto kc = cache0, vc = cache0;
    auto kv_view = [&](void* base, Device dev, int which) {
      TensorView t(static_cast<uint16_t*>(base) + (8 + which * hkv) * d, DType::kBf16,
                   {tokens, hkv, d}, dev);
      t.stride[0] = pitch;
      return t;
    };
    kernels::cpu::store_kvcache(kv_view(qkv.data(), Device::kCpu, 0),
                                kv_view(qkv.data(), Device::kCpu, 1),
                                host_view(kc.data(), DType::kBf16, {blocks, bs, hkv, d}),
                                host_view(vc.data(), DType::kBf16, {blocks, bs, hkv, d}),
                                host_view(slot.data(), DType::kI32, {tokens}));
    DevVec<uint16_t> dqkv(qkv), dkc(cache0), dvc(cache0);
    DevVec<int32_t> dslot(slot);
    kernels::cuda::store_kvcache(
        kv_view(dqkv.mem.get(), Device::kCuda, 0), kv_view(dqkv.mem.get(), Device::kCuda, 1),
        dkc.view(DType::kBf16, {blocks, bs, hkv, d}), dvc.view(DType::kBf16, {blocks, bs, hkv, d}),
        dslot.view(DType::kI32, {tokens}), nullptr);
    EXPECT_EQ(dkc.host(), kc);
    EXPECT_EQ(dvc.host(), vc);
    EXPECT_NE(kc, cache0);
  }
}

}  // namespace
}  // namespace nanovllm::test
