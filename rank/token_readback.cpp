#include "rank/token_readback.h"

#include <algorithm>

#include "kernels/check.h"

namespace nanovllm {

TokenReadback::TokenReadback(int64_t max_rows) : max_rows_(max_rows) {
  CHECK_GT(max_rows, 0);
  CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&tokens_),
                           sizeof(int32_t) * static_cast<size_t>(kSlots * max_rows),
                           cudaHostAllocDefault));
  for (int s = 0; s < kSlots; ++s) {
    CUDA_CHECK(cudaEventCreate(&start_[s]));
    CUDA_CHECK(cudaEventCreate(&end_[s]));
  }
}

TokenReadback::~TokenReadback() {  // no throwing in a destructor: a failure only leaks
  for (int s = 0; s < kSlots; ++s) {
    if (start_[s] != nullptr) cudaEventDestroy(start_[s]);
    if (end_[s] != nullptr) cudaEventDestroy(end_[s]);
  }
  cudaFreeHost(tokens_);
}

int TokenReadback::begin(cudaStream_t stream) {
  const int slot = next_;
  next_ = (next_ + 1) % kSlots;
  CUDA_CHECK(cudaEventRecord(start_[slot], stream));
  return slot;
}

void TokenReadback::end(int slot, const TensorView& tokens, cudaStream_t stream) {
  CHECK(slot >= 0 && slot < kSlots);
  CHECK(tokens.dtype == DType::kI32 && tokens.is_contiguous());
  CHECK_LE(tokens.numel(), max_rows_);
  CUDA_CHECK(cudaMemcpyAsync(tokens_ + slot * max_rows_, tokens.data, tokens.nbytes(),
                             cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaEventRecord(end_[slot], stream));
}

std::vector<int32_t> TokenReadback::wait(int slot, int64_t rows) const {
  CHECK(slot >= 0 && slot < kSlots);
  CHECK_LE(rows, max_rows_);
  CUDA_CHECK(cudaEventSynchronize(end_[slot]));
  const int32_t* row = tokens_ + slot * max_rows_;
  return std::vector<int32_t>(row, row + rows);
}

StepTiming TokenReadback::timing(int slot, int previous) const {
  StepTiming t;
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start_[slot], end_[slot]));
  t.gpu_ms = ms;
  if (previous >= 0) {
    CUDA_CHECK(cudaEventElapsedTime(&ms, end_[previous], start_[slot]));
    t.gap_ms = std::max(0.0f, ms);
  }
  return t;
}

}  // namespace nanovllm
