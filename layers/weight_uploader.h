// Fills a weight's buffer from a producer of its bytes (Parameter::load's gather from the
// checkpoint mappings), chunk by chunk, the producer running on a few threads.
//   CUDA: each chunk is produced into one of a ring of pinned staging buffers and copied with
//   cudaMemcpyAsync on the legacy default stream, so producing chunk n+1 overlaps the DMA of
//   chunk n, and the next weight's chunks overlap this one's. Copies may still be in flight
//   when upload() returns: later work on the legacy stream or on a blocking stream (and any
//   cudaMemcpy) is ordered after them; a non-blocking stream must synchronise first, as
//   ModelRunner does after loading. The destructor waits for them.
//   CPU: produced straight into the buffer.
// One per Checkpoint (so its staging lives as long as a model load); calls are serialised.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <mutex>
#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "kernels/tensor.h"

namespace nanovllm {

class WeightUploader {
 public:
  // Writes bytes [offset, offset + n) of the weight's image to out. Called concurrently for
  // disjoint ranges; offset and n are multiples of kAlign except where the image ends.
  using Fill = std::function<void(std::byte* out, size_t offset, size_t n)>;

  static constexpr size_t kAlign = 64;  // a cache line: threads never share one
  // 4 x 16 MiB of pinned memory, allocated on first use and freed with the uploader: a 0.6B
  // layer's largest weight (12 MiB) goes in one copy, with three chunks of read-ahead.
  static constexpr size_t kDefaultChunkBytes = size_t{16} << 20;
  static constexpr int kDefaultChunks = 4;
  // Chunks below this are produced by one thread (waking the others costs more).
  static constexpr size_t kMinParallelBytes = size_t{1} << 20;

  // threads <= 0: min(8, hardware threads); one thread gathers from the page cache at about
  // 15 GB/s, so a few keep up with a host-to-device copy. chunk_bytes: a multiple of kAlign.
  // Tests pass small chunks and min_parallel_bytes to put chunk and part edges inside rows.
  explicit WeightUploader(int threads = 0, size_t chunk_bytes = kDefaultChunkBytes,
                          int num_chunks = kDefaultChunks,
                          size_t min_parallel_bytes = kMinParallelBytes);
  ~WeightUploader();
  WeightUploader(const WeightUploader&) = delete;
  WeightUploader& operator=(const WeightUploader&) = delete;

  // Fills dst [nbytes] on `device` (the current CUDA device for Device::kCuda).
  void upload(void* dst, size_t nbytes, Device device, const Fill& fill);

  // Blocks until every copy queued so far has finished (CUDA; a no-op otherwise).
  void wait();

 private:
  // One staging buffer [chunk_bytes_] and the event of the last copy out of it.
  struct Slot {
    std::byte* host = nullptr;
    cudaEvent_t copied = nullptr;
  };
  // out [n] = bytes [offset, offset + n) of the image, split over the pool.
  void produce(std::byte* out, size_t offset, size_t n, const Fill& fill);
  // The next slot of the ring, free to overwrite (allocated on first use).
  Slot& next_free_slot();

  std::mutex mu_;
  kernels::cpu::ThreadPool pool_;
  int threads_;
  size_t chunk_bytes_, min_parallel_bytes_;
  std::vector<Slot> slots_;
  size_t next_ = 0;
  int device_ = -1;  // the CUDA device the events belong to; -1 before the first CUDA upload
};

}  // namespace nanovllm
