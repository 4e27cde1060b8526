// store_kvcache: copies each token's K and V rows into its paged-cache slot.
#include "kernels/cuda/common.cuh"
#include "kernels/kv_cache.h"

namespace nanovllm::kernels::cuda {
namespace {

// k, v: [T, Hkv*D] rows (strides k_stride, v_stride); caches: [slots, Hkv*D] contiguous
// (slot = block * block_size + offset); slot_mapping: [T], -1 = skip.
template <bool VEC>
__global__ void store_kvcache_kernel(const bf16* __restrict__ k, int64_t k_stride,
                                     const bf16* __restrict__ v, int64_t v_stride,
                                     bf16* __restrict__ k_cache, bf16* __restrict__ v_cache,
                                     const int32_t* __restrict__ slot_mapping, int row) {
  const int t = blockIdx.x;
  const int64_t slot = slot_mapping[t];
  if (slot < 0) return;
  const bf16* ks = k + t * k_stride;
  const bf16* vs = v + t * v_stride;
  bf16* kd = k_cache + slot * row;
  bf16* vd = v_cache + slot * row;
  if constexpr (VEC) {
    for (int i = threadIdx.x * 8; i < row; i += blockDim.x * 8) {
      store8(kd + i, load8(ks + i));
      store8(vd + i, load8(vs + i));
    }
  } else {
    for (int i = threadIdx.x; i < row; i += blockDim.x) {
      kd[i] = ks[i];
      vd[i] = vs[i];
    }
  }
}

}  // namespace

void store_kvcache(const TensorView& k, const TensorView& v, const TensorView& k_cache,
                   const TensorView& v_cache, const TensorView& slot_mapping, cudaStream_t stream) {
  check_cuda_tensor(k, DType::kBf16, "store_kvcache k");
  check_cuda_tensor(v, DType::kBf16, "store_kvcache v");
  check_cuda_tensor(k_cache, DType::kBf16, "store_kvcache k_cache");
  check_cuda_tensor(v_cache, DType::kBf16, "store_kvcache v_cache");
  check_cuda_tensor(slot_mapping, DType::kI32, "store_kvcache slot_mapping");
  CHECK(k_cache.is_contiguous() && v_cache.is_contiguous());
  const int64_t tokens = k.size(0), heads = k.size(1), dim = k.size(2);
  CHECK_EQ(k.ndim, 3);
  CHECK_EQ(v.size(0), tokens);
  CHECK_EQ(slot_mapping.numel(), tokens);
  CHECK_EQ(k_cache.size(2), heads);
  CHECK_EQ(k_cache.size(3), dim);
  // Heads of one token must be adjacent (they are: views into qkv).
  CHECK_EQ(k.stride[1], dim);
  CHECK_EQ(v.stride[1], dim);
  if (tokens == 0) return;
  const int row = static_cast<int>(heads * dim);
  const bool vec = row % 8 == 0 && k.stride[0] % 8 == 0 && v.stride[0] % 8 == 0 &&
                   aligned16(k.data) && aligned16(v.data) && aligned16(k_cache.data) &&
                   aligned16(v_cache.data);
  const int threads = 128;
  if (vec) {
    store_kvcache_kernel<true><<<tokens, threads, 0, stream>>>(
        k.ptr<bf16>(), k.stride[0], v.ptr<bf16>(), v.stride[0], k_cache.ptr<bf16>(),
        v_cache.ptr<bf16>(), slot_mapping.ptr<int32_t>(), row);
  } else {
    store_kvcache_kernel<false><<<tokens, threads, 0, stream>>>(
        k.ptr<bf16>(), k.stride[0], v.ptr<bf16>(), v.stride[0], k_cache.ptr<bf16>(),
        v_cache.ptr<bf16>(), slot_mapping.ptr<int32_t>(), row);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace nanovllm::kernels::cuda
