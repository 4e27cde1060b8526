// Embedding gather for one vocabulary shard: rows outside [vocab_start, vocab_start + V)
// become zeros so the tensor-parallel all-reduce adds exactly the owner's row.
#include "kernels/cuda/common.cuh"
#include "kernels/embedding.h"

namespace nanovllm::kernels::cuda {
namespace {

// out: [T, H] (row stride out_stride), ids: [T], weight: [V, H] (row stride w_stride).
// VEC: 8 bf16 per access when H and both strides allow 16-byte alignment.
template <bool VEC>
__global__ void embedding_kernel(bf16* __restrict__ out, int64_t out_stride,
                                 const int32_t* __restrict__ ids, const bf16* __restrict__ weight,
                                 int64_t w_stride, int64_t vocab_start, int64_t vocab_size,
                                 int hidden) {
  NANOVLLM_TRACE_SCOPE(trace::kEmbedding, weight);
  const int t = blockIdx.x;
  const int64_t row = static_cast<int64_t>(ids[t]) - vocab_start;
  const bool inside = row >= 0 && row < vocab_size;
  bf16* dst = out + t * out_stride;
  const bf16* src = weight + (inside ? row : 0) * w_stride;
  if constexpr (VEC) {
    Bf16x8 zero;
    for (int j = 0; j < 8; ++j) zero.v[j] = to_bf16(0.f);
    for (int i = threadIdx.x * 8; i < hidden; i += blockDim.x * 8)
      store8(dst + i, inside ? load8(src + i) : zero);
  } else {
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = inside ? src[i] : to_bf16(0.f);
  }
}

}  // namespace

void embedding(const TensorView& out, const TensorView& ids, const TensorView& weight,
               int64_t vocab_start, cudaStream_t stream) {
  check_cuda_tensor(out, DType::kBf16, "embedding out");
  check_cuda_tensor(ids, DType::kI32, "embedding ids");
  check_cuda_tensor(weight, DType::kBf16, "embedding weight");
  const int64_t tokens = out.size(0), hidden = out.size(1);
  CHECK_EQ(ids.numel(), tokens);
  CHECK_EQ(weight.size(1), hidden);
  if (tokens == 0) return;
  const bool vec = hidden % 8 == 0 && out.stride[0] % 8 == 0 && weight.stride[0] % 8 == 0 &&
                   aligned16(out.data) && aligned16(weight.data);
  const int threads = 128;
  if (vec) {
    embedding_kernel<true><<<tokens, threads, 0, stream>>>(
        out.ptr<bf16>(), out.stride[0], ids.ptr<int32_t>(), weight.ptr<bf16>(), weight.stride[0],
        vocab_start, weight.size(0), static_cast<int>(hidden));
  } else {
    embedding_kernel<false><<<tokens, threads, 0, stream>>>(
        out.ptr<bf16>(), out.stride[0], ids.ptr<int32_t>(), weight.ptr<bf16>(), weight.stride[0],
        vocab_start, weight.size(0), static_cast<int>(hidden));
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace nanovllm::kernels::cuda
