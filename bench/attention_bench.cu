// Attention micro-benchmark on Qwen3-0.6B heads (16 q / 8 kv, head dim 128, block 256):
//   paged decode, context 1024, batch 16 and 256: effective KV bytes read per second against
//     the measured device-to-device copy bandwidth (floors: 0.40 at batch 16, 0.70 at 256);
//   causal prefill, 16 x 1024 tokens: TFLOP/s counting the causal half only (floor 120).
// Several cache copies are rotated so repeated runs do not just read L2.
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "bench/kernel_bench_util.cuh"
#include "kernels/attention.h"

namespace nanovllm::bench {
namespace {

constexpr int64_t kHq = 16, kHkv = 8, kDim = 128, kBlock = 256;

struct PagedSet {
  int64_t blocks_per_seq, num_blocks, copies;
  DeviceBuf k, v, tables;  // tables: [copies][B][blocks_per_seq]
  PagedSet(int64_t batch, int64_t ctx, int64_t copies_)
      : blocks_per_seq((ctx + kBlock - 1) / kBlock),
        num_blocks(batch * blocks_per_seq * copies_),
        copies(copies_),
        k(num_blocks * kBlock * kHkv * kDim * 2),
        v(num_blocks * kBlock * kHkv * kDim * 2),
        tables(copies_ * batch * blocks_per_seq * 4) {
    k.fill_random_bf16(11);
    v.fill_random_bf16(12);
    // Copy c, sequence b: blocks interleaved across sequences (a real cache is not sorted).
    std::vector<int32_t> t(copies * batch * blocks_per_seq);
    for (int64_t c = 0; c < copies; ++c)
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < blocks_per_seq; ++i)
          t[(c * batch + b) * blocks_per_seq + i] =
              static_cast<int32_t>(c * batch * blocks_per_seq + i * batch + b);
    CUDA_CHECK(cudaMemcpy(tables.ptr, t.data(), t.size() * 4, cudaMemcpyHostToDevice));
  }
  kernels::PagedKV view(int64_t batch, int64_t copy) const {
    return {TensorView(k.ptr, DType::kBf16, {num_blocks, kBlock, kHkv, kDim}, Device::kCuda),
            TensorView(v.ptr, DType::kBf16, {num_blocks, kBlock, kHkv, kDim}, Device::kCuda),
            TensorView(tables.as<int32_t>() + copy * batch * blocks_per_seq, DType::kI32,
                       {batch, blocks_per_seq}, Device::kCuda)};
  }
};

void bench_decode(int64_t batch, int64_t ctx, double copy_gbps) {
  const int64_t copies =
      std::max<int64_t>(2, (int64_t{512} << 20) / (batch * ctx * kHkv * kDim * 4) + 1);
  PagedSet set(batch, ctx, copies);
  DeviceBuf q(batch * kHq * kDim * 2), out(batch * kHq * kDim * 2), lens(batch * 4);
  q.fill_random_bf16(3);
  std::vector<int32_t> l(batch, static_cast<int32_t>(ctx));
  CUDA_CHECK(cudaMemcpy(lens.ptr, l.data(), batch * 4, cudaMemcpyHostToDevice));
  constexpr int64_t kMaxSplits = 32;
  DeviceBuf split_out(batch * kHq * kMaxSplits * kDim * 4), split_lse(batch * kHq * kMaxSplits * 4);
  kernels::DecodeAttentionParams p;
  p.out = TensorView(out.ptr, DType::kBf16, {batch, kHq, kDim}, Device::kCuda);
  p.q = TensorView(q.ptr, DType::kBf16, {batch, kHq, kDim}, Device::kCuda);
  p.context_lens = TensorView(lens.ptr, DType::kI32, {batch}, Device::kCuda);
  p.max_context_len = static_cast<int>(ctx);
  p.scale = 1.f / std::sqrt(static_cast<float>(kDim));
  p.split_out =
      TensorView(split_out.ptr, DType::kF32, {batch, kHq, kMaxSplits, kDim}, Device::kCuda);
  p.split_lse = TensorView(split_lse.ptr, DType::kF32, {batch, kHq, kMaxSplits}, Device::kCuda);
  const double ms = time_ms([&](int rep) {
    p.kv = set.view(batch, rep % copies);
    kernels::cuda::decode_attention(p, nullptr);
  });
  const double kv_bytes = static_cast<double>(batch) * ctx * kHkv * kDim * 2 * 2;
  const double flops = 4.0 * batch * kHq * ctx * kDim;
  const std::string shape =
      "B=" + std::to_string(batch) + " ctx=" + std::to_string(ctx) + " 16q/8kv d128 bs256";
  report("decode_attention", shape, ms, flops, kv_bytes, kv_bytes / (ms * 1e-3) / 1e9 / copy_gbps,
         "kv_read/copy_bw");
}

void bench_prefill(int64_t seqs, int64_t len) {
  PagedSet set(seqs, len, 1);
  const int64_t tokens = seqs * len;
  DeviceBuf q(tokens * kHq * kDim * 2), out(tokens * kHq * kDim * 2), cu(2 * (seqs + 1) * 4);
  q.fill_random_bf16(4, 2.f);
  std::vector<int32_t> c(seqs + 1);
  for (int64_t i = 0; i <= seqs; ++i) c[i] = static_cast<int32_t>(i * len);
  CUDA_CHECK(cudaMemcpy(cu.ptr, c.data(), c.size() * 4, cudaMemcpyHostToDevice));
  kernels::PrefillAttentionParams p;
  p.out = TensorView(out.ptr, DType::kBf16, {tokens, kHq, kDim}, Device::kCuda);
  p.q = TensorView(q.ptr, DType::kBf16, {tokens, kHq, kDim}, Device::kCuda);
  p.kv = set.view(seqs, 0);
  p.cu_seqlens_q = TensorView(cu.ptr, DType::kI32, {seqs + 1}, Device::kCuda);
  p.cu_seqlens_k = p.cu_seqlens_q;
  p.max_seqlen_q = p.max_seqlen_k = static_cast<int>(len);
  p.scale = 1.f / std::sqrt(static_cast<float>(kDim));
  const double ms = time_ms([&](int) { kernels::cuda::prefill_attention(p, nullptr); });
  const double flops = 4.0 * seqs * kHq * len * len * kDim / 2;  // causal half
  const double bytes = static_cast<double>(tokens) * (kHq * 2 + kHkv * 2) * kDim * 2;
  const std::string shape =
      std::to_string(seqs) + "x" + std::to_string(len) + " causal 16q/8kv d128";
  report("prefill_attention", shape, ms, flops, bytes, flops / (ms * 1e-3) / 1e12 / 120.0,
         "tflops/120");
}

}  // namespace
}  // namespace nanovllm::bench

int main() {
  using namespace nanovllm::bench;
  int dev = 0;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  const double copy = copy_bandwidth_gbps();
  std::printf("device %s, %d SMs; D2D copy %.0f GB/s (read + write)\n", prop.name,
              prop.multiProcessorCount, copy);
  std::printf("JSON {\"bench\":\"d2d_copy\",\"gbps\":%.1f}\n", copy);
  print_header(
      "attention (ratio: decode = KV GB/s / copy GB/s, floor 0.40 @16, 0.70 @256; "
      "prefill = TFLOP/s / 120)");
  for (int64_t b : {1, 16, 64, 256}) bench_decode(b, 1024, copy);
  bench_decode(16, 4096, copy);
  bench_prefill(16, 1024);
  bench_prefill(4, 4096);
  return 0;
}
