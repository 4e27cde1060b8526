// Attention micro-benchmark on Qwen3-0.6B heads (16 q / 8 kv, head dim 128, block 256):
//   paged decode: effective KV bytes read per second against the measured device-to-device copy
//     bandwidth, uniform contexts (batch 1, 4, 16, 64, 256 at 1024; batch 1 at 4096 and 16384;
//     batch 16 at 4096; batch 256 at 1025) and mixed ones (batch 64 and 256, contexts uniform in
//     [100, 2048] from a fixed seed, as nano-vllm's benchmark has them). Each figure is a CUDA
//     graph of >= 20 calls (the decode graphs capture attention the same way), so no launch gap is
//     counted; the calls rotate over copies of the cache (>= 512 MB in all) so each reads HBM, not
//     L2. Targets: >= 0.85 at batch >= 64 (uniform and mixed), >= 0.6 at 16, batch 1 ctx 1024 in
//     <= 6 us;
//   prefill (issue 20; alone with --prefill): causal self-attention of L = 1k..32k tokens (16k
//     queries per call: 16384 / L sequences below 8k) and one chunk of C = 2k, 4k, 8k queries over
//     a 32k cached prefix (chunked prefill of a long prompt). Each shape is timed eagerly (median
//     of 20, as the engine runs prefill outside graphs) with the mma kernel and, on sm_90, the
//     Hopper one; TFLOP/s count the attended (causal) keys only. Ratio: TFLOP/s over issue 20's
//     targets for the Hopper kernel, >= 550 for causal 8k-32k (shown against 550 below 8k too)
//     and >= 450 for chunked; the Hopper row adds its speed-up over mma, and a check row the max
//     |hopper - mma| of the two outputs, so a kernel that is fast but wrong shows in the same
//     run. scripts/time_sdpa_prefill.py times PyTorch's flash attention on the same rows.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/attention_bench_prefill.cuh"
#include "bench/kernel_bench_util.cuh"
#include "kernels/attention.h"

