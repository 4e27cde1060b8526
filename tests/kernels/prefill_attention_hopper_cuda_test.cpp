// The Hopper prefill kernel (PrefillKernel::kHopper: TMA tile loads, wgmma, warp-specialised
// pipeline; head dim 128 only) against the CPU reference and against the kMma kernel it replaces
// by default, on random paged caches with shuffled block tables: GQA groups, ragged batches,
// chunks over cached prefixes off the tile and block edges, the causal diagonal at the 128-query
// tile edges, block sizes that do not divide the 128-key tile, the fused-qkv q view and an
// 8k-token prompt; plus which kernel the default prefill_attention(p, stream) picks.
// Every Hopper test skips after the no-GPU skip where hopper_prefill_supports() is false for its
// shape: the shapes here are all ones the kernel serves, so that means no sm_90 device (or a
// build without sm_90a code; DefaultKernelIsHopperExactlyOnSm90 fails if an sm_90 one refuses).
//
// Tolerances, against the CPU: rel L2 < 1e-2 and max |diff| < 2e-2, attention_cuda_test.cpp's
// bounds and reasoning (the kernel rounds P to bf16 for the tensor cores, relative 2^-9 per
// weight averaging out over keys, and rounds the output once; a wrong index or mask is O(1)).
// Against kMma: the same bounds, not tighter. Both kernels round P to bf16, but each relative to
// its own running row maximum (kMma walks 64-key tiles, Hopper 128), so their roundings are
// independent and their difference is about sqrt(2) times either one's error against the exact
// result, not less than its error against the CPU (whose weights stay f32). A tighter bound
// would pin rounding order, not correctness; these still leave > 3x margin over the ~3e-3
// expected and catch every O(1) indexing, masking or pipeline error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "kernels/attention.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/paged_attention_case.h"

