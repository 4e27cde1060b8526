// An owning, untyped allocation on the host (64-byte aligned, for vector loads) or on the
// current CUDA device (cudaMalloc). Typed access goes through view(dtype, dims), a TensorView
// of the leading bytes. Move-only.
#pragma once

#include <cstddef>
#include <initializer_list>

#include "kernels/tensor.h"

namespace nanovllm {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t nbytes, Device device);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Contiguous view of the first numel(dims) * dtype_size bytes; CHECKs that they fit.
  TensorView view(DType dtype, std::initializer_list<int64_t> dims) const;

  // Host <-> buffer copies of nbytes starting at byte offset, complete on return.
  void copy_from_host(const void* src, size_t nbytes, size_t offset = 0);
  void copy_to_host(void* dst, size_t nbytes, size_t offset = 0) const;
  void zero();  // complete on return (CUDA: synchronises the device)

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool empty() const { return data_ == nullptr; }

 private:
  void release() noexcept;

  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_ = Device::kCpu;
};

}  // namespace nanovllm
