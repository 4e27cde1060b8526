// The fused CUDA q/k norm + rotary + KV store (kernels::cuda::qk_norm_rope_store) against the
// CPU reference pair it replaces (cpu::qk_norm_rope, then cpu::store_kvcache), on qkv rows
// laid out as in the model (q | k | v heads, token stride possibly past the three).
// Tolerances: both sides read the same f32 table and form the same f32 angle (one multiply),
// so they differ only by sincosf's and the norm's few f32 ulps before one rounding to bf16:
// at most one bf16 step (1/32 below 8, and outputs here stay below 5). Copies (v, and every
// cache row no token addresses) must be exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/kv_cache.h"
#include "kernels/rotary.h"
#include "tests/kernels/cuda_test_util.h"

namespace nanovllm::test {
namespace {

struct Case {
  int64_t d, hq, hkv, tokens;
  bool norm;
  int64_t pad;  // extra elements per qkv row past the q, k and v heads
  int max_pos;
  bool yarn = false;  // a YaRN-shaped table and mscale instead of plain theta = 1e6
};

// The rotary table on both sides: plain theta^(-2i/D), or YaRN's shape (Qwen3 128k: theta
// 1e6, factor 4, mscale 0.1 ln 4 + 1): plain below a quarter of the pairs, plain / 4 above
// three quarters, a linear blend between. The kernels take any table; this one is built
// here because layers/ (rope_frequencies.h, tested on its own) is not linked.
struct RopeTables {
  RopeTables(int64_t d, bool yarn) : host(make(d, yarn)), dev(host) {
    scaling = yarn ? static_cast<float>(0.1 * std::log(4.0) + 1.0) : 1.0f;
  }
  static std::vector<float> make(int64_t d, bool yarn) {
    std::vector<float> t(d / 2);  // [D/2]
    const double low = d / 8.0, high = 3.0 * d / 8.0;
    for (int64_t i = 0; i < d / 2; ++i) {
      const double plain = std::pow(1e6, -2.0 * static_cast<double>(i) / d);
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      t[i] = static_cast<float>(yarn ? plain * (1.0 - ramp) + plain / 4.0 * ramp : plain);
    }
    return t;
  }
  kernels::RopeFrequencies cpu() {
    return {host_view(host.data(), DType::kF32, {static_cast<int64_t>(host.size())}), scaling};
  }
  kernels::RopeFrequencies cuda() const {
    return {dev.view(DType::kF32, {static_cast<int64_t>(host.size())}), scaling};
  }
  std::vector<float> host;  // [D/2]
  DevVec<float> dev;        // [D/2]
  float scaling;
};

struct Layout {
  int64_t d, hq, hkv, tokens, pitch;
  // A [T, heads, D] view of qkv starting at head `first_head` (q heads first, then k, then v).
  TensorView heads(void* base, Device dev, int64_t first_head, int64_t num) const {
    TensorView t(static_cast<uint16_t*>(base) + first_head * d, DType::kBf16, {tokens, num, d},
                 dev);
    t.stride[0] = pitch;
    return t;
  }
};

void run_case(const Case& c, std::mt19937& rng) {
  SCOPED_TRACE(::testing::Message()
               << "d " << c.d << " hq " << c.hq << " hkv " << c.hkv << " T " << c.tokens << " norm "
               << c.norm << " pad " << c.pad << " max_pos " << c.max_pos << " yarn " << c.yarn);
  const Layout l{c.d, c.hq, c.hkv, c.tokens, (c.hq + 2 * c.hkv) * c.d + c.pad};
  const int64_t bs = 16, blocks = (c.tokens + bs - 1) / bs + 2, slots = blocks * bs;
  const int64_t row = c.hkv * c.d;  // one cache slot
  auto qkv = random_bf16(c.tokens * l.pitch, rng, -2, 2);
  auto qw = random_bf16(c.d, rng, 0.5, 1.5), kw = random_bf16(c.d, rng, 0.5, 1.5);
  std::vector<int32_t> pos(c.tokens);
  std::uniform_int_distribution<int> pick_pos(0, c.max_pos);
  for (auto& p : pos) p = pick_pos(rng);
  pos[0] = 0;
  if (c.tokens > 1) pos[c.tokens - 1] = c.max_pos;
  // Distinct slots (a permutation), every third token -1; the last slot of the cache is used.
  std::vector<int32_t> perm(slots), slot(c.tokens);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::swap(perm[c.tokens > 1 ? 1 : 0], *std::find(perm.begin(), perm.end(), slots - 1));
  for (int64_t t = 0; t < c.tokens; ++t) slot[t] = t % 3 == 2 ? -1 : perm[t];
  // Poisoned caches: rows no token addresses must come back unchanged.
  const auto kc0 = random_bf16(slots * row, rng, -100, 100);
  const auto vc0 = random_bf16(slots * row, rng, -100, 100);

  RopeTables rope(c.d, c.yarn);
  // Reference: the CPU pair.
  auto ref = qkv, kc_ref = kc0, vc_ref = vc0;
  const TensorView none;
  kernels::cpu::qk_norm_rope(l.heads(ref.data(), Device::kCpu, 0, c.hq),
                             l.heads(ref.data(), Device::kCpu, c.hq, c.hkv),
                             c.norm ? host_view(qw.data(), DType::kBf16, {c.d}) : none,
                             c.norm ? host_view(kw.data(), DType::kBf16, {c.d}) : none,
                             host_view(pos.data(), DType::kI32, {c.tokens}), 1e-6f, rope.cpu());
  kernels::cpu::store_kvcache(l.heads(ref.data(), Device::kCpu, c.hq, c.hkv),
                              l.heads(ref.data(), Device::kCpu, c.hq + c.hkv, c.hkv),
                              host_view(kc_ref.data(), DType::kBf16, {blocks, bs, c.hkv, c.d}),
                              host_view(vc_ref.data(), DType::kBf16, {blocks, bs, c.hkv, c.d}),
                              host_view(slot.data(), DType::kI32, {c.tokens}));

  // The fused kernel, through the dispatcher the layer calls.
  DevVec<uint16_t> dqkv(qkv), dqw(qw), dkw(kw), dkc(kc0), dvc(vc0);
  DevVec<int32_t> dpos(pos), dslot(slot);
  TensorView none_dev;
  none_dev.device = Device::kCuda;
  ExecContext ctx;
  void* base = dqkv.mem.get();
  kernels::qk_norm_rope_store(
      l.heads(base, Device::kCuda, 0, c.hq), l.heads(base, Device::kCuda, c.hq, c.hkv),
      l.heads(base, Device::kCuda, c.hq + c.hkv, c.hkv),
      c.norm ? dqw.view(DType::kBf16, {c.d}) : none_dev,
      c.norm ? dkw.view(DType::kBf16, {c.d}) : none_dev, dpos.view(DType::kI32, {c.tokens}), 1e-6f,
      rope.cuda(), dkc.view(DType::kBf16, {blocks, bs, c.hkv, c.d}),
      dvc.view(DType::kBf16, {blocks, bs, c.hkv, c.d}), dslot.view(DType::kI32, {c.tokens}), ctx);
  const auto got = dqkv.host(), kc = dkc.host(), vc = dvc.host();

  // q and k in place, close to the reference; v and the row padding untouched.
  std::vector<uint16_t> got_qk, ref_qk;
  for (int64_t t = 0; t < c.tokens; ++t) {
    const int64_t r = t * l.pitch, qk = (c.hq + c.hkv) * c.d;
    got_qk.insert(got_qk.end(), got.begin() + r, got.begin() + r + qk);
    ref_qk.insert(ref_qk.end(), ref.begin() + r, ref.begin() + r + qk);
    for (int64_t i = qk; i < l.pitch; ++i)
      ASSERT_EQ(got[r + i], qkv[r + i]) << "token " << t << " element " << i;
  }
  const ErrorStats e = compare_bf16(got_qk, ref_qk);
  EXPECT_TRUE(e.finite);
  EXPECT_LT(e.rel_l2, 4e-3);
  EXPECT_LE(e.max_abs, 1.0 / 32);

  // v_cache: exactly the reference's (stored rows are copies, the rest is the poison).
  EXPECT_EQ(vc, vc_ref);
  // k_cache: the rows of tokens with a slot hold exactly that token's k as left in qkv (one
  // rounding, written twice) and are close to the reference; every other row is the poison.
  std::vector<bool> addressed(slots, false);
  std::vector<uint16_t> got_k, ref_k;
  for (int64_t t = 0; t < c.tokens; ++t) {
    if (slot[t] < 0) continue;
    addressed[slot[t]] = true;
    const auto k_in_qkv = got.begin() + t * l.pitch + c.hq * c.d;
    const auto k_row = kc.begin() + slot[t] * row;
    ASSERT_TRUE(std::equal(k_row, k_row + row, k_in_qkv)) << "token " << t;
    got_k.insert(got_k.end(), k_row, k_row + row);
    ref_k.insert(ref_k.end(), kc_ref.begin() + slot[t] * row, kc_ref.begin() + (slot[t] + 1) * row);
  }
  for (int64_t s = 0; s < slots; ++s) {
    if (addressed[s]) continue;
    ASSERT_TRUE(std::equal(kc.begin() + s * row, kc.begin() + (s + 1) * row, kc0.begin() + s * row))
        << "slot " << s << " was written";
  }
  const ErrorStats ek = compare_bf16(got_k, ref_k);
  EXPECT_TRUE(ek.finite);
  EXPECT_LT(ek.rel_l2, 4e-3);
  EXPECT_LE(ek.max_abs, 1.0 / 32);
}

TEST(QkNormRopeStoreCuda, MatchesCpuRopeThenStoreForQwen3HeadCounts) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(11);
  // Qwen3 0.6B/1.7B (16/8), 4B/8B (32/8), their tensor-parallel shards (8/4, 4/2, 2/1), and
  // GQA groups of 4 and 8.
  for (const Case c : {Case{128, 16, 8, 37, true, 0, 40000}, Case{128, 32, 8, 300, true, 0, 40000},
                       Case{128, 8, 4, 1, true, 0, 40000}, Case{128, 4, 2, 64, true, 8, 4095},
                       Case{128, 2, 1, 129, true, 24, 40000}, Case{64, 16, 2, 50, true, 0, 40000},
                       Case{64, 8, 1, 17, true, 8, 40000}})
    run_case(c, rng);
}

TEST(QkNormRopeStoreCuda, MatchesCpuWithoutNormWeightsAndWithPaddedRows) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(12);
  for (const Case c :
       {Case{128, 16, 8, 33, false, 0, 40000}, Case{128, 8, 2, 200, false, 40, 40000},
        Case{64, 4, 4, 9, false, 8, 40000}, Case{64, 32, 8, 1, false, 0, 100}})
    run_case(c, rng);
}

