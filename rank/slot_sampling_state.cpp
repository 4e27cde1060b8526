#include "rank/slot_sampling_state.h"

#include <algorithm>
#include <cstring>

#include "ipc/shard_sampling_rule.h"
#include "kernels/sampler_math.h"
#include "kernels/shard_sampler.h"

namespace nanovllm {

static_assert(kMaxSlotLogprobs == kernels::kMaxLogprobs);
static_assert(kTokenStateInPrompt == kernels::kTokenInPrompt);
static_assert(kTokenStateCountMax == kernels::kTokenCountMax);
static_assert(kShardSamplingMaxTopK == kernels::kShardCandidates);
static_assert(kShardSamplingMaxRanks == kernels::kMaxShardRanks);

namespace {
// Byte offsets of the eleven arrays in the parameter block of n slots.
struct Layout {
  size_t seeds, temperatures, top_k, top_p, min_p, min_tokens_position, repetition, presence,
      frequency, bias_count, num_logprobs, total;
  explicit Layout(size_t n)
      : seeds(0),
        temperatures(8 * n),
        top_k(12 * n),
        top_p(16 * n),
        min_p(20 * n),
        min_tokens_position(24 * n),
        repetition(28 * n),
        presence(32 * n),
        frequency(36 * n),
        bias_count(40 * n),
        num_logprobs(44 * n),
        total(48 * n) {}
};

constexpr size_t kMaskWidth = static_cast<size_t>(kMaxMinTokensMaskedIds);
constexpr size_t kBiasWidth = static_cast<size_t>(kMaxSlotLogitBias);
constexpr int64_t kStagedEntries = 16384;  // token state entries per upload (192 KiB)
constexpr int64_t kLogprobsWidth = kernels::kMaxLogprobs;

template <typename T>
void put(std::vector<uint8_t>& bytes, size_t offset, int slot, T value) {
  std::memcpy(bytes.data() + offset + sizeof(T) * static_cast<size_t>(slot), &value, sizeof(T));
}

// Host bytes to the device buffer at `offset`, ordered on `stream` (CPU: at once).
void upload(const DeviceBuffer& dst, size_t offset, const void* src, size_t nbytes, Device device,
            cudaStream_t stream) {
  if (nbytes == 0) return;
  uint8_t* to = static_cast<uint8_t*>(dst.data()) + offset;
  if (device == Device::kCpu) {
    std::memcpy(to, src, nbytes);
  } else {
    // Pageable source: staged before the call returns, so the host copy may change right after.
    CUDA_CHECK(cudaMemcpyAsync(to, src, nbytes, cudaMemcpyHostToDevice, stream));
  }
}
}  // namespace

SlotSamplingState::SlotSamplingState(int num_slots, int64_t vocab_size, Device device, int rank,
                                     int tp_size)
    : num_slots_(num_slots),
      vocab_(vocab_size),
      device_(device),
      rank0_(rank == 0),
      tp_size_(tp_size) {
  CHECK_GT(num_slots, 0);
  CHECK_GT(vocab_size, 0);
  CHECK_GE(tp_size, 1);
  const size_t n = static_cast<size_t>(num_slots);
  const Layout layout(n);
  // temperature 0 (greedy), no filters, seed 0, nothing masked, penalties off, no bias, no
  // logprobs
  host_.assign(layout.total, 0);
  for (int s = 0; s < num_slots; ++s) {
    put(host_, layout.top_p, s, 1.0f);
    put(host_, layout.repetition, s, 1.0f);
    put(host_, layout.num_logprobs, s, int32_t{-1});
  }
  params_ = DeviceBuffer(layout.total, device);
  params_.copy_from_host(host_.data(), host_.size());
  if (tp_size > 1)
    keys_ = DeviceBuffer(
        n * kernels::kShardCandidates * sizeof(int64_t) * (rank0_ ? 1 + tp_size : 1), device);
  if (!rank0_) return;  // a worker: nothing else is ever read or written
  masked_host_.assign(n * kMaskWidth, -1);
  masked_ids_ = DeviceBuffer(masked_host_.size() * sizeof(int32_t), device);
  masked_ids_.copy_from_host(masked_host_.data(), masked_host_.size() * sizeof(int32_t));
  bias_ids_ = DeviceBuffer(n * kBiasWidth * sizeof(int32_t), device);
  bias_values_ = DeviceBuffer(n * kBiasWidth * sizeof(float), device);
  // Not zeroed: a slot's row is reset whenever a penalized sequence takes the slot, and no
  // other row is read (untouched host pages of a CPU run stay uncommitted).
  token_state_ = DeviceBuffer(n * static_cast<size_t>(vocab_size) * sizeof(uint16_t), device);
  staged_entries_ = DeviceBuffer(static_cast<size_t>(kStagedEntries) * 3 * sizeof(int32_t), device);
  last_tokens_ = DeviceBuffer(sizeof(int32_t) * n, device);
  last_tokens_.zero();
  processed_ = DeviceBuffer(n * static_cast<size_t>(vocab_size) * sizeof(float), device);
  logprobs_ = DeviceBuffer(n * (2 + 2 * kLogprobsWidth) * 4, device);
}

void SlotSamplingState::apply(std::span<const SlotSamplingParams> changed, cudaStream_t stream) {
  if (changed.empty()) return;
  const Layout layout(static_cast<size_t>(num_slots_));
  int lo = num_slots_, hi = -1;  // the masked-id rows to copy: [lo, hi]
  std::vector<int32_t> entries;  // [E, 3] (slot, id, state) of the penalized slots
  std::vector<int32_t> reset;    // penalized slots, their token state zeroed first
  for (const SlotSamplingParams& p : changed) {
    CHECK_MSG(p.slot >= 0 && p.slot < num_slots_,
              "sampling slot " << p.slot << " outside [0, " << num_slots_ << ")");
    if (!rank0_) {  // a worker: the draw parameters (the command carries no more)
      put(host_, layout.seeds, p.slot, static_cast<int64_t>(p.seed));
      put(host_, layout.temperatures, p.slot, p.temperature);
      put(host_, layout.top_k, p.slot, p.top_k);
      put(host_, layout.top_p, p.slot, p.top_p);
      put(host_, layout.min_p, p.slot, p.min_p);
      continue;
    }
    CHECK_MSG(p.min_tokens_masked_ids.size() <= kMaskWidth,
              "sampling slot " << p.slot << " masks " << p.min_tokens_masked_ids.size()
                               << " ids, more than " << kMaxMinTokensMaskedIds);
    CHECK_EQ(p.logit_bias_ids.size(), p.logit_bias_values.size());
    CHECK_LE(p.logit_bias_ids.size(), kBiasWidth);
    CHECK_EQ(p.token_state_ids.size(), p.token_state_values.size());
    put(host_, layout.seeds, p.slot, static_cast<int64_t>(p.seed));
    put(host_, layout.temperatures, p.slot, p.temperature);
    put(host_, layout.top_k, p.slot, p.top_k);
    put(host_, layout.top_p, p.slot, p.top_p);
    put(host_, layout.min_p, p.slot, p.min_p);
    put(host_, layout.repetition, p.slot, p.repetition_penalty);
    put(host_, layout.presence, p.slot, p.presence_penalty);
    put(host_, layout.frequency, p.slot, p.frequency_penalty);
    put(host_, layout.bias_count, p.slot, static_cast<int32_t>(p.logit_bias_ids.size()));
    put(host_, layout.num_logprobs, p.slot, p.num_logprobs);
    const size_t bias_row = static_cast<size_t>(p.slot) * kBiasWidth;
    upload(bias_ids_, bias_row * sizeof(int32_t), p.logit_bias_ids.data(),
           p.logit_bias_ids.size() * sizeof(int32_t), device_, stream);
    upload(bias_values_, bias_row * sizeof(float), p.logit_bias_values.data(),
           p.logit_bias_values.size() * sizeof(float), device_, stream);
    if (kernels::penalties_active(p.repetition_penalty, p.presence_penalty, p.frequency_penalty)) {
      reset.push_back(p.slot);
      for (size_t i = 0; i < p.token_state_ids.size(); ++i) {
        CHECK_MSG(p.token_state_ids[i] >= 0 && p.token_state_ids[i] < vocab_,
                  "token state of slot " << p.slot << " names id " << p.token_state_ids[i]);
        entries.insert(entries.end(),
                       {p.slot, p.token_state_ids[i], int32_t{p.token_state_values[i]}});
      }
    }
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
  // The whole parameter block (48 bytes a slot): one copy, however many slots changed.
  upload(params_, 0, host_.data(), host_.size(), device_, stream);
  if (!rank0_) return;
  // The masked-id rows of the slots that mask something, as one span (slots are taken lowest
  // first, so the rows of one step's new sequences are usually adjacent).
  if (hi >= lo) {
    const size_t row_bytes = kMaskWidth * sizeof(int32_t);
    upload(masked_ids_, static_cast<size_t>(lo) * row_bytes,
           masked_host_.data() + static_cast<size_t>(lo) * kMaskWidth,
           static_cast<size_t>(hi - lo + 1) * row_bytes, device_, stream);
  }
  // Token state: the penalized slots' rows zeroed, then their entries scattered, a staging
  // buffer's worth at a time (stream order keeps a chunk's copy after the last one's scatter).
  const size_t row_bytes = static_cast<size_t>(vocab_) * sizeof(uint16_t);
  for (const int32_t slot : reset) {
    uint8_t* row =
        static_cast<uint8_t*>(token_state_.data()) + static_cast<size_t>(slot) * row_bytes;
    if (device_ == Device::kCpu)
      std::memset(row, 0, row_bytes);
    else
      CUDA_CHECK(cudaMemsetAsync(row, 0, row_bytes, stream));
  }
  const TensorView state = token_state_.view(DType::kU16, {num_slots_, vocab_});
  const int64_t num_entries = static_cast<int64_t>(entries.size() / 3);
  for (int64_t begin = 0; begin < num_entries; begin += kStagedEntries) {
    const int64_t count = std::min(kStagedEntries, num_entries - begin);
    upload(staged_entries_, 0, entries.data() + begin * 3,
           static_cast<size_t>(count) * 3 * sizeof(int32_t), device_, stream);
    const TensorView staged = staged_entries_.view(DType::kI32, {count, 3});
    if (device_ == Device::kCpu)
      kernels::cpu::scatter_token_state(state, staged);
    else
      kernels::cuda::scatter_token_state(state, staged, stream);
  }
}

kernels::SamplingSlotParams SlotSamplingState::draw_params() const {
  const Layout layout(static_cast<size_t>(num_slots_));
  auto array = [&](size_t offset, DType dtype) {
    return TensorView(static_cast<uint8_t*>(params_.data()) + offset, dtype, {num_slots_}, device_);
  };
  kernels::SamplingSlotParams p;
  p.temperatures = array(layout.temperatures, DType::kF32);
  p.top_k = array(layout.top_k, DType::kI32);
  p.top_p = array(layout.top_p, DType::kF32);
  p.min_p = array(layout.min_p, DType::kF32);
  p.seeds = array(layout.seeds, DType::kI64);
  return p;
}

kernels::SamplingSlotParams SlotSamplingState::params() const {
  CHECK(rank0_);
  const Layout layout(static_cast<size_t>(num_slots_));
  auto array = [&](size_t offset, DType dtype) {
    return TensorView(static_cast<uint8_t*>(params_.data()) + offset, dtype, {num_slots_}, device_);
  };
  kernels::SamplingSlotParams p = draw_params();
  p.min_tokens_position = array(layout.min_tokens_position, DType::kI32);
  p.min_tokens_masked_ids = masked_ids_.view(DType::kI32, {num_slots_, kMaxMinTokensMaskedIds});
  p.repetition_penalty = array(layout.repetition, DType::kF32);
  p.presence_penalty = array(layout.presence, DType::kF32);
  p.frequency_penalty = array(layout.frequency, DType::kF32);
  p.token_state = token_state_.view(DType::kU16, {num_slots_, vocab_});
  p.logit_bias_count = array(layout.bias_count, DType::kI32);
  p.logit_bias_ids = bias_ids_.view(DType::kI32, {num_slots_, kMaxSlotLogitBias});
  p.logit_bias_values = bias_values_.view(DType::kF32, {num_slots_, kMaxSlotLogitBias});
  p.num_logprobs = array(layout.num_logprobs, DType::kI32);
  return p;
}

TensorView SlotSamplingState::shard_keys(int64_t rows) const {
  CHECK(tp_size_ > 1 && rows <= num_slots_);
  return TensorView(keys_.data(), DType::kI64, {rows, kernels::kShardCandidates}, device_);
}

TensorView SlotSamplingState::gathered_keys(int64_t rows) const {
  CHECK(rank0_ && tp_size_ > 1 && rows <= num_slots_);
  int64_t* base = static_cast<int64_t*>(keys_.data()) + num_slots_ * kernels::kShardCandidates;
  return TensorView(base, DType::kI64, {tp_size_, rows, kernels::kShardCandidates}, device_);
}

TensorView SlotSamplingState::processed(int64_t rows) const {
  CHECK(rank0_);
  CHECK_LE(rows, num_slots_);
  return processed_.view(DType::kF32, {rows, vocab_});
}

kernels::SampledLogprobs SlotSamplingState::logprobs(int64_t rows) const {
  CHECK(rank0_);
  CHECK_LE(rows, num_slots_);
  const int64_t n = num_slots_;
  uint8_t* base = static_cast<uint8_t*>(logprobs_.data());
  kernels::SampledLogprobs out;
  out.logprob = TensorView(base, DType::kF32, {rows}, device_);
  out.rank = TensorView(base + 4 * n, DType::kI32, {rows}, device_);
  out.top_ids = TensorView(base + 8 * n, DType::kI32, {rows, kLogprobsWidth}, device_);
  out.top_logprobs =
      TensorView(base + (8 + 4 * kLogprobsWidth) * n, DType::kF32, {rows, kLogprobsWidth}, device_);
  return out;
}

}  // namespace nanovllm
