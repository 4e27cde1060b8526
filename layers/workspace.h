// Scratch activations reused across steps: one DeviceBuffer per named slot, regrown only
// when a step needs more than the slot holds (so steady-state decode allocates nothing).
#pragma once

#include <initializer_list>
#include <vector>

#include "kernels/device_buffer.h"

namespace nanovllm {

class Workspace {
 public:
  explicit Workspace(Device device) : device_(device) {}
  // A contiguous [dims] view of slot `slot` (slots are small integers chosen by the caller).
  TensorView get(size_t slot, DType dtype, std::initializer_list<int64_t> dims) {
    if (slot >= buffers_.size()) buffers_.resize(slot + 1);
    int64_t numel = 1;
    for (int64_t d : dims) numel *= d;
    const size_t bytes = static_cast<size_t>(numel) * dtype_size(dtype);
    if (buffers_[slot].nbytes() < bytes) buffers_[slot] = DeviceBuffer(bytes, device_);
    return buffers_[slot].view(dtype, dims);
  }

 private:
  Device device_;
  std::vector<DeviceBuffer> buffers_;
};

}  // namespace nanovllm