// Qwen3 at 128k context: a YaRN table (inv_freq from global memory) and mscale on cos/sin,
// positions up to 131071 (angles ~1.3e5 rad: sincosf's slow, exact range reduction).
TEST(QkNormRopeStoreCuda, MatchesCpuWithYarnTableAndScalingUpTo128kPositions) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(14);
  for (const Case c :
       {Case{128, 16, 8, 300, true, 0, 131071, true}, Case{128, 8, 4, 1, true, 0, 131071, true},
        Case{128, 32, 8, 129, false, 24, 131071, true}, Case{64, 8, 1, 77, true, 8, 131071, true},
        Case{128, 4, 2, 200, true, 0, 131071, false}})
    run_case(c, rng);
}

// --kv-cache-dtype fp8 / int8 (dt): the kernel's cache bytes and row exponents (scale codes)
// are exactly what the CPU store_kvcache writes for the k the kernel left in qkv (rotated in
// place) and for v, whose rows are scaled by 2^-12 .. 2^12 so that exponents range widely;
// slots nobody addresses keep their poison.
void check_8bit_store(DType dt) {
  std::mt19937 rng(15);
  for (const Case c : {Case{128, 16, 8, 37, true, 0, 40000}, Case{64, 8, 2, 50, false, 8, 4000},
                       Case{128, 40, 8, 129, true, 24, 131071}}) {
    SCOPED_TRACE(::testing::Message() << "d " << c.d << " hq " << c.hq << " hkv " << c.hkv);
    const Layout l{c.d, c.hq, c.hkv, c.tokens, (c.hq + 2 * c.hkv) * c.d + c.pad};
    const int64_t bs = 16, blocks = (c.tokens + bs - 1) / bs + 2, slots = blocks * bs;
    auto qkv = random_bf16(c.tokens * l.pitch, rng, -2, 2);
    std::uniform_int_distribution<int> shift(-12, 12);
    for (int64_t t = 0; t < c.tokens; ++t)
      for (int64_t h = 0; h < c.hkv; ++h) {
        const int s = shift(rng);
        uint16_t* v = qkv.data() + t * l.pitch + (c.hq + c.hkv + h) * c.d;
        for (int64_t i = 0; i < c.d; ++i) v[i] = float_to_bf16(std::ldexp(bf16_to_float(v[i]), s));
      }
    auto qw = random_bf16(c.d, rng, 0.5, 1.5), kw = random_bf16(c.d, rng, 0.5, 1.5);
    std::vector<int32_t> pos(c.tokens), perm(slots), slot(c.tokens);
    for (int64_t t = 0; t < c.tokens; ++t) pos[t] = static_cast<int32_t>((t * 7919) % c.max_pos);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t t = 0; t < c.tokens; ++t) slot[t] = t % 3 == 2 ? -1 : perm[t];
    std::vector<uint8_t> poison8(slots * c.hkv * c.d, 0x5a);
    std::vector<int8_t> poison_e(slots * c.hkv, 77);

    DevVec<uint16_t> dqkv(qkv), dqw(qw), dkw(kw);
    DevVec<uint8_t> dkc(poison8), dvc(poison8);
    DevVec<int8_t> dks(poison_e), dvs(poison_e);
    DevVec<int32_t> dpos(pos), dslot(slot);
    const RopeTables rope(c.d, false);
    void* base = dqkv.mem.get();
    TensorView none_dev;
    none_dev.device = Device::kCuda;
    kernels::cuda::qk_norm_rope_store(
        l.heads(base, Device::kCuda, 0, c.hq), l.heads(base, Device::kCuda, c.hq, c.hkv),
        l.heads(base, Device::kCuda, c.hq + c.hkv, c.hkv),
        c.norm ? dqw.view(DType::kBf16, {c.d}) : none_dev,
        c.norm ? dkw.view(DType::kBf16, {c.d}) : none_dev, dpos.view(DType::kI32, {c.tokens}),
        1e-6f, rope.cuda(), dkc.view(dt, {blocks, bs, c.hkv, c.d}),
        dvc.view(dt, {blocks, bs, c.hkv, c.d}), dslot.view(DType::kI32, {c.tokens}), nullptr,
        dks.view(DType::kI8, {blocks, c.hkv, bs}), dvs.view(DType::kI8, {blocks, c.hkv, bs}));
    auto got = dqkv.host();

    auto kc_ref = poison8, vc_ref = poison8;
    auto ks_ref = poison_e, vs_ref = poison_e;
    kernels::cpu::store_kvcache(l.heads(got.data(), Device::kCpu, c.hq, c.hkv),
                                l.heads(got.data(), Device::kCpu, c.hq + c.hkv, c.hkv),
                                host_view(kc_ref.data(), dt, {blocks, bs, c.hkv, c.d}),
                                host_view(vc_ref.data(), dt, {blocks, bs, c.hkv, c.d}),
                                host_view(slot.data(), DType::kI32, {c.tokens}),
                                host_view(ks_ref.data(), DType::kI8, {blocks, c.hkv, bs}),
                                host_view(vs_ref.data(), DType::kI8, {blocks, c.hkv, bs}));
    EXPECT_EQ(dkc.host(), kc_ref);
    EXPECT_EQ(dvc.host(), vc_ref);
    EXPECT_EQ(dks.host(), ks_ref);
    EXPECT_EQ(dvs.host(), vs_ref);
    int lo = 127, hi = -127;  // the written v exponents (the poison is 77)
    for (int8_t e : vs_ref)
      if (e != 77) lo = std::min<int>(lo, e), hi = std::max<int>(hi, e);
    EXPECT_GT(hi - lo, 16) << "the v rows' exponents should spread";
  }
}

