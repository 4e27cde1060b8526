// Which prefill attention kernel runs: the Hopper kernel on a compute-capability-9.0 device for
// the shapes it serves (decided from the device once per process), the mma.sync kernel
// everywhere else. NANOVLLM_PREFILL_ATTENTION=mma keeps the mma.sync kernel everywhere (whole-
// model comparisons of the two, and a way around the new kernel should a shape misbehave).
#include <string>

#include "kernels/attention.h"
#include "kernels/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/prefill_attention_kernels.h"
#include "kernels/cuda/sm90_device.h"
#include "kernels/env_choice.h"

namespace nanovllm::kernels::cuda {
namespace {

bool mma_forced() {
  static const bool forced = env_choice("NANOVLLM_PREFILL_ATTENTION", {"mma", "auto"}) == "mma";
  return forced;
}

}  // namespace

// Asked once per process (every rank's GPU is the same kind): every decode launch reads it.
int multiprocessor_count() {
  static const int sms = [] {
    int dev = 0, n = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  }();
  return sms;
}

const char* prefill_kernel_name(PrefillKernel kernel) {
  return kernel == PrefillKernel::kHopper ? "hopper" : "mma";
}

bool hopper_prefill_supports(int64_t head_dim, int64_t hq, int64_t hkv, int64_t block_size) {
  return sm90a_built() && hopper_prefill_shape_ok(head_dim, hq, hkv, block_size) &&
         device_is_sm90();
}

PrefillKernel prefill_attention_kernel(int64_t head_dim, int64_t hq, int64_t hkv,
                                       int64_t block_size) {
  return !mma_forced() && hopper_prefill_supports(head_dim, hq, hkv, block_size)
             ? PrefillKernel::kHopper
             : PrefillKernel::kMma;
}

void prefill_attention(const PrefillAttentionParams& p, PrefillKernel kernel, cudaStream_t stream) {
  if (kernel == PrefillKernel::kHopper) {
    CHECK_MSG(device_is_sm90(), "the Hopper prefill kernel needs a compute capability 9.0 GPU");
    prefill_attention_hopper(p, stream);
  } else {
    prefill_attention_mma(p, stream);
  }
}

void prefill_attention(const PrefillAttentionParams& p, cudaStream_t stream) {
  // The Hopper kernel's TMA wants 16-byte aligned q rows; anything else takes the mma kernel.
  // Its wgmma takes bf16 operands: an fp8 cache reaches it staged as bf16 (fp8_staging.cu),
  // else the mma kernel reads fp8 itself (converting tiles on their way to shared memory).
  const bool aligned =
      aligned16(p.q.data) && p.q.stride[0] % 8 == 0 && p.q.stride[1] % 8 == 0 && p.q.stride[2] == 1;
  const PrefillKernel kernel =
      aligned ? prefill_attention_kernel(p.q.size(2), p.q.size(1), p.kv.k_cache.size(2),
                                         p.kv.k_cache.size(1))
              : PrefillKernel::kMma;
  if (p.kv.k_cache.dtype == DType::kBf16) {
    prefill_attention(p, kernel, stream);
    return;
  }
  // fp8: the Hopper kernel over the call's blocks staged as bf16, where they fit.
  const bool staged = kernel == PrefillKernel::kHopper && p.staging_k.data != nullptr &&
                      p.kv_blocks > 0 && p.kv_blocks <= p.staging_k.size(0);
  if (!staged) {
    prefill_attention(p, PrefillKernel::kMma, stream);
    return;
  }
  PrefillAttentionParams bf16 = p;
  bf16.kv = stage_fp8_blocks(p, stream);
  prefill_attention(bf16, PrefillKernel::kHopper, stream);
}

}  // namespace nanovllm::kernels::cuda
