#include "layers/weight_uploader.h"

#include <algorithm>
#include <thread>

#include "kernels/check.h"

namespace nanovllm {

WeightUploader::WeightUploader(int threads, size_t chunk_bytes, int num_chunks,
                               size_t min_parallel_bytes)
    : threads_(threads > 0
                   ? threads
                   : std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 8)),
      chunk_bytes_(chunk_bytes),
      min_parallel_bytes_(min_parallel_bytes),
      slots_(static_cast<size_t>(std::max(num_chunks, 1))) {
  CHECK_GT(chunk_bytes, 0u);
  CHECK_EQ(chunk_bytes % kAlign, 0u);
  CHECK_GT(num_chunks, 0);
}

WeightUploader::~WeightUploader() {
  // No throwing from a destructor: a failed wait or free only leaks.
  for (Slot& s : slots_) {
    if (s.copied != nullptr) {
      cudaEventSynchronize(s.copied);  // the DMA may still read s.host
      cudaEventDestroy(s.copied);
    }
    if (s.host != nullptr) cudaFreeHost(s.host);
  }
}

void WeightUploader::upload(void* dst, size_t nbytes, Device device, const Fill& fill) {
  if (nbytes == 0) return;
  std::lock_guard lock(mu_);
  auto* out = static_cast<std::byte*>(dst);
  if (device == Device::kCpu) {
    for (size_t off = 0; off < nbytes; off += chunk_bytes_)
      produce(out + off, off, std::min(chunk_bytes_, nbytes - off), fill);
    return;
  }
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  if (device_ < 0) device_ = dev;
  CHECK_MSG(dev == device_,
            "weights of one checkpoint uploaded to CUDA devices " << device_ << " and " << dev);
  for (size_t off = 0; off < nbytes; off += chunk_bytes_) {
    const size_t n = std::min(chunk_bytes_, nbytes - off);
    Slot& s = next_free_slot();
    produce(s.host, off, n, fill);
    // Pinned source: truly asynchronous, so the next chunk is produced during this copy.
    CUDA_CHECK(cudaMemcpyAsync(out + off, s.host, n, cudaMemcpyHostToDevice, cudaStreamLegacy));
    CUDA_CHECK(cudaEventRecord(s.copied, cudaStreamLegacy));
  }
}

void WeightUploader::wait() {
  std::lock_guard lock(mu_);
  for (Slot& s : slots_)
    if (s.copied != nullptr) CUDA_CHECK(cudaEventSynchronize(s.copied));
}

WeightUploader::Slot& WeightUploader::next_free_slot() {
  Slot& s = slots_[next_];
  next_ = (next_ + 1) % slots_.size();
  if (s.host == nullptr) {
    void* p = nullptr;
    CUDA_CHECK(cudaHostAlloc(&p, chunk_bytes_, cudaHostAllocPortable));
    s.host = static_cast<std::byte*>(p);
  }
  if (s.copied == nullptr)
    CUDA_CHECK(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming));
  else
    CUDA_CHECK(cudaEventSynchronize(s.copied));  // its previous chunk has left
  return s;
}

void WeightUploader::produce(std::byte* out, size_t offset, size_t n, const Fill& fill) {
  const int parts = n < min_parallel_bytes_ ? 1 : threads_;
  // Part i covers [edge(i), edge(i + 1)); inner edges on kAlign boundaries.
  const auto edge = [&](int i) { return i == parts ? n : n * i / parts / kAlign * kAlign; };
  pool_.run(parts, [&](int i) {
    const size_t begin = edge(i), end = edge(i + 1);
    if (end > begin) fill(out + begin, offset + begin, end - begin);
  });
}

}  // namespace nanovllm