TEST(QkNormRopeStoreCuda, Fp8StoreWritesTheCpuEncodingOfTheRotatedRows) {
  SKIP_WITHOUT_CUDA();
  check_8bit_store(DType::kFp8E4M3);
}

TEST(QkNormRopeStoreCuda, Int8StoreWritesTheCpuEncodingOfTheRotatedRows) {
  SKIP_WITHOUT_CUDA();
  check_8bit_store(DType::kI8);
}

// A prefill step's tokens (1,024 and more a call) take the block-per-token kernel, whose warps
// reuse one token's rotary angles for every head they take; the same rows in calls of 100
// tokens take the warp-per-item kernel. Both must leave the same bits in q, k and the caches.
void check_many_tokens_same_bits(DType cache, const Case& c) {
  SCOPED_TRACE(::testing::Message() << "cache " << dtype_name(cache) << " d " << c.d << " hq "
                                    << c.hq << " hkv " << c.hkv << " norm " << c.norm);
  std::mt19937 rng(16);
  const Layout l{c.d, c.hq, c.hkv, c.tokens, (c.hq + 2 * c.hkv) * c.d + c.pad};
  const int64_t bs = 16, blocks = c.tokens / bs + 2, slots = blocks * bs;
  const bool eight = cache != DType::kBf16;
  const auto qkv = random_bf16(c.tokens * l.pitch, rng, -2, 2);
  const auto qw = random_bf16(c.d, rng, 0.5, 1.5), kw = random_bf16(c.d, rng, 0.5, 1.5);
  std::vector<int32_t> pos(c.tokens), perm(slots), slot(c.tokens);
  std::uniform_int_distribution<int> pick_pos(0, c.max_pos);
  for (auto& p : pos) p = pick_pos(rng);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int64_t t = 0; t < c.tokens; ++t) slot[t] = t % 3 == 2 ? -1 : perm[t];
  const std::vector<uint16_t> cache0(slots * c.hkv * c.d, 0x5a5a);  // bf16, or two 8-bit rows
  const std::vector<int8_t> scale0(slots * c.hkv, 77);
  const RopeTables rope(c.d, c.yarn);
  struct Out {
    std::vector<uint16_t> qkv, kc, vc;
    std::vector<int8_t> ks, vs;
  };
  const auto run = [&](int64_t chunk) {
    DevVec<uint16_t> dqkv(qkv), dqw(qw), dkw(kw), dkc(cache0), dvc(cache0);
    DevVec<int8_t> dks(scale0), dvs(scale0);
    DevVec<int32_t> dpos(pos), dslot(slot);
    TensorView none_dev;
    none_dev.device = Device::kCuda;
    const DType dt = eight ? cache : DType::kBf16;  // an 8-bit cache uses half the buffer
    for (int64_t t0 = 0; t0 < c.tokens; t0 += chunk) {
      const int64_t n = std::min(chunk, c.tokens - t0);
      const Layout part{c.d, c.hq, c.hkv, n, l.pitch};
      void* base = static_cast<uint16_t*>(dqkv.mem.get()) + t0 * l.pitch;
      kernels::cuda::qk_norm_rope_store(
          part.heads(base, Device::kCuda, 0, c.hq), part.heads(base, Device::kCuda, c.hq, c.hkv),
          part.heads(base, Device::kCuda, c.hq + c.hkv, c.hkv),
          c.norm ? dqw.view(DType::kBf16, {c.d}) : none_dev,
          c.norm ? dkw.view(DType::kBf16, {c.d}) : none_dev,
          TensorView(static_cast<int32_t*>(dpos.mem.get()) + t0, DType::kI32, {n}, Device::kCuda),
          1e-6f, rope.cuda(), dkc.view(dt, {blocks, bs, c.hkv, c.d}),
          dvc.view(dt, {blocks, bs, c.hkv, c.d}),
          TensorView(static_cast<int32_t*>(dslot.mem.get()) + t0, DType::kI32, {n}, Device::kCuda),
          nullptr, eight ? dks.view(DType::kI8, {blocks, c.hkv, bs}) : TensorView(),
          eight ? dvs.view(DType::kI8, {blocks, c.hkv, bs}) : TensorView());
    }
    return Out{dqkv.host(), dkc.host(), dvc.host(), dks.host(), dvs.host()};
  };
  const Out whole = run(c.tokens), chunks = run(100);
  EXPECT_EQ(whole.qkv, chunks.qkv);
  EXPECT_EQ(whole.kc, chunks.kc);
  EXPECT_EQ(whole.vc, chunks.vc);
  EXPECT_EQ(whole.ks, chunks.ks);
  EXPECT_EQ(whole.vs, chunks.vs);
  EXPECT_NE(whole.qkv, qkv);
  EXPECT_NE(whole.vc, cache0);
}

