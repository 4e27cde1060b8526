// The operands every paged-attention kernel over rows of q reads (the decode and the mma.sync
// prefill arguments extend them with their own), filled once from the call's tensors, and the
// softmax scale in the log2 domain that every attention kernel uses.
#pragma once

#include <cstdint>

#include "kernels/attention.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/fp8_kv.cuh"
#include "kernels/kv_cache.h"

namespace nanovllm::kernels::cuda {

// Scores are scaled once into the log2 domain, so the softmax runs on exp2.
inline float log2_domain_scale(float scale) {
  return scale * 1.4426950408889634f;  // log2(e)
}

struct PagedAttentionArgs {
  bf16* out;  // [rows, Hq, D], strides out_tok, out_head
  int64_t out_tok, out_head;
  const bf16* q;  // [rows, Hq, D], strides q_tok, q_head
  int64_t q_tok, q_head;
  const void* k_cache;    // [num_blocks, block_size, Hkv, D] contiguous, bf16 or fp8
  const void* v_cache;    // same
  const int8_t* k_scale;  // 8-bit only: [num_blocks, Hkv, block_size] exponents / codes
  const int8_t* v_scale;
  const int32_t* block_tables;  // [B, bt_stride]
  int64_t bt_stride;
  int block_size, hq, hkv;
  float scale_log2;  // log2_domain_scale(scale)
};

// Whether the cache is one of the 8-bit ones (a byte a value and an i8 beside each row), which
// every kernel reads alike but for the conversion (kv_cache_format names which).
inline bool paged_kv_is_8bit(const PagedKV& kv) {
  return kv_cache_has_row_scales(kv.k_cache.dtype);
}

// The checks every caller of paged_attention_args needs (out and q named in messages as the
// caller says): dtypes, contiguous caches, matching head dims, whole GQA groups, q rows in
// 16-byte pieces; an fp8 cache's exponents [num_blocks, Hkv, block_size], block_size a
// multiple of 4 (the decode kernel copies 4 exponents at a time).
inline void check_paged_operands(const TensorView& out, const TensorView& q, const PagedKV& kv,
                                 const char* out_name, const char* q_name) {
  check_cuda_tensor(out, DType::kBf16, out_name);
  check_cuda_tensor(q, DType::kBf16, q_name);
  const DType cache_dtype = paged_kv_is_8bit(kv) ? kv.k_cache.dtype : DType::kBf16;
  check_cuda_tensor(kv.k_cache, cache_dtype, "k_cache");
  check_cuda_tensor(kv.v_cache, cache_dtype, "v_cache");
  if (paged_kv_is_8bit(kv)) {
    for (const TensorView* s : {&kv.k_scale, &kv.v_scale}) {
      check_cuda_tensor(*s, DType::kI8, "k_scale / v_scale");
      CHECK(s->is_contiguous() && reinterpret_cast<uintptr_t>(s->data) % 4 == 0);
      CHECK_EQ(s->ndim, 3);
      CHECK_EQ(s->size(0), kv.k_cache.size(0));
      CHECK_EQ(s->size(1), kv.k_cache.size(2));
      CHECK_EQ(s->size(2), kv.k_cache.size(1));
    }
    CHECK_MSG(kv.k_cache.size(1) % 4 == 0,
              "an fp8 KV cache needs block_size a multiple of 4, not " << kv.k_cache.size(1));
  }
  check_cuda_tensor(kv.block_tables, DType::kI32, "block_tables");
  CHECK(kv.k_cache.is_contiguous() && kv.v_cache.is_contiguous());
  const int64_t hq = q.size(1), hkv = kv.k_cache.size(2);
  CHECK_EQ(kv.k_cache.size(3), q.size(2));
  CHECK_EQ(out.size(1), hq);
  CHECK_EQ(hq % hkv, 0);
  CHECK(q.stride[0] % 8 == 0 && q.stride[1] % 8 == 0 && aligned16(q.data));
}

// out, q and kv as kernel operands, once check_paged_operands has passed.
inline PagedAttentionArgs paged_attention_args(const TensorView& out, const TensorView& q,
                                               const PagedKV& kv, float scale) {
  PagedAttentionArgs a{};
  a.out = out.ptr<bf16>();
  a.out_tok = out.stride[0];
  a.out_head = out.stride[1];
  a.q = q.ptr<bf16>();
  a.q_tok = q.stride[0];
  a.q_head = q.stride[1];
  a.k_cache = kv.k_cache.data;
  a.v_cache = kv.v_cache.data;
  a.k_scale = paged_kv_is_8bit(kv) ? kv.k_scale.ptr<int8_t>() : nullptr;
  a.v_scale = paged_kv_is_8bit(kv) ? kv.v_scale.ptr<int8_t>() : nullptr;
  a.block_tables = kv.block_tables.ptr<int32_t>();
  a.bt_stride = kv.block_tables.stride[0];
  a.block_size = static_cast<int>(kv.k_cache.size(1));
  a.hq = static_cast<int>(q.size(1));
  a.hkv = static_cast<int>(kv.k_cache.size(2));
  a.scale_log2 = log2_domain_scale(scale);
  return a;
}

}  // namespace nanovllm::kernels::cuda
