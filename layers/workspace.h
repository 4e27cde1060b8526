// Scratch activations reused across steps: one DeviceBuffer per named slot, regrown only
// when a step needs more than the slot holds (so steady-state decode allocates nothing).
// freeze() ends the growth: CUDA graphs captured afterwards hold the slots' addresses, so a
// later regrow would leave them pointing at freed memory; a frozen slot that is too small is
// a broken invariant (the warm-up did not size it for the largest step).
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
    int64_t numel = 1;
    for (int64_t d : dims) numel *= d;
    const size_t bytes = static_cast<size_t>(numel) * dtype_size(dtype);
    const bool fits = slot < buffers_.size() && buffers_[slot].nbytes() >= bytes;
    if (!fits) {
      CHECK_MSG(!frozen_, "workspace slot " << slot << " would grow to " << bytes
                                            << " bytes after being frozen (CUDA graphs hold it)");
      if (slot >= buffers_.size()) buffers_.resize(slot + 1);
      buffers_[slot] = DeviceBuffer(bytes, device_);
    }
    return buffers_[slot].view(dtype, dims);
  }

  // Bytes slot `slot` holds now (0 when never used).
  size_t slot_bytes(size_t slot) const {
    return slot < buffers_.size() ? buffers_[slot].nbytes() : 0;
  }
  // Zeroes what slot `slot` holds now (complete on return).
  void zero(size_t slot) {
    CHECK_LT(slot, buffers_.size());
    buffers_[slot].zero();
  }
  void freeze() { frozen_ = true; }
  bool frozen() const { return frozen_; }
  // Bytes held by every slot together.
  size_t nbytes() const {
    size_t total = 0;
    for (const DeviceBuffer& b : buffers_) total += b.nbytes();
    return total;
  }

 private:
  Device device_;
  std::vector<DeviceBuffer> buffers_;
  bool frozen_ = false;
};

}  // namespace nanovllm