namespace nanovllm::bench {
namespace {

constexpr int64_t kHq = 16, kHkv = 8, kDim = 128, kBlock = 256;
constexpr int64_t kTokenBytes = kHkv * kDim * 2 * 2;  // K + V of one token, bf16

// The decode rows' shape and cache (--gqa, --kv-heads, --fp8, --int8) and the kernels they time
// (--decode-kernels).
int64_t g_decode_hkv = kHkv;  // kv heads (--kv-heads: one tensor-parallel rank's, e.g. 2 of 8)
int64_t g_decode_hq = kHq;    // query heads: --gqa G times g_decode_hkv
bool g_fp8 = false;           // an 8-bit cache: 1-byte rows, exponents (scale codes) 0
bool g_int8 = false;          // that cache in int8 (--int8) rather than E4M3 (--fp8)
std::vector<kernels::cuda::DecodeKernel> g_decode_kernels = {kernels::cuda::DecodeKernel::kLanes,
                                                             kernels::cuda::DecodeKernel::kMma};

int64_t decode_token_bytes() {
  return g_decode_hkv * kDim * 2 * (g_fp8 ? 1 : 2);  // K + V of one token
}

// Random finite E4M3 bytes (0x7f and 0xff are NaN: their last bit is cleared).
__global__ void fill_random_e4m3_kernel(uint8_t* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    uint8_t b = static_cast<uint8_t>(h);
    if ((b & 0x7f) == 0x7f) b &= 0xfe;
    p[i] = b;
  }
}

int64_t blocks_of(int len) {
  return (len + kBlock - 1) / kBlock;
}

// The paged caches of a batch with lengths `lens`, `copies` times over (each copy its own
// blocks). Within a copy the blocks of the sequences are interleaved (a real cache is not
// sorted).
struct PagedSet {
  int64_t batch, width, per_copy, copies;  // width: table row; per_copy: blocks of one copy
  bool fp8;
  int64_t hkv;
  DeviceBuf k, v;      // [copies * per_copy, kBlock, hkv, kDim] bf16 or fp8
  DeviceBuf k_e, v_e;  // fp8: [copies * per_copy, hkv, kBlock] i8 exponents, all 0
  DeviceBuf tables;    // [copies][B][width] i32
  PagedSet(const std::vector<int>& lens, int64_t copies_, bool fp8_ = false, int64_t hkv_ = kHkv)
      : batch(static_cast<int64_t>(lens.size())),
        width(blocks_of(*std::max_element(lens.begin(), lens.end()))),
        per_copy(std::accumulate(lens.begin(), lens.end(), int64_t{0},
                                 [](int64_t s, int l) { return s + blocks_of(l); })),
        copies(copies_),
        fp8(fp8_),
        hkv(hkv_),
        k(copies * per_copy * kBlock * hkv * kDim * (fp8 ? 1 : 2)),
        v(copies * per_copy * kBlock * hkv * kDim * (fp8 ? 1 : 2)),
        k_e(fp8 ? copies * per_copy * kBlock * hkv : 0),
        v_e(fp8 ? copies * per_copy * kBlock * hkv : 0),
        tables(copies * batch * width * 4) {
    std::vector<int32_t> t(copies * batch * width, -1);
    for (int64_t c = 0; c < copies; ++c) {
      int64_t next = c * per_copy;
      for (int64_t i = 0; i < width; ++i)
        for (int64_t b = 0; b < batch; ++b)
          if (i < blocks_of(lens[b])) t[(c * batch + b) * width + i] = static_cast<int32_t>(next++);
    }
    if (fp8) {
      fill_random_e4m3_kernel<<<1024, 256>>>(k.as<uint8_t>(), static_cast<int64_t>(k.bytes), 11);
      fill_random_e4m3_kernel<<<1024, 256>>>(v.as<uint8_t>(), static_cast<int64_t>(v.bytes), 12);
      CUDA_CHECK_LAUNCH();
      CUDA_CHECK(cudaMemset(k_e.ptr, 0, k_e.bytes));
      CUDA_CHECK(cudaMemset(v_e.ptr, 0, v_e.bytes));
    } else {
      k.fill_random_bf16(11);
      v.fill_random_bf16(12);
    }
    CUDA_CHECK(cudaMemcpy(tables.ptr, t.data(), t.size() * 4, cudaMemcpyHostToDevice));
  }
  kernels::PagedKV view(int64_t copy) const {
    const int64_t blocks = copies * per_copy;
    const DType dt = !fp8 ? DType::kBf16 : g_int8 ? DType::kI8 : DType::kFp8E4M3;
    kernels::PagedKV kv{TensorView(k.ptr, dt, {blocks, kBlock, hkv, kDim}, Device::kCuda),
                        TensorView(v.ptr, dt, {blocks, kBlock, hkv, kDim}, Device::kCuda),
                        TensorView(tables.as<int32_t>() + copy * batch * width, DType::kI32,
                                   {batch, width}, Device::kCuda)};
    if (fp8) {
      kv.k_scale = TensorView(k_e.ptr, DType::kI8, {blocks, hkv, kBlock}, Device::kCuda);
      kv.v_scale = TensorView(v_e.ptr, DType::kI8, {blocks, hkv, kBlock}, Device::kCuda);
    }
    return kv;
  }
};

// How the decode calls get their split-KV scratch (--split): fused (scratch and counters, the
// model's setting), merge (no counters: a second kernel merges), none (no scratch).
enum class Split { kFused, kMerge, kNone };
Split g_split = Split::kFused;
bool g_decode_only = false;   // --decode-only: skip the prefill rows
bool g_prefill_only = false;  // --prefill: only the prefill rows
bool g_long_context = false;  // --long-context: batches 1-8 at 32k-128k (issue 19's target)
// --decode-row B,CTX: that one uniform decode row alone (a profiler then sees one shape only).
int64_t g_row_batch = 0;
int g_row_context = 0;
// --decode-walk auto|pieces|stream: how the mma kernel at G <= 2 walks a CTA's pieces
// (kernels/attention.h's DecodeWalk); the label says which when it is not auto.
kernels::cuda::DecodeWalk g_walk = kernels::cuda::DecodeWalk::kAuto;

void bench_decode(const std::vector<int>& lens, const std::string& shape, double copy_gbps) {
  const int64_t batch = static_cast<int64_t>(lens.size()), hq = g_decode_hq, hkv = g_decode_hkv,
                g = hq / hkv;
  int64_t tokens = 0;
  for (int l : lens) tokens += l;
  const double kv_bytes = static_cast<double>(tokens) * decode_token_bytes();
  const int64_t copies = (int64_t{512} << 20) / static_cast<int64_t>(kv_bytes) + 2;
  PagedSet set(lens, copies, g_fp8, hkv);
  DeviceBuf q(batch * hq * kDim * 2), out(batch * hq * kDim * 2), d_lens(batch * 4);
  q.fill_random_bf16(3);
  CUDA_CHECK(cudaMemcpy(d_lens.ptr, lens.data(), batch * 4, cudaMemcpyHostToDevice));
  const int64_t cells = kernels::cuda::decode_attention_split_cells(hq, hkv, kDim);
  DeviceBuf split_out(cells * g * kDim * 4), split_lse(cells * g * 4), counters(cells / 2 * 4);
  CUDA_CHECK(cudaMemset(counters.ptr, 0, counters.bytes));  // every call leaves them zero
  kernels::DecodeAttentionParams p;
  p.out = TensorView(out.ptr, DType::kBf16, {batch, hq, kDim}, Device::kCuda);
  p.q = TensorView(q.ptr, DType::kBf16, {batch, hq, kDim}, Device::kCuda);
  p.context_lens = TensorView(d_lens.ptr, DType::kI32, {batch}, Device::kCuda);
  p.max_context_len = *std::max_element(lens.begin(), lens.end());
  p.scale = 1.f / std::sqrt(static_cast<float>(kDim));
  if (g_split != Split::kNone) {
    p.split_out = TensorView(split_out.ptr, DType::kF32, {cells, g, kDim}, Device::kCuda);
    p.split_lse = TensorView(split_lse.ptr, DType::kF32, {cells, g}, Device::kCuda);
  }
  if (g_split == Split::kFused)
    p.split_counters = TensorView(counters.ptr, DType::kI32, {cells / 2}, Device::kCuda);
  const int calls = static_cast<int>(std::max<int64_t>(20, copies));
  char heads[64];
  std::snprintf(heads, sizeof heads, " %lldq/%lldkv d128 %s%s", static_cast<long long>(hq),
                static_cast<long long>(hkv),
                g_int8  ? "int8"
                : g_fp8 ? "fp8"
                        : "bf16",
                g_walk == kernels::cuda::DecodeWalk::kPieces   ? " pieces"
                : g_walk == kernels::cuda::DecodeWalk::kStream ? " stream"
                                                               : "");
  for (const kernels::cuda::DecodeKernel kernel : g_decode_kernels) {
    if (kernel == kernels::cuda::DecodeKernel::kMma &&
        !kernels::cuda::mma_decode_supports(kDim, hq, hkv))
      continue;
    const double us = time_graph_us(
        [&](int i, cudaStream_t stream) {
          p.kv = set.view(i % copies);
          kernels::cuda::decode_attention(p, kernel, stream, g_walk);
        },
        calls);
    const double flops = 4.0 * hq * tokens * kDim;
    std::string label = shape;
    label += heads;
    report(std::string("decode_attention_") + kernels::cuda::decode_kernel_name(kernel), label,
           us * 1e-3, flops, kv_bytes, kv_bytes / (us * 1e-6) / 1e9 / copy_gbps, "kv_read/copy_bw");
  }
}

void bench_decode_uniform(int64_t batch, int ctx, double copy_gbps) {
  bench_decode(std::vector<int>(batch, ctx),
               "B=" + std::to_string(batch) + " ctx=" + std::to_string(ctx), copy_gbps);
}

void bench_decode_mixed(int64_t batch, double copy_gbps) {
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int> len(100, 2048);
  std::vector<int> lens(batch);
  for (auto& l : lens) l = len(rng);
  bench_decode(lens, "B=" + std::to_string(batch) + " ctx=100..2048 mixed", copy_gbps);
}

// One row pair of the prefill table: the call timed eagerly (prefill is not captured in graphs)
// with the mma kernel and, where the device and shape allow, the Hopper one, each into its own
// output; the two outputs are then compared.
void bench_prefill(const PrefillShape& s) {
  using kernels::cuda::PrefillKernel;
  PagedSet set(std::vector<int>(s.seqs, static_cast<int>(s.k_len())), 1);
  const int64_t tokens = s.seqs * s.q_len;  // new queries of the whole batch
  const int64_t q_bytes = tokens * kHq * kDim * 2;
  DeviceBuf q(q_bytes);                             // [tokens, kHq, kDim] bf16
  DeviceBuf out_mma(q_bytes), out_hopper(q_bytes);  // [tokens, kHq, kDim] bf16 each
  DeviceBuf cu((s.seqs + 1) * 2 * 4);  // cu_seqlens_q then cu_seqlens_k, [B + 1] i32 each
  q.fill_random_bf16(4, 2.f);
  std::vector<int32_t> c((s.seqs + 1) * 2);
  for (int64_t b = 0; b <= s.seqs; ++b) {
    c[b] = static_cast<int32_t>(b * s.q_len);
    c[s.seqs + 1 + b] = static_cast<int32_t>(b * s.k_len());
  }
  CUDA_CHECK(cudaMemcpy(cu.ptr, c.data(), c.size() * 4, cudaMemcpyHostToDevice));
  kernels::PrefillAttentionParams p;
  p.q = TensorView(q.ptr, DType::kBf16, {tokens, kHq, kDim}, Device::kCuda);
  p.kv = set.view(0);
  p.cu_seqlens_q = TensorView(cu.as<int32_t>(), DType::kI32, {s.seqs + 1}, Device::kCuda);
  p.cu_seqlens_k =
      TensorView(cu.as<int32_t>() + s.seqs + 1, DType::kI32, {s.seqs + 1}, Device::kCuda);
  p.max_seqlen_q = static_cast<int>(s.q_len);
  p.max_seqlen_k = static_cast<int>(s.k_len());
  p.scale = 1.f / std::sqrt(static_cast<float>(kDim));
  const auto time_kernel = [&](PrefillKernel kernel, const DeviceBuf& out) {
    p.out = TensorView(out.ptr, DType::kBf16, {tokens, kHq, kDim}, Device::kCuda);
    return time_ms([&](int) { kernels::cuda::prefill_attention(p, kernel, nullptr); });
  };
  const double flops = s.flops(kHq, kDim);
  // The least traffic: Q read and O written once, each cached token's K and V read once.
  const double bytes = static_cast<double>(q_bytes) * 2 +
                       static_cast<double>(s.seqs) * static_cast<double>(s.k_len()) * kTokenBytes;
  const auto of_target = [&](double ms) { return flops / (ms * 1e-3) / 1e12 / s.target_tflops; };
  const std::string ratio_of = "tflops/" + std::to_string(static_cast<int>(s.target_tflops));
  const double mma_ms = time_kernel(PrefillKernel::kMma, out_mma);
  report("prefill_mma", s.name, mma_ms, flops, bytes, of_target(mma_ms), ratio_of.c_str());
  if (!kernels::cuda::hopper_prefill_supports(kDim, kHq, kHkv, kBlock)) {
    std::printf("%-22s %-44s hopper: unsupported on this device\n", "prefill_hopper",
                s.name.c_str());
    return;
  }
  double hopper_ms = 0;
  try {
    hopper_ms = time_kernel(PrefillKernel::kHopper, out_hopper);
  } catch (const std::exception& e) {
    // A host-side refusal (a check, not a sticky CUDA error) leaves the other rows measurable.
    std::printf("%-22s %-44s hopper failed: %s\n", "prefill_hopper", s.name.c_str(), e.what());
    return;
  }
  report("prefill_hopper", s.name, hopper_ms, flops, bytes, of_target(hopper_ms), ratio_of.c_str(),
         {{"speedup_vs_mma", mma_ms / hopper_ms}});
  // Both outputs hold their kernel's last timed call (same inputs, so the same result).
  const float diff = max_abs_diff_bf16(out_hopper, &out_mma), mma_max = max_abs_diff_bf16(out_mma);
  std::printf("%-22s %-44s max |hopper - mma| %.4g (max |mma| %.4g)\n", "prefill_check",
              s.name.c_str(), diff, mma_max);
  std::printf(
      "JSON {\"bench\":\"prefill_check\",\"shape\":\"%s\",\"max_abs_diff\":%s,"
      "\"max_abs_mma\":%s}\n",
      s.name.c_str(), json_number(diff).c_str(), json_number(mma_max).c_str());
}

}  // namespace
}  // namespace nanovllm::bench

