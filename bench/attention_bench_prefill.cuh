// The prefill side of attention_bench (issue 20): the shapes of the table, their FLOPs counted
// over the causal part only. attention_bench compares the Hopper kernel with the mma one in the
// same run that times them (kernel_bench_util.cuh's max_abs_diff_bf16), so a fast but broken
// kernel shows. scripts/time_sdpa_prefill.py times PyTorch's flash attention on the same shapes,
// under the same names and FLOP count, so its rows line up with these.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/kernel_bench_util.cuh"

namespace nanovllm::bench {

// One prefill call: `seqs` sequences alike, each with q_len new queries after `past` cached
// tokens, so k_len = past + q_len keys and query i (0-based) attends to past + i + 1 of them.
struct PrefillShape {
  std::string name;  // the row's shape column, shared with scripts/time_sdpa_prefill.py
  int64_t seqs = 1, q_len = 0, past = 0;
  double target_tflops = 0;  // issue 20's floor for the Hopper kernel on this kind of shape

  int64_t k_len() const { return past + q_len; }
  // QK^T and PV, 2 FLOPs per multiply-add each, over the attended keys only: the keys sum
  // (past + 1) + ... + (past + q_len) is an integer far below 2^53, so the double is exact.
  double flops(int64_t hq, int64_t head_dim) const {
    const int64_t keys = seqs * (q_len * past + q_len * (q_len + 1) / 2);
    return 4.0 * static_cast<double>(hq) * static_cast<double>(head_dim) *
           static_cast<double>(keys);
  }
};

// Issue 20's table for heads `heads` (e.g. "16q/8kv d128"): causal self-attention of L tokens
// (below 8192, 16384 / L sequences, so every shape has 16k queries and fills the GPU), then
// one chunk of C queries over a 32k cached prefix, as chunked prefill runs a long prompt.
inline std::vector<PrefillShape> issue20_prefill_shapes(const std::string& heads) {
  constexpr double kCausalTarget = 550, kChunkedTarget = 450;  // TFLOP/s
  std::vector<PrefillShape> shapes;
  for (const int64_t len : {1024, 2048, 4096, 8192, 16384, 32768}) {
    const int64_t seqs = len < 8192 ? 16384 / len : 1;
    shapes.push_back(
        {"causal B=" + std::to_string(seqs) + " L=" + std::to_string(len) + " " + heads, seqs, len,
         0, kCausalTarget});
  }
  constexpr int64_t kPast = 32768;
  for (const int64_t chunk : {2048, 4096, 8192})
    shapes.push_back(
        {"chunked C=" + std::to_string(chunk) + " past=" + std::to_string(kPast) + " " + heads, 1,
         chunk, kPast, kChunkedTarget});
  return shapes;
}

// A float as a JSON value: inf (NaN included, as the kernel above counts it) has no JSON
// number, so it becomes the string "inf".
inline std::string json_number(float x) {
  if (!std::isfinite(x)) return "\"inf\"";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

}  // namespace nanovllm::bench
