// The engine's free list of sampling slots: lowest free first, every slot handed out once at a
// time, misuse (double release, none free, out of range) a CHECK failure.
#include "engine/sampling_slots.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kernels/check.h"

namespace nanovllm {
namespace {

TEST(SamplingSlots, AcquireHandsOutTheLowestFreeSlot) {
  SamplingSlots slots(4);
  EXPECT_EQ(slots.num_slots(), 4);
  EXPECT_EQ(slots.num_free(), 4);
  EXPECT_EQ(slots.acquire(), 0);
  EXPECT_EQ(slots.acquire(), 1);
  EXPECT_EQ(slots.acquire(), 2);
  slots.release(1);
  slots.release(0);
  EXPECT_TRUE(slots.is_free(0));
  EXPECT_FALSE(slots.is_free(2));
  EXPECT_EQ(slots.acquire(), 0);  // not the most recently released one
  EXPECT_EQ(slots.acquire(), 1);
  EXPECT_EQ(slots.acquire(), 3);
  EXPECT_EQ(slots.num_free(), 0);
}

TEST(SamplingSlots, AcquireWithNoneFreeIsABug) {
  SamplingSlots slots(2);
  slots.acquire();
  slots.acquire();
  EXPECT_THROW(slots.acquire(), CheckError);
}

TEST(SamplingSlots, DoubleOrOutOfRangeReleaseIsABug) {
  SamplingSlots slots(3);
  const int32_t s = slots.acquire();
  slots.release(s);
  EXPECT_THROW(slots.release(s), CheckError);
  EXPECT_THROW(slots.release(2), CheckError);  // never acquired
  EXPECT_THROW(slots.release(-1), CheckError);
  EXPECT_THROW(slots.release(3), CheckError);
  EXPECT_EQ(slots.num_free(), 3);
}

TEST(SamplingSlots, RandomUseNeverHandsOutAHeldSlot) {
  constexpr int kSlots = 16;
  SamplingSlots slots(kSlots);
  std::vector<int32_t> held;  // [<= kSlots]
  std::mt19937 rng(5);
  for (int i = 0; i < 20000; ++i) {
    const bool can_acquire = static_cast<int>(held.size()) < kSlots;
    if (can_acquire && (held.empty() || rng() % 2 == 0)) {
      int32_t lowest = 0;  // the lowest id not held
      while (std::find(held.begin(), held.end(), lowest) != held.end()) ++lowest;
      ASSERT_EQ(slots.acquire(), lowest);
      held.push_back(lowest);
    } else {
      const size_t k = rng() % held.size();
      slots.release(held[k]);
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
    }
    ASSERT_EQ(slots.num_free(), kSlots - static_cast<int>(held.size()));
  }
}

TEST(SamplingSlots, ZeroSlotsIsABug) {
  EXPECT_THROW(SamplingSlots(0), CheckError);
}

}  // namespace
}  // namespace nanovllm
