// N GPUs of this process as one peer all-reduce group (kernels/peer_all_reduce.h): peer access
// between the devices stands in for the CUDA IPC mappings of the multi-process runtime. For the
// kernel's tests and its micro-benchmark (bench/all_reduce_bench.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "kernels/check.h"
#include "kernels/peer_all_reduce.h"

namespace nanovllm::test {

class PeerGroup {
 public:
  // How many of the first GPUs can all reach each other (0 or 1: no group possible).
  static int usable_gpus() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
    int usable = n > 0 ? 1 : 0;
    for (int k = 1; k < n; ++k) {
      bool all = true;
      for (int j = 0; j < k; ++j) {
        int a = 0, b = 0;
        CUDA_CHECK(cudaDeviceCanAccessPeer(&a, k, j));
        CUDA_CHECK(cudaDeviceCanAccessPeer(&b, j, k));
        all = all && a && b;
      }
      if (!all) break;
      usable = k + 1;
    }
    return usable;
  }

  // GPUs 0..n-1, each with a staging buffer of two halves of `capacity` bytes, an inbox for
  // pushed messages of `capacity` bytes (every element kPushEmpty), zeroed flags and counters,
  // an io buffer of `capacity` bytes and a stream.
  PeerGroup(int n, size_t capacity) : n_(n), capacity_(capacity) {
    for (int d = 0; d < n; ++d) {
      CUDA_CHECK(cudaSetDevice(d));
      for (int p = 0; p < n; ++p) {
        if (p == d) continue;
        const cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) {
          (void)cudaGetLastError();
        } else {
          CUDA_CHECK(e);
        }
      }
      void* p = nullptr;
      CUDA_CHECK(cudaMalloc(&p, 2 * capacity));
      data_.push_back(p);
      CUDA_CHECK(cudaMalloc(&p, kernels::kPeerFlagWords * sizeof(uint32_t)));
      CUDA_CHECK(cudaMemset(p, 0, kernels::kPeerFlagWords * sizeof(uint32_t)));
      flags_.push_back(static_cast<uint32_t*>(p));
      CUDA_CHECK(cudaMalloc(&p, kernels::kPeerAllReduceMaxBlocks * sizeof(uint32_t)));
      CUDA_CHECK(cudaMemset(p, 0, kernels::kPeerAllReduceMaxBlocks * sizeof(uint32_t)));
      counters_.push_back(static_cast<uint32_t*>(p));
      CUDA_CHECK(cudaMalloc(&p, capacity));
      io_.push_back(p);
      const size_t inbox_bytes = kernels::peer_push_inbox_bytes(n, capacity);
      CUDA_CHECK(cudaMalloc(&p, inbox_bytes));
      const std::vector<uint16_t> empty(inbox_bytes / 2, kernels::kPushEmpty);
      CUDA_CHECK(cudaMemcpy(p, empty.data(), inbox_bytes, cudaMemcpyHostToDevice));
      inbox_.push_back(p);
      cudaStream_t s = nullptr;
      CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      streams_.push_back(s);
    }
    sync();
  }
  ~PeerGroup() {
    for (int d = 0; d < n_; ++d) {
      cudaSetDevice(d);
      cudaStreamDestroy(streams_[d]);
      cudaFree(data_[d]);
      cudaFree(flags_[d]);
      cudaFree(counters_[d]);
      cudaFree(io_[d]);
      cudaFree(inbox_[d]);
    }
  }
  PeerGroup(const PeerGroup&) = delete;
  PeerGroup& operator=(const PeerGroup&) = delete;

  int size() const { return n_; }
  cudaStream_t stream(int d) const { return streams_[d]; }
  void* io(int d) const { return io_[d]; }
  kernels::PeerAllReduceBuffers buffers(int rank) const {
    kernels::PeerAllReduceBuffers b;
    b.rank = rank;
    b.world_size = n_;
    for (int r = 0; r < n_; ++r) {
      b.data[r] = data_[r];
      b.flags[r] = flags_[r];
      b.inbox[r] = inbox_[r];
    }
    b.inbox_bytes = capacity_;
    b.counters = counters_[rank];
    b.capacity_bytes = capacity_;
    return b;
  }
  void sync() const {
    for (int d = 0; d < n_; ++d) {
      CUDA_CHECK(cudaSetDevice(d));
      CUDA_CHECK(cudaDeviceSynchronize());
    }
  }

 private:
  int n_;
  size_t capacity_;
  std::vector<void*> data_, io_, inbox_;
  std::vector<uint32_t*> flags_, counters_;
  std::vector<cudaStream_t> streams_;
};

}  // namespace nanovllm::test