namespace nanovllm::test {
namespace {

using kernels::cuda::hopper_prefill_supports;
using kernels::cuda::prefill_kernel_name;
using kernels::cuda::PrefillKernel;

constexpr int64_t kHeadDim = 128;  // the one head dim the Hopper kernel serves

struct Heads {
  int64_t hq = 16, hkv = 8, bs = 256;  // Qwen3-0.6B's attention by default
};

std::string heads_name(Heads h, int64_t d = kHeadDim) {
  return "d" + std::to_string(d) + " " + std::to_string(h.hq) + "q/" + std::to_string(h.hkv) +
         "kv bs" + std::to_string(h.bs);
}

std::string seqs_name(const std::vector<Seq>& seqs) {
  std::string s = "(q_len, k_len)";
  for (const Seq& q : seqs)
    s += " (" + std::to_string(q.q_len) + ", " + std::to_string(q.k_len) + ")";
  return s;
}

// "sm_XY" of device 0, for the skip messages; "sm_90" is the one the Hopper kernel needs.
std::string device_arch() {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "unknown device";
  return "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
}

// In a TEST body: skips unless the Hopper kernel serves this shape on this machine.
#define SKIP_UNLESS_HOPPER_SERVES(heads)                                                          \
  do {                                                                                            \
    SKIP_WITHOUT_CUDA();                                                                          \
    if (!hopper_prefill_supports(kHeadDim, (heads).hq, (heads).hkv, (heads).bs))                  \
      GTEST_SKIP() << "Hopper prefill kernel does not serve " << heads_name(heads) << " on this " \
                   << device_arch() << " (needs sm_90 and an sm_90a build)";                      \
  } while (0)

std::vector<uint16_t> run_kernel(DevicePrefill& dev, PrefillKernel kernel) {
  return dev.run([kernel](const kernels::PrefillAttentionParams& p) {
    kernels::cuda::prefill_attention(p, kernel, nullptr);
  });
}

void expect_close(const std::vector<uint16_t>& got, const std::vector<uint16_t>& ref,
                  const std::string& what) {
  const ErrorStats e = compare_bf16(got, ref);
  EXPECT_TRUE(e.finite) << what << ": unwritten or NaN output";
  EXPECT_LT(e.rel_l2, 1e-2) << what;
  EXPECT_LT(e.max_abs, 2e-2) << what;
}

enum class Against { kMmaAndCpu, kMmaOnly };  // kMmaOnly where the CPU reference is too slow

void check_hopper(const std::vector<Seq>& seqs, Heads h, uint32_t seed,
                  Against against = Against::kMmaAndCpu) {
  PrefillCase c(seqs, kHeadDim, h.hq, h.hkv, h.bs, seed);
  DevicePrefill dev(c);
  const std::vector<uint16_t> hopper = run_kernel(dev, PrefillKernel::kHopper);  // [tq, hq, d]
  const std::string what = heads_name(h) + " " + seqs_name(seqs) + ": " +
                           prefill_kernel_name(PrefillKernel::kHopper) + " vs ";
  expect_close(hopper, run_kernel(dev, PrefillKernel::kMma),
               what + prefill_kernel_name(PrefillKernel::kMma));
  if (against == Against::kMmaAndCpu) expect_close(hopper, c.cpu_reference(), what + "CPU");
}

std::vector<Seq> fresh_prompts(std::initializer_list<int> lens) {
  std::vector<Seq> seqs;
  for (int n : lens) seqs.push_back({n, n});
  return seqs;
}

TEST(HopperPrefillAttentionCuda, GqaGroupSizes1To16) {
  // Powers of two fill the 128-row tile; 3, 5 (Qwen3-14B's 40 q / 8 kv heads), 7 and 12 leave
  // padding rows (40, 24, 16 and 8 positions a head).
  const Heads shapes[] = {{4, 4, 256},  {16, 8, 256}, {32, 8, 256}, {16, 2, 256}, {16, 1, 256},
                          {24, 8, 256}, {40, 8, 256}, {10, 2, 256}, {56, 8, 256}, {12, 1, 256}};
  for (Heads h : shapes) SKIP_UNLESS_HOPPER_SERVES(h);
  // Two query tiles, a lone token, a chunk over a cached prefix, exactly half a tile.
  for (Heads h : shapes) check_hopper({{300, 300}, {1, 1}, {129, 500}, {64, 64}}, h, 101);
}

// G = 5 (Qwen3-14B): 24 positions a CTA and 8 padding rows, whose outputs must never land.
// Prompts at and around multiples of 24 and a chunk over a prefix crossing them.
TEST(HopperPrefillAttentionCuda, GroupOfFiveAroundItsTwentyFourPositionTile) {
  const Heads h{40, 8, 256};
  SKIP_UNLESS_HOPPER_SERVES(h);
  check_hopper(fresh_prompts({1, 23, 24, 25, 47, 48, 49, 121}), h, 114);
  check_hopper({{50, 77}, {24, 1000}, {97, 97}}, h, 115);
}

TEST(HopperPrefillAttentionCuda, RaggedBatchOfFreshPromptsAroundTheQueryTile) {
  const Heads h;
  SKIP_UNLESS_HOPPER_SERVES(h);
  check_hopper(fresh_prompts({1, 17, 63, 64, 65, 127, 128, 129, 300, 700}), h, 102);
  // Longest first: each sequence's tiles must be found from cu_seqlens, not from the order.
  check_hopper(fresh_prompts({700, 1, 129, 64, 300, 17, 128, 65, 127, 63}), h, 103);
}

// A chunk whose first query sits mid-tile and mid-block: the causal mask is offset by the
// prefix, and the diagonal crosses key tiles at positions that are no multiple of anything.
TEST(HopperPrefillAttentionCuda, ChunksOverCachedPrefixesOffTileAndBlockEdges) {
  const Heads h;
  SKIP_UNLESS_HOPPER_SERVES(h);
  std::vector<Seq> seqs;
  for (int prefix : {1, 100, 255, 257, 1000})
    for (int q_len : {1, 64, 200}) seqs.push_back({q_len, prefix + q_len});
  check_hopper(seqs, h, 104);
}

// 2048 new tokens over a 4096-token prefix. The CPU reference at 16 q heads would need ~30 s
// (single-threaded, ~6e6 (query, key, head) triples a second at -O2), so the CPU checks it at
// 2 q heads / 1 kv head (same group of 2, ~3.5 s) and kMma at the full 16/8 shape.
TEST(HopperPrefillAttentionCuda, LongChunkOverA4096TokenPrefix) {
  const Heads full, narrow{2, 1, 256};
  SKIP_UNLESS_HOPPER_SERVES(full);
  SKIP_UNLESS_HOPPER_SERVES(narrow);
  check_hopper({{2048, 6144}}, full, 105, Against::kMmaOnly);
  check_hopper({{2048, 6144}}, narrow, 106);
}

// q_len == k_len: the last query tile holds the diagonal, full (128, 256), one row past a full
// tile (129, 257), one short (255) or many tiles in (1024).
TEST(HopperPrefillAttentionCuda, CausalDiagonalOfFreshPromptsAtTileEdges) {
  const Heads h;
  SKIP_UNLESS_HOPPER_SERVES(h);
  for (int n : {128, 129, 255, 256, 257, 1024}) check_hopper({{n, n}}, h, 107);
}

// 700 new tokens over 300 cached: with 16 or 32 a 128-key tile gathers 8 or 4 blocks, with 48
// tiles and blocks cross each other's edges, with 512 one block holds 4 tiles. Group 4 (8/2)
// keeps the CPU reference at ~4 s for the six sizes.
TEST(HopperPrefillAttentionCuda, BlockSizesThatDoNotMatchTheKeyTile) {
  std::vector<Heads> shapes;
  for (int64_t bs : {16, 32, 48, 128, 256, 512}) shapes.push_back({8, 2, bs});
  for (Heads h : shapes) SKIP_UNLESS_HOPPER_SERVES(h);
  for (Heads h : shapes) check_hopper({{700, 1000}, {5, 40}}, h, 108);
}

// Every case reads q as the q slice of fused qkv rows (token stride (Hq + 2 Hkv) D). Here the
// same q packed (stride Hq D) must give bit-identical output: the stride changes only the
// addressing, and the k/v columns between q rows are never read.
TEST(HopperPrefillAttentionCuda, QSliceOfFusedQkvRowsReadsLikePackedQ) {
  const Heads h;
  SKIP_UNLESS_HOPPER_SERVES(h);
  PrefillCase c({{300, 300}, {77, 500}, {1, 1}}, kHeadDim, h.hq, h.hkv, h.bs, 109);
  ASSERT_GT(c.q_pitch, h.hq * kHeadDim);
  DevicePrefill dev(c);
  const std::vector<uint16_t> strided = run_kernel(dev, PrefillKernel::kHopper);  // [tq, hq, d]
  expect_close(strided, c.cpu_reference(), "fused-qkv q view vs CPU");
  const int64_t row = h.hq * kHeadDim;
  std::vector<uint16_t> packed(c.tq * row);  // [tq, hq, d]
  for (int64_t t = 0; t < c.tq; ++t)
    std::copy_n(c.q.begin() + t * c.q_pitch, row, packed.begin() + t * row);
  DevVec<uint16_t> dpacked(packed);
  dev.params.q = dpacked.view(DType::kBf16, {c.tq, h.hq, kHeadDim});
  EXPECT_TRUE(run_kernel(dev, PrefillKernel::kHopper) == strided)
      << "packed q gives other output than the same q read through the fused-qkv stride";
}

// An 8192-token prompt in one call against kMma only: the CPU reference would need ~90 s.
// Its last 64 queries over the 8128 keys before them go against the CPU too (~1.5 s).
TEST(HopperPrefillAttentionCuda, LongPromptOf8192Tokens) {
  const Heads h;
  SKIP_UNLESS_HOPPER_SERVES(h);
  check_hopper({{8192, 8192}}, h, 110, Against::kMmaOnly);
  check_hopper({{64, 8192}}, h, 111);
}

// Shapes breaking one of the Hopper kernel's rules (head dim 128, Hq / Hkv <= 16,
// block_size % 16 == 0) take kMma whatever the device; decided from the shape alone, so this
// runs without a GPU too.
TEST(HopperPrefillAttentionCuda, ShapesOutsideItsRulesTakeTheMmaKernel) {
  EXPECT_STRNE(prefill_kernel_name(PrefillKernel::kHopper),
               prefill_kernel_name(PrefillKernel::kMma));
  struct Unsupported {
    int64_t d, hq, hkv, bs;
    const char* why;
  };
  const Unsupported shapes[] = {
      {64, 16, 8, 256, "head dim 64"},     {128, 17, 1, 256, "Hq/Hkv 17 > 16"},
      {128, 32, 1, 256, "Hq/Hkv 32 > 16"}, {128, 16, 8, 8, "block size 8"},
      {128, 16, 8, 24, "block size 24"},   {128, 20, 8, 256, "Hq not a multiple of Hkv"}};
  for (const Unsupported& u : shapes) {
    EXPECT_FALSE(hopper_prefill_supports(u.d, u.hq, u.hkv, u.bs)) << u.why;
    EXPECT_STREQ(
        prefill_kernel_name(kernels::cuda::prefill_attention_kernel(u.d, u.hq, u.hkv, u.bs)),
        prefill_kernel_name(PrefillKernel::kMma))
        << u.why;
  }
}

// Qwen3-0.6B's shape takes kHopper exactly on an sm_90 device (in a build with sm_90a code):
// were it refused there, every test above would skip instead of failing.
TEST(HopperPrefillAttentionCuda, DefaultKernelIsHopperExactlyOnSm90) {
  SKIP_WITHOUT_CUDA();  // the answer reads the device's compute capability
  const bool hopper = hopper_prefill_supports(128, 16, 8, 256);
  EXPECT_STREQ(prefill_kernel_name(kernels::cuda::prefill_attention_kernel(128, 16, 8, 256)),
               prefill_kernel_name(hopper ? PrefillKernel::kHopper : PrefillKernel::kMma));
#ifdef NANOVLLM_TEST_SM90A
  const bool expected = device_arch() == "sm_90";
#else
  const bool expected = false;
#endif
  EXPECT_EQ(hopper, expected) << "on " << device_arch();
}

// Asked by name for a shape it does not serve (or on a device it does not serve), the Hopper
// kernel throws before launching anything: the same buffers then still work with kMma.
TEST(HopperPrefillAttentionCuda, NamedHopperKernelRefusesWhatItDoesNotServe) {
  SKIP_WITHOUT_CUDA();
  std::vector<std::pair<Heads, int64_t>> refused{{{16, 8, 256}, 64}};  // (heads, head dim)
  if (!hopper_prefill_supports(kHeadDim, 16, 8, 256)) refused.push_back({{16, 8, 256}, 128});
  for (const auto& [h, d] : refused) {
    const std::string what = heads_name(h, d) + " on " + device_arch();
    PrefillCase c({{100, 300}, {1, 1}}, d, h.hq, h.hkv, h.bs, 112);
    DevicePrefill dev(c);  // real device buffers: the throw must come from the shape check
    EXPECT_THROW(run_kernel(dev, PrefillKernel::kHopper), std::exception) << what;
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << what;
    expect_close(run_kernel(dev, PrefillKernel::kMma), c.cpu_reference(), what + ": kMma after");
  }
}

// prefill_attention(p, stream) runs the kernel prefill_attention_kernel() names. Bit-identical
// output tells them apart (both kernels are deterministic; their roundings differ).
TEST(HopperPrefillAttentionCuda, DefaultPrefillRunsThePickedKernel) {
  SKIP_WITHOUT_CUDA();
  for (int64_t d : {int64_t{128}, int64_t{64}}) {
    const Heads h;
    PrefillCase c({{300, 300}, {200, 1000}, {1, 1}}, d, h.hq, h.hkv, h.bs, 113);
    DevicePrefill dev(c);
    const PrefillKernel picked = kernels::cuda::prefill_attention_kernel(d, h.hq, h.hkv, h.bs);
    const std::vector<uint16_t> named = run_kernel(dev, picked);
    if (picked == PrefillKernel::kHopper) {  // else the bit comparison below could not tell
      ASSERT_FALSE(run_kernel(dev, PrefillKernel::kMma) == named)
          << "the two kernels agree to the bit here: pick a case where their roundings differ";
    }
    const std::vector<uint16_t> dflt = dev.run([](const kernels::PrefillAttentionParams& p) {
      kernels::cuda::prefill_attention(p, nullptr);
    });
    EXPECT_TRUE(dflt == named) << "d" << d << ": default path differs from "
                               << prefill_kernel_name(picked);
  }
}

}  // namespace
}  // namespace nanovllm::test
