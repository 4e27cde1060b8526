// kernels/prefill_rows.h's piece of a prefill step's sequence lengths, on the device (the step's
// cu_seqlens live there; the host does not keep them).
#include "kernels/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/prefill_rows.h"

namespace nanovllm::kernels::cuda {
namespace {

__global__ void clip_seqlens_kernel(const int32_t* cu_q, const int32_t* cu_k, int batch, int32_t a,
                                    int32_t b, int32_t* out) {
  kernels::clip_seqlens_to_rows(cu_q, cu_k, batch, a, b, out, out + batch + 1);
}

}  // namespace

void clip_seqlens_to_rows(const TensorView& cu_seqlens_q, const TensorView& cu_seqlens_k,
                          int32_t row_begin, int32_t row_end, const TensorView& out,
                          const ExecContext& ctx) {
  check_cuda_tensor(cu_seqlens_q, DType::kI32, "cu_seqlens_q");
  check_cuda_tensor(cu_seqlens_k, DType::kI32, "cu_seqlens_k");
  check_cuda_tensor(out, DType::kI32, "clipped seqlens");
  const int64_t n = cu_seqlens_q.numel();
  CHECK_GE(n, 2);
  CHECK_EQ(cu_seqlens_k.numel(), n);
  CHECK(out.is_contiguous() && out.numel() == 2 * n);
  CHECK(cu_seqlens_q.is_contiguous() && cu_seqlens_k.is_contiguous());
  CHECK_LE(row_begin, row_end);
  clip_seqlens_kernel<<<1, 1, 0, ctx.stream>>>(cu_seqlens_q.ptr<int32_t>(),
                                               cu_seqlens_k.ptr<int32_t>(), static_cast<int>(n - 1),
                                               row_begin, row_end, out.ptr<int32_t>());
  CUDA_CHECK_LAUNCH();
}

}  // namespace nanovllm::kernels::cuda