TEST(QkNormRopeStoreCuda, PrefillSizedCallsGiveTheBitsOfDecodeSizedOnes) {
  SKIP_WITHOUT_CUDA();
  check_many_tokens_same_bits(DType::kBf16, Case{128, 16, 8, 1100, true, 0, 40000});
  check_many_tokens_same_bits(DType::kBf16, Case{128, 32, 8, 1030, false, 24, 131071, true});
  check_many_tokens_same_bits(DType::kBf16, Case{64, 8, 2, 1024, true, 8, 4000});
  check_many_tokens_same_bits(DType::kFp8E4M3, Case{128, 16, 8, 1100, true, 0, 40000});
  check_many_tokens_same_bits(DType::kI8, Case{128, 16, 8, 1100, true, 0, 40000});
}

TEST(QkNormRopeStoreCuda, AllSlotsMinusOneStoresNothingButStillRotates) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(13);
  const int64_t d = 128, hq = 16, hkv = 8, tokens = 8, pitch = (hq + 2 * hkv) * d;
  const int64_t slots = 32, row = hkv * d;
  auto qkv = random_bf16(tokens * pitch, rng, -2, 2);
  std::vector<int32_t> pos(tokens, 7), slot(tokens, -1);
  const auto cache0 = random_bf16(slots * row, rng);
  DevVec<uint16_t> dqkv(qkv), dkc(cache0), dvc(cache0);
  DevVec<int32_t> dpos(pos), dslot(slot);
  const Layout l{d, hq, hkv, tokens, pitch};
  const RopeTables rope(d, false);
  void* base = dqkv.mem.get();
  TensorView none_dev;
  none_dev.device = Device::kCuda;
  kernels::cuda::qk_norm_rope_store(
      l.heads(base, Device::kCuda, 0, hq), l.heads(base, Device::kCuda, hq, hkv),
      l.heads(base, Device::kCuda, hq + hkv, hkv), none_dev, none_dev,
      dpos.view(DType::kI32, {tokens}), 1e-6f, rope.cuda(), dkc.view(DType::kBf16, {2, 16, hkv, d}),
      dvc.view(DType::kBf16, {2, 16, hkv, d}), dslot.view(DType::kI32, {tokens}), nullptr);
  EXPECT_EQ(dkc.host(), cache0);
  EXPECT_EQ(dvc.host(), cache0);
  EXPECT_NE(dqkv.host(), qkv);  // q and k were still rotated in place
}

}  // namespace
}  // namespace nanovllm::test
