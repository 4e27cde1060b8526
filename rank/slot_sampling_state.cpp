#include "rank/slot_sampling_state.h"

#include <cstring>

namespace nanovllm {

namespace {
// Byte offsets of the five arrays in the parameter block of n slots.
struct Layout {
  size_t seeds, temperatures, top_k, top_p, min_p, total;
  explicit Layout(size_t n)
      : seeds(0), temperatures(8 * n), top_k(12 * n), top_p(16 * n), min_p(20 * n), total(24 * n) {}
};

template <typename T>
void put(std::vector<uint8_t>& bytes, size_t offset, int slot, T value) {
  std::memcpy(bytes.data() + offset + sizeof(T) * static_cast<size_t>(slot), &value, sizeof(T));
}
}  // namespace

SlotSamplingState::SlotSamplingState(int num_slots, Device device)
    : num_slots_(num_slots), device_(device) {
  CHECK_GT(num_slots, 0);
  const Layout layout(static_cast<size_t>(num_slots));
  host_.assign(layout.total, 0);  // temperature 0 (greedy), no filters, seed 0
  for (int s = 0; s < num_slots; ++s) put(host_, layout.top_p, s, 1.0f);
  params_ = DeviceBuffer(layout.total, device);
  params_.copy_from_host(host_.data(), host_.size());
  last_tokens_ = DeviceBuffer(sizeof(int32_t) * static_cast<size_t>(num_slots), device);
  last_tokens_.zero();
}

void SlotSamplingState::apply(std::span<const SlotSamplingParams> changed, cudaStream_t stream) {
  if (changed.empty()) return;
  const Layout layout(static_cast<size_t>(num_slots_));
  for (const SlotSamplingParams& p : changed) {
    CHECK_MSG(p.slot >= 0 && p.slot < num_slots_,
              "sampling slot " << p.slot << " outside [0, " << num_slots_ << ")");
    put(host_, layout.seeds, p.slot, static_cast<int64_t>(p.seed));
    put(host_, layout.temperatures, p.slot, p.temperature);
    put(host_, layout.top_k, p.slot, p.top_k);
    put(host_, layout.top_p, p.slot, p.top_p);
    put(host_, layout.min_p, p.slot, p.min_p);
  }
  // The whole block (24 bytes a slot): one copy, however many slots changed.
  if (device_ == Device::kCpu) {
    std::memcpy(params_.data(), host_.data(), host_.size());
  } else {
    // Pageable source: staged before the call returns, so host_ may change right after.
    CUDA_CHECK(cudaMemcpyAsync(params_.data(), host_.data(), host_.size(), cudaMemcpyHostToDevice,
                               stream));
  }
}

kernels::SamplingSlotParams SlotSamplingState::params() const {
  const Layout layout(static_cast<size_t>(num_slots_));
  auto array = [&](size_t offset, DType dtype) {
    return TensorView(static_cast<uint8_t*>(params_.data()) + offset, dtype, {num_slots_}, device_);
  };
  return kernels::SamplingSlotParams{
      array(layout.temperatures, DType::kF32), array(layout.top_k, DType::kI32),
      array(layout.top_p, DType::kF32), array(layout.min_p, DType::kF32),
      array(layout.seeds, DType::kI64)};
}

}  // namespace nanovllm
