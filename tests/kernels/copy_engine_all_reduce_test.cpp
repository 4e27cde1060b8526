// The copy-engine all-reduce's host side (kernels/copy_engine_all_reduce.h), no GPU needed: the
// inbox layout (every call's slots apart from the other generation's, each sender's apart from
// the others') and which tensors and groups a call takes; a refused call throws before it
// enqueues anything (the pointers here are never dereferenced).
#include "kernels/copy_engine_all_reduce.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

namespace nanovllm {
namespace {

constexpr size_t kSlot = size_t{16} << 20;

// A fake, 16-byte aligned device address: only its value is looked at.
void* fake(uintptr_t at) {
  return reinterpret_cast<void*>(at);
}

kernels::CopyEngineBuffers group(int rank, int world) {
  kernels::CopyEngineBuffers b;
  b.rank = rank;
  b.world_size = world;
  b.slot_bytes = kSlot;
  for (int r = 0; r < world; ++r) {
    b.inbox[r] = fake(0x10000000ull * (r + 1));
    b.flags[r] = static_cast<uint32_t*>(fake(0x10000000ull * (r + 1) - 256));
  }
  return b;
}

TEST(CopyEngineLayout, ConsecutiveCallsUseTheTwoGenerationsAndEverySenderItsOwnSlot) {
  for (const int world : {2, 4, 8}) {
    std::set<size_t> seen;
    for (uint32_t call = 1; call <= 2; ++call)
      for (int s = 0; s < world; ++s) {
        const size_t at = kernels::copy_engine_slot_offset(call, s, world, kSlot);
        EXPECT_EQ(at % kSlot, 0u);
        EXPECT_LT(at + kSlot, kernels::copy_engine_inbox_bytes(world, kSlot) + 1);
        EXPECT_TRUE(seen.insert(at).second) << "call " << call << ", sender " << s;
      }
    // Call c + 2 reuses call c's slots (the protocol's reason for two generations).
    EXPECT_EQ(kernels::copy_engine_slot_offset(3, 1, world, kSlot),
              kernels::copy_engine_slot_offset(1, 1, world, kSlot));
  }
  EXPECT_EQ(kernels::copy_engine_inbox_bytes(2, kSlot), 4 * kSlot);
  EXPECT_EQ(kernels::copy_engine_flag_bytes(4), 32u);  // the reduce-scatter's and all-gather's
}

// The two-phase form's row blocks cover the rows once, in rank order, each at most
// ceil(rows / ranks) long, the last ones empty where there are fewer rows than ranks.
TEST(CopyEngineLayout, RowBlocksCoverEveryRowOnceInRankOrder) {
  EXPECT_FALSE(kernels::copy_engine_two_phase(2));
  EXPECT_TRUE(kernels::copy_engine_two_phase(4));
  for (const int world : {4, 8})
    for (const int64_t rows : {int64_t{1}, int64_t{3}, int64_t{37}, int64_t{2048}, int64_t{2063}}) {
      int64_t next = 0;
      for (int j = 0; j < world; ++j) {
        const kernels::RowBlock b = kernels::copy_engine_row_block(rows, world, j);
        EXPECT_EQ(b.first, next) << world << " ranks, " << rows << " rows, block " << j;
        EXPECT_GE(b.count, 0);
        EXPECT_LE(b.count, (rows + world - 1) / world);
        next = b.first + b.count;
      }
      EXPECT_EQ(next, rows) << world << " ranks, " << rows << " rows";
    }
  EXPECT_EQ(kernels::copy_engine_row_block(37, 4, 3).count, 7);  // 10, 10, 10, 7
  EXPECT_EQ(kernels::copy_engine_row_block(3, 4, 3).count, 0);   // 1, 1, 1, 0
}

TEST(CopyEngineLayout, AFullSlotFitsAndOneRowMoreDoesNot) {
  const kernels::CopyEngineBuffers b = group(0, 2);
  const int64_t rows = static_cast<int64_t>(kSlot / (4096 * 2));  // 2,048 rows of 4,096
  EXPECT_TRUE(kernels::copy_engine_fits(
      TensorView(fake(0x1000), DType::kBf16, {rows, 4096}, Device::kCuda), b));
  EXPECT_FALSE(kernels::copy_engine_fits(
      TensorView(fake(0x1000), DType::kBf16, {rows + 1, 4096}, Device::kCuda), b));
}

TEST(CopyEngineLayout, TensorsAndGroupsTheCallCannotTakeAreRefused) {
  const TensorView ok(fake(0x1000), DType::kBf16, {16, 4096}, Device::kCuda);
  EXPECT_TRUE(kernels::copy_engine_fits(ok, group(1, 4)));
  EXPECT_FALSE(kernels::copy_engine_fits(ok, group(0, 3)));  // no kernel for 3 ranks
  kernels::CopyEngineBuffers unmapped = group(0, 2);
  unmapped.inbox[1] = nullptr;
  EXPECT_FALSE(kernels::copy_engine_fits(ok, unmapped));
  EXPECT_FALSE(kernels::copy_engine_fits(
      TensorView(fake(0x1000), DType::kF32, {16, 4096}, Device::kCuda), group(0, 2)));
  EXPECT_FALSE(kernels::copy_engine_fits(
      TensorView(fake(0x1008), DType::kBf16, {16, 4096}, Device::kCuda), group(0, 2)));
  EXPECT_FALSE(kernels::copy_engine_fits(
      TensorView(fake(0x1000), DType::kBf16, {16, 4092}, Device::kCuda), group(0, 2)));
  TensorView padded(fake(0x1000), DType::kBf16, {16, 4096}, Device::kCuda);
  padded.stride[0] = 4096 + 64;  // rows with padding: the copy moves one block of bytes
  EXPECT_FALSE(kernels::copy_engine_fits(padded, group(0, 2)));
  EXPECT_FALSE(
      kernels::copy_engine_fits(TensorView(fake(0x1000), DType::kBf16, {16, 4096}), group(0, 2)));
}

TEST(CopyEngineLayout, ARefusedCallThrowsBeforeEnqueuingAnything) {
  const TensorView big(fake(0x1000), DType::kBf16, {2049, 4096}, Device::kCuda);
  const TensorView weight(fake(0x2000), DType::kBf16, {4096}, Device::kCuda);
  EXPECT_THROW(kernels::copy_engine_add_rms_norm(big, big, weight, 1e-6f, group(0, 2), 1, nullptr),
               std::invalid_argument);
  const TensorView x(fake(0x1000), DType::kBf16, {16, 4096}, Device::kCuda);
  const TensorView wrong_weight(fake(0x2000), DType::kBf16, {1024}, Device::kCuda);
  EXPECT_THROW(
      kernels::copy_engine_add_rms_norm(x, x, wrong_weight, 1e-6f, group(0, 2), 1, nullptr),
      std::invalid_argument);
  EXPECT_THROW(kernels::copy_engine_add_rms_norm(x, x, weight, 1e-6f, group(0, 2), 0, nullptr),
               std::invalid_argument);  // calls count from 1
}

}  // namespace
}  // namespace nanovllm
