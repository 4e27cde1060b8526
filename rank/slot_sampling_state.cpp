#include "rank/slot_sampling_state.h"

#include <algorithm>
#include <cstring>

namespace nanovllm {

namespace {
// Byte offsets of the six arrays in the parameter block of n slots.
struct Layout {
  size_t seeds, temperatures, top_k, top_p, min_p, min_tokens_position, total;
  explicit Layout(size_t n)
      : seeds(0),
        temperatures(8 * n),
        top_k(12 * n),
        top_p(16 * n),
        min_p(20 * n),
        min_tokens_position(24 * n),
        total(28 * n) {}
};

constexpr size_t kMaskWidth = static_cast<size_t>(kMaxMinTokensMaskedIds);

template <typename T>
void put(std::vector<uint8_t>& bytes, size_t offset, int slot, T value) {
  std::memcpy(bytes.data() + offset + sizeof(T) * static_cast<size_t>(slot), &value, sizeof(T));
}

// Host bytes to the device buffer at `offset`, ordered on `stream` (CPU: at once).
void upload(const DeviceBuffer& dst, size_t offset, const void* src, size_t nbytes, Device device,
            cudaStream_t stream) {
  uint8_t* to = static_cast<uint8_t*>(dst.data()) + offset;
  if (device == Device::kCpu) {
    std::memcpy(to, src, nbytes);
  } else {
    // Pageable source: staged before the call returns, so the host copy may change right after.
    CUDA_CHECK(cudaMemcpyAsync(to, src, nbytes, cudaMemcpyHostToDevice, stream));
  }
}
}  // namespace

SlotSamplingState::SlotSamplingState(int num_slots, Device device)
    : num_slots_(num_slots), device_(device) {
  CHECK_GT(num_slots, 0);
  const Layout layout(static_cast<size_t>(num_slots));
  // temperature 0 (greedy), no filters, seed 0, min_tokens_position 0 (nothing masked)
  host_.assign(layout.total, 0);
  for (int s = 0; s < num_slots; ++s) put(host_, layout.top_p, s, 1.0f);
  params_ = DeviceBuffer(layout.total, device);
  params_.copy_from_host(host_.data(), host_.size());
  masked_host_.assign(static_cast<size_t>(num_slots) * kMaskWidth, -1);
  masked_ids_ = DeviceBuffer(masked_host_.size() * sizeof(int32_t), device);
  masked_ids_.copy_from_host(masked_host_.data(), masked_host_.size() * sizeof(int32_t));
  last_tokens_ = DeviceBuffer(sizeof(int32_t) * static_cast<size_t>(num_slots), device);
  last_tokens_.zero();
}

void SlotSamplingState::apply(std::span<const SlotSamplingParams> changed, cudaStream_t stream) {
  if (changed.empty()) return;
  const Layout layout(static_cast<size_t>(num_slots_));
  int lo = num_slots_, hi = -1;  // the masked-id rows to copy: [lo, hi]
  for (const SlotSamplingParams& p : changed) {
    CHECK_MSG(p.slot >= 0 && p.slot < num_slots_,
              "sampling slot " << p.slot << " outside [0, " << num_slots_ << ")");
    CHECK_MSG(p.min_tokens_masked_ids.size() <= kMaskWidth,
              "sampling slot " << p.slot << " masks " << p.min_tokens_masked_ids.size()
                               << " ids, more than " << kMaxMinTokensMaskedIds);
    put(host_, layout.seeds, p.slot, static_cast<int64_t>(p.seed));
    put(host_, layout.temperatures, p.slot, p.temperature);
    put(host_, layout.top_k, p.slot, p.top_k);
    put(host_, layout.top_p, p.slot, p.top_p);
    put(host_, layout.min_p, p.slot, p.min_p);
    // Nothing to mask (no ids, or no position past 0): position 0, and the row stays as it is.
    const bool masks = !p.min_tokens_masked_ids.empty() && p.min_tokens_position > 0;
    put(host_, layout.min_tokens_position, p.slot, masks ? p.min_tokens_position : 0);
    if (!masks) continue;
    int32_t* row = masked_host_.data() + static_cast<size_t>(p.slot) * kMaskWidth;
    std::fill_n(row, kMaskWidth, -1);
    std::copy(p.min_tokens_masked_ids.begin(), p.min_tokens_masked_ids.end(), row);
    lo = std::min(lo, p.slot);
    hi = std::max(hi, p.slot);
  }
  // The whole parameter block (28 bytes a slot): one copy, however many slots changed.
  upload(params_, 0, host_.data(), host_.size(), device_, stream);
  // The masked-id rows of the slots that mask something, as one span (slots are taken lowest
  // first, so the rows of one step's new sequences are usually adjacent).
  if (hi >= lo) {
    const size_t row_bytes = kMaskWidth * sizeof(int32_t);
    upload(masked_ids_, static_cast<size_t>(lo) * row_bytes,
           masked_host_.data() + static_cast<size_t>(lo) * kMaskWidth,
           static_cast<size_t>(hi - lo + 1) * row_bytes, device_, stream);
  }
}

kernels::SamplingSlotParams SlotSamplingState::params() const {
  const Layout layout(static_cast<size_t>(num_slots_));
  auto array = [&](size_t offset, DType dtype) {
    return TensorView(static_cast<uint8_t*>(params_.data()) + offset, dtype, {num_slots_}, device_);
  };
  return kernels::SamplingSlotParams{
      array(layout.temperatures, DType::kF32),
      array(layout.top_k, DType::kI32),
      array(layout.top_p, DType::kF32),
      array(layout.min_p, DType::kF32),
      array(layout.seeds, DType::kI64),
      array(layout.min_tokens_position, DType::kI32),
      masked_ids_.view(DType::kI32, {num_slots_, kMaxMinTokensMaskedIds})};
}

}  // namespace nanovllm
