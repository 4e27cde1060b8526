// The decode side of attention_cuda_test: a decode batch living on the device (DecodeRig), the
// scratch modes, kernels and walks a shape has, and check_decode, which runs every one of them
// against the CPU reference (the tolerances are attention_cuda_test.cpp's, explained there).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/paged_attention_case.h"

namespace nanovllm::test {

// How the CUDA decode kernel is given its split-KV scratch.
enum class Split {
  kNone,         // no scratch: one CTA per (sequence, kv head)
  kMergeKernel,  // scratch without counters: a second kernel merges split groups
  kFused,        // scratch and counters: the last CTA of a split group merges it
  kCluster,      // scratch: one thread-block cluster per (sequence, kv head) merges inside it
                 // (small batches only: kernels::cuda::decode_cluster_fits)
};

inline const char* split_name(Split s) {
  switch (s) {
    case Split::kNone:
      return "no scratch";
    case Split::kMergeKernel:
      return "merge kernel";
    case Split::kFused:
      return "fused merge";
    case Split::kCluster:
      return "cluster merge";
  }
  return "?";
}

struct DecodeShape {
  int64_t d = 128, hq = 16, hkv = 8, bs = 256;  // Qwen3-0.6B's attention by default
  bool fp8 = false;                             // an 8-bit cache (PagedCase)
  float q_range = 2;                            // q uniform in [-q_range, q_range]
  DType dtype8 = DType::kFp8E4M3;               // which 8-bit cache: kFp8E4M3 or kI8
};

// A decode batch living on the device (cache, q, lengths, block tables, scratch), kept across
// calls so that a captured graph can be replayed after set_lens() changed lengths and tables.
// The cache has room for `capacity` (per sequence: the longest length it will be given).
class DecodeRig {
 public:
  // cells 0: every resident CTA slot. kernel: the CUDA kernel run() calls.
  DecodeRig(const std::vector<int>& capacity, DecodeShape shape, Split split, uint32_t seed,
            int64_t cells = 0,
            kernels::cuda::DecodeKernel kernel = kernels::cuda::DecodeKernel::kLanes,
            kernels::cuda::DecodeWalk walk = kernels::cuda::DecodeWalk::kAuto)
      : s_(shape),
        kernel_(kernel),
        walk_(walk),
        batch_(static_cast<int64_t>(capacity.size())),
        q_pitch_((shape.hq + 2 * shape.hkv) * shape.d),  // q is a view into qkv rows
        rng_(seed),
        cache_(decode_seqs(capacity), shape.d, shape.hq, shape.hkv, shape.bs, rng_, shape.fp8,
               shape.dtype8),
        dev_(cache_),
        q_(random_bf16(batch_ * q_pitch_, rng_, -shape.q_range, shape.q_range)),
        dq_(q_),
        dout_(batch_ * shape.hq * shape.d),
        dlens_(capacity.size()),
        cells_(cells > 0
                   ? cells
                   : kernels::cuda::decode_attention_split_cells(shape.hq, shape.hkv, shape.d)),
        split_(split),
        split_out_(cells_ * shape.d * (shape.hq / shape.hkv)),
        split_lse_(cells_ * (shape.hq / shape.hkv)),
        counters_(std::vector<int32_t>(cells_ / 2, 0)) {
    set_lens(capacity);
  }

  // New lengths (each within the capacity), freshly dealt block tables, poisoned output.
  void set_lens(const std::vector<int>& lens) {
    CHECK_EQ(static_cast<int64_t>(lens.size()), batch_);
    lens_.assign(lens.begin(), lens.end());
    cache_.deal(decode_seqs(lens), rng_);
    dlens_.mem.upload(lens_);
    dev_.tables.mem.upload(cache_.tables);
    dout_.mem.poison();
  }

  void run(cudaStream_t stream) const {
    // The dealt splits stay dealt at every batch; kCluster asks for the cluster kernel.
    kernels::cuda::decode_attention(device_params(), kernel_, stream, walk_,
                                    split_ == Split::kCluster ? kernels::cuda::DecodeMerge::kCluster
                                                              : kernels::cuda::DecodeMerge::kDealt);
  }

  // The output against the CPU reference; the counters must be back at zero.
  void expect_matches_cpu(const std::string& what) {
    std::vector<uint16_t> ref(batch_ * s_.hq * s_.d);
    kernels::DecodeAttentionParams hp;
    hp.out = host_view(ref.data(), DType::kBf16, {batch_, s_.hq, s_.d});
    hp.q = host_view(q_.data(), DType::kBf16, {batch_, s_.hq, s_.d});
    hp.q.stride[0] = q_pitch_;
    hp.kv = host_paged(cache_, batch_);
    hp.context_lens = host_view(lens_.data(), DType::kI32, {batch_});
    hp.scale = scale();
    kernels::cpu::decode_attention(hp, reference_threads());
    const ErrorStats e = compare_bf16(dout_.host(), ref);
    EXPECT_TRUE(e.finite) << what << ": unwritten or NaN output";
    EXPECT_LT(e.rel_l2, 1e-2) << what;
    EXPECT_LT(e.max_abs, 2e-2) << what;
    if (split_ == Split::kFused) {
      const std::vector<int32_t> c = counters_.host();
      EXPECT_EQ(std::count(c.begin(), c.end(), 0), static_cast<int64_t>(c.size()))
          << what << ": merge counters not left at zero";
    }
  }

