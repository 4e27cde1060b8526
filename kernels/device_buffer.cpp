#include "kernels/device_buffer.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace nanovllm {

namespace {
constexpr size_t kHostAlignment = 64;
}

DeviceBuffer::DeviceBuffer(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (nbytes == 0) return;
  if (device == Device::kCpu) {
    // aligned_alloc needs a size that is a multiple of the alignment.
    const size_t rounded = (nbytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    data_ = std::aligned_alloc(kHostAlignment, rounded);
    if (data_ == nullptr) throw std::bad_alloc();
  } else {
    CUDA_CHECK(cudaMalloc(&data_, nbytes));
  }
}

DeviceBuffer::~DeviceBuffer() {
  release();
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      nbytes_(std::exchange(other.nbytes_, 0)),
      device_(other.device_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    nbytes_ = std::exchange(other.nbytes_, 0);
    device_ = other.device_;
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  if (data_ == nullptr) return;
  if (device_ == Device::kCpu)
    std::free(data_);
  else
    cudaFree(data_);  // no throw from a destructor; a failure here is not recoverable
  data_ = nullptr;
  nbytes_ = 0;
}

TensorView DeviceBuffer::view(DType dtype, std::initializer_list<int64_t> dims) const {
  TensorView v(data_, dtype, dims, device_);
  CHECK_MSG(v.nbytes() <= nbytes_,
            "view " << v.shape_str() << " exceeds buffer of " << nbytes_ << " bytes");
  return v;
}

void DeviceBuffer::copy_from_host(const void* src, size_t nbytes, size_t offset) {
  CHECK_LE(offset + nbytes, nbytes_);
  if (nbytes == 0) return;
  char* dst = static_cast<char*>(data_) + offset;
  if (device_ == Device::kCpu) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyHostToDevice));
  // From pageable memory cudaMemcpy may return before its copy has landed (CUDA's API
  // synchronization behavior), and our non-blocking streams do not wait for the legacy stream
  // it runs on: done before returning, as zero() is.
  CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

void DeviceBuffer::copy_to_host(void* dst, size_t nbytes, size_t offset) const {
  CHECK_LE(offset + nbytes, nbytes_);
  if (nbytes == 0) return;
  const char* src = static_cast<const char*>(data_) + offset;
  if (device_ == Device::kCpu)
    std::memcpy(dst, src, nbytes);
  else
    CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDeviceToHost));
}

void DeviceBuffer::zero() {
  if (nbytes_ == 0) return;
  if (device_ == Device::kCpu)
    std::memset(data_, 0, nbytes_);
  else
    CUDA_CHECK(cudaMemset(data_, 0, nbytes_));
  // Done before returning: our non-blocking streams do not wait for the legacy stream.
  if (device_ == Device::kCuda) CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace nanovllm
