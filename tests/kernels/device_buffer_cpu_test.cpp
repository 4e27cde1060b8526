#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/device_buffer.h"

namespace nanovllm {
namespace {

TEST(DeviceBufferCpu, HostAllocationIs64ByteAlignedAndRoundTripsBytes) {
  DeviceBuffer buf(100, Device::kCpu);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % 64, 0u);
  std::vector<uint8_t> in(40), out(40);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 3 + 1);
  buf.copy_from_host(in.data(), in.size(), 60);
  buf.copy_to_host(out.data(), out.size(), 60);
  EXPECT_EQ(in, out);
  buf.zero();
  buf.copy_to_host(out.data(), out.size(), 60);
  EXPECT_EQ(out, std::vector<uint8_t>(40, 0));
}

TEST(DeviceBufferCpu, ViewHasShapeAndRejectsOversizedViews) {
  DeviceBuffer buf(4 * 6 * 2, Device::kCpu);
  const TensorView v = buf.view(DType::kBf16, {4, 6});
  EXPECT_EQ(v.data, buf.data());
  EXPECT_EQ(v.numel(), 24);
  EXPECT_EQ(v.stride[0], 6);
  EXPECT_TRUE(v.on_cpu());
  EXPECT_THROW(buf.view(DType::kF32, {4, 6}), CheckError);
}

TEST(DeviceBufferCpu, MoveTransfersOwnership) {
  DeviceBuffer a(64, Device::kCpu);
  void* p = a.data();
  DeviceBuffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is the contract
  DeviceBuffer c;
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.nbytes(), 64u);
}

}  // namespace
}  // namespace nanovllm