 private:
  float scale() const { return 1.f / std::sqrt(static_cast<float>(s_.d)); }

  kernels::DecodeAttentionParams device_params() const {
    const int64_t g = s_.hq / s_.hkv;
    kernels::DecodeAttentionParams p;
    p.out = dout_.view(DType::kBf16, {batch_, s_.hq, s_.d});
    p.q = dq_.view(DType::kBf16, {batch_, s_.hq, s_.d});
    p.q.stride[0] = q_pitch_;
    p.kv = dev_.view(cache_, batch_);
    p.context_lens = dlens_.view(DType::kI32, {batch_});
    p.scale = scale();
    if (split_ != Split::kNone) {
      p.split_out = split_out_.view(DType::kF32, {cells_, g, s_.d});
      p.split_lse = split_lse_.view(DType::kF32, {cells_, g});
    }
    if (split_ == Split::kFused) p.split_counters = counters_.view(DType::kI32, {cells_ / 2});
    return p;
  }

  DecodeShape s_;
  kernels::cuda::DecodeKernel kernel_;
  kernels::cuda::DecodeWalk walk_;
  int64_t batch_, q_pitch_;
  std::mt19937 rng_;
  PagedCase cache_;
  DevicePaged dev_;
  std::vector<uint16_t> q_;  // [B, q_pitch]
  DevVec<uint16_t> dq_, dout_;
  DevVec<int32_t> dlens_;
  std::vector<int32_t> lens_;
  int64_t cells_;
  Split split_;
  DevVec<float> split_out_, split_lse_;  // poisoned: a partial never written reads as NaN
  DevVec<int32_t> counters_;
};

inline constexpr Split kAllSplits[] = {Split::kNone, Split::kMergeKernel, Split::kFused,
                                       Split::kCluster};

// Whether a rig of `batch` sequences with `split` and `cells` scratch cells (0: the default)
// can run: kCluster only where the batch fits one cluster wave within the scratch.
inline bool split_serves(Split split, int64_t batch, const DecodeShape& s, int64_t cells = 0) {
  if (cells <= 0) cells = kernels::cuda::decode_attention_split_cells(s.hq, s.hkv, s.d);
  return split != Split::kCluster || kernels::cuda::decode_cluster_fits(batch, s.hkv, cells);
}

// The kernels that serve a shape: the lane-group one always, the tensor-core one where it
// takes the shape.
inline std::vector<kernels::cuda::DecodeKernel> decode_kernels(const DecodeShape& s) {
  std::vector<kernels::cuda::DecodeKernel> k{kernels::cuda::DecodeKernel::kLanes};
  if (kernels::cuda::mma_decode_supports(s.d, s.hq, s.hkv))
    k.push_back(kernels::cuda::DecodeKernel::kMma);
  return k;
}

// The walks a kernel has for the shape: both where the split kernel has the streamed walk
// (kernels/attention.h's DecodeWalk: kMma, G <= 2, any cache), whatever kAuto would pick for
// the batch; otherwise the one.
inline std::vector<kernels::cuda::DecodeWalk> decode_walks(const DecodeShape& s,
                                                           kernels::cuda::DecodeKernel kernel) {
  if (kernel == kernels::cuda::DecodeKernel::kMma && s.hq / s.hkv <= 2)
    return {kernels::cuda::DecodeWalk::kPieces, kernels::cuda::DecodeWalk::kStream};
  return {kernels::cuda::DecodeWalk::kAuto};
}

inline const char* walk_name(kernels::cuda::DecodeWalk walk) {
  switch (walk) {
    case kernels::cuda::DecodeWalk::kPieces:
      return ", pieces";
    case kernels::cuda::DecodeWalk::kStream:
      return ", stream";
    case kernels::cuda::DecodeWalk::kAuto:
      break;
  }
  return "";
}

// Every kernel (and walk) that serves the shape against the CPU reference.
inline void check_decode(const std::vector<int>& lens, DecodeShape shape, Split split,
                         uint32_t seed, int64_t cells = 0) {
  if (!split_serves(split, static_cast<int64_t>(lens.size()), shape, cells)) return;
  for (const kernels::cuda::DecodeKernel kernel : decode_kernels(shape)) {
    for (const kernels::cuda::DecodeWalk walk : decode_walks(shape, kernel)) {
      DecodeRig rig(lens, shape, split, seed, cells, kernel, walk);
      rig.run(nullptr);
      std::string what = std::string(kernels::cuda::decode_kernel_name(kernel)) + walk_name(walk) +
                         ", " + split_name(split) + ", B=" + std::to_string(lens.size()) + " d" +
                         std::to_string(shape.d) + " " + std::to_string(shape.hq) + "q/" +
                         std::to_string(shape.hkv) + "kv bs" + std::to_string(shape.bs) +
                         (shape.fp8 ? (shape.dtype8 == DType::kI8 ? " int8" : " fp8") : "");
      if (lens.size() == 1) what += " ctx " + std::to_string(lens[0]);
      if (cells > 0) what += " cells " + std::to_string(cells);
      rig.expect_matches_cpu(what);
    }
  }
}

inline std::vector<int> random_lens(int64_t n, int lo, int hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> len(lo, hi);
  std::vector<int> v(n);
  for (auto& l : v) l = len(rng);
  return v;
}

}  // namespace nanovllm::test
