#include "engine/sampling_slots.h"

#include "kernels/check.h"

namespace nanovllm {

SamplingSlots::SamplingSlots(int num_slots) : num_slots_(num_slots) {
  CHECK_GT(num_slots, 0);
  for (int32_t s = 0; s < num_slots; ++s) free_.insert(free_.end(), s);
}

int32_t SamplingSlots::acquire() {
  CHECK_MSG(!free_.empty(), "all " << num_slots_ << " sampling slots are taken: more sequences "
                                   << "run than max_num_seqs");
  const int32_t slot = *free_.begin();
  free_.erase(free_.begin());
  return slot;
}

void SamplingSlots::release(int32_t slot) {
  CHECK_MSG(slot >= 0 && slot < num_slots_,
            "sampling slot " << slot << " is out of range [0, " << num_slots_ << ")");
  CHECK_MSG(free_.insert(slot).second, "sampling slot " << slot << " released twice");
}

}  // namespace nanovllm