int main(int argc, char** argv) {
  using namespace nanovllm::bench;
  int64_t gqa = kHq / kHkv;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--split" && i + 1 < argc) {
      const std::string v = argv[++i];
      CHECK_MSG(v == "fused" || v == "merge" || v == "none", "--split fused|merge|none, not " << v);
      g_split = v == "fused" ? Split::kFused : v == "merge" ? Split::kMerge : Split::kNone;
    } else if (arg == "--long-context") {
      g_long_context = true;
    } else if (arg == "--decode-only") {
      g_decode_only = true;
    } else if (arg == "--prefill") {
      g_prefill_only = true;
    } else if (arg == "--gqa" && i + 1 < argc) {
      const int v = std::stoi(argv[++i]);
      CHECK_MSG(v == 1 || v == 2 || v == 4 || v == 5 || v == 8, "--gqa 1|2|4|5|8, not " << v);
      gqa = v;
    } else if (arg == "--kv-heads" && i + 1 < argc) {
      const int v = std::stoi(argv[++i]);
      CHECK_MSG(v >= 1 && v <= 8, "--kv-heads 1..8, not " << v);
      g_decode_hkv = v;
    } else if (arg == "--fp8") {
      g_fp8 = true;
    } else if (arg == "--int8") {  // random bytes are int8 levels too
      g_fp8 = g_int8 = true;
    } else if (arg == "--decode-row" && i + 1 < argc) {
      const std::string v = argv[++i];
      const size_t comma = v.find(',');
      CHECK_MSG(comma != std::string::npos, "--decode-row B,CTX, not " << v);
      g_row_batch = std::stoll(v.substr(0, comma));
      g_row_context = std::stoi(v.substr(comma + 1));
      CHECK_MSG(g_row_batch > 0 && g_row_context > 0,
                "--decode-row B,CTX: both positive, not " << v);
    } else if (arg == "--decode-walk" && i + 1 < argc) {
      const std::string v = argv[++i];
      CHECK_MSG(v == "auto" || v == "pieces" || v == "stream",
                "--decode-walk auto|pieces|stream, not " << v);
      g_walk = v == "pieces"   ? nanovllm::kernels::cuda::DecodeWalk::kPieces
               : v == "stream" ? nanovllm::kernels::cuda::DecodeWalk::kStream
                               : nanovllm::kernels::cuda::DecodeWalk::kAuto;
    } else if (arg == "--decode-kernels" && i + 1 < argc) {
      const std::string v = argv[++i];
      CHECK_MSG(v == "lanes" || v == "mma" || v == "lanes,mma",
                "--decode-kernels lanes|mma|lanes,mma, not " << v);
      g_decode_kernels.clear();
      if (v != "mma") g_decode_kernels.push_back(nanovllm::kernels::cuda::DecodeKernel::kLanes);
      if (v != "lanes") g_decode_kernels.push_back(nanovllm::kernels::cuda::DecodeKernel::kMma);
    } else {
      std::fprintf(stderr,
                   "usage: attention_bench [--split fused|merge|none] [--decode-only | --prefill] "
                   "[--long-context] [--gqa G] [--kv-heads N] [--fp8 | --int8] "
                   "[--decode-kernels lanes|mma|lanes,mma] [--decode-row B,CTX] "
                   "[--decode-walk auto|pieces|stream]\n");
      return 2;
    }
  }
  CHECK_MSG(!(g_prefill_only && (g_decode_only || g_long_context)),
            "--prefill runs the prefill rows only: not with --decode-only or --long-context");
  CHECK_MSG(!g_prefill_only || g_decode_hkv == kHkv, "--kv-heads shapes the decode rows only");
  g_decode_hq = gqa * g_decode_hkv;
  int dev = 0;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  std::printf("device %s, %d SMs, compute capability %d.%d\n", prop.name, prop.multiProcessorCount,
              prop.major, prop.minor);
  if (!g_prefill_only) {
    // The copy bandwidth is the decode rows' ceiling only.
    const double copy = copy_bandwidth_gbps();
    std::printf("D2D copy %.0f GB/s (read + write)\n", copy);
    std::printf("JSON {\"bench\":\"d2d_copy\",\"gbps\":%.1f}\n", copy);
    print_header(
        "decode attention (ratio: KV GB/s / copy GB/s, targets >= 0.85 @B>=64, >= 0.6 @16, "
        "B=1 ctx 1024 <= 6 us)");
    if (g_row_batch > 0) {
      bench_decode_uniform(g_row_batch, g_row_context, copy);
      return 0;
    }
    if (g_long_context) {
      // Long context: a few sequences must still spread over every SM (split-KV over the
      // context); target >= 0.8 of copy bandwidth.
      for (const int ctx : {32768, 65536, 131072})
        for (const int64_t b : {1, 2, 4, 8}) bench_decode_uniform(b, ctx, copy);
      return 0;
    }
    for (int64_t b : {1, 4, 16, 64, 256}) bench_decode_uniform(b, 1024, copy);
    bench_decode_uniform(1, 4096, copy);
    bench_decode_uniform(1, 16384, copy);
    bench_decode_uniform(16, 4096, copy);
    // One token past a tile (the decode step's context 1025): ranges no longer align with the
    // groups, so most groups are split across CTAs and merged.
    bench_decode_uniform(256, 1025, copy);
    bench_decode_mixed(64, copy);
    bench_decode_mixed(256, copy);
    if (g_decode_only) return 0;
  }
  print_header(
      "prefill attention, bf16 paged bs256, eager median of 20 (ratio: TFLOP/s / target; targets "
      "for hopper: causal 8k-32k >= 550, chunked >= 450; causal part of the FLOPs only)");
  for (const PrefillShape& shape : issue20_prefill_shapes("16q/8kv d128")) bench_prefill(shape);
  return 0;
}
