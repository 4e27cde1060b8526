// Parameter::load to a CUDA device through the pinned staging ring: byte for byte what the
// CPU load produces, whatever the chunk size and ring depth (a ring shorter than the chunks
// of one weight makes every chunk wait for an earlier copy), and complete where the contract
// says: for a legacy-stream cudaMemcpy at once, for a non-blocking stream after
// WeightUploader::wait() or after the Checkpoint (its uploader) is gone.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "layers/parameter.h"
#include "layers/safetensors_writer.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/layers/model_folder_test_util.h"
#include "tests/layers/parameter_test_util.h"

namespace nanovllm {
namespace {

std::vector<uint16_t> cpu_bytes(const Parameter& p) {
  const auto* d = static_cast<const uint16_t*>(p.view().data);
  return std::vector<uint16_t>(d, d + p.view().numel());
}

// Read back with a synchronous cudaMemcpy (legacy stream: after the uploads).
std::vector<uint16_t> device_bytes(const Parameter& p) {
  std::vector<uint16_t> h(static_cast<size_t>(p.view().numel()));
  CUDA_CHECK(cudaMemcpy(h.data(), p.view().data, h.size() * 2, cudaMemcpyDeviceToHost));
  return h;
}

// Read back on a non-blocking stream: ordered after nothing but what the caller waited for.
std::vector<uint16_t> device_bytes_non_blocking(const Parameter& p) {
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<uint16_t> h(static_cast<size_t>(p.view().numel()));
  CUDA_CHECK(cudaMemcpyAsync(h.data(), p.view().data, h.size() * 2, cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  CUDA_CHECK(cudaStreamDestroy(s));
  return h;
}

TEST(ParameterLoadCuda, MatchesTheCpuLoadForAnyChunkSizeAndRingDepth) {
  SKIP_WITHOUT_CUDA();
  WeightUploader defaults, one_slot(1, 64, 1, 0), small_ring(3, 128, 2, 0), odd(2, 192, 3, 0);
  for (WeightUploader* up :
       {static_cast<WeightUploader*>(nullptr), &defaults, &one_slot, &small_ring, &odd}) {
    for (const test::LoadCase& c : test::load_cases(up)) {
      SCOPED_TRACE(c.what);
      const Parameter on_cpu = Parameter::load(c.rows, c.col_begin, c.col_end, Device::kCpu);
      const Parameter on_gpu = Parameter::load(c.rows, c.col_begin, c.col_end, Device::kCuda);
      EXPECT_EQ(on_gpu.view().device, Device::kCuda);
      ASSERT_EQ(on_gpu.view().numel(), on_cpu.view().numel());
      EXPECT_EQ(device_bytes(on_gpu), cpu_bytes(on_cpu));
      EXPECT_EQ(cpu_bytes(on_cpu), test::expected_image(c.rows, c.col_begin, c.col_end));
    }
  }
}

TEST(ParameterLoadCuda, ManyChunksThroughTheDefaultRingAreCompleteAfterWait) {
  SKIP_WITHOUT_CUDA();
  // 72 MiB: more chunks than the default ring has slots, so slots are reused.
  WeightUploader up;
  const auto big = test::make_tensor("big", DType::kBf16, {9 * 1024, 4096}, 3, &up);
  const Parameter p = Parameter::load_full(big->t, Device::kCuda);
  up.wait();
  EXPECT_EQ(device_bytes_non_blocking(p), test::expected_image({{&big->t, 0, 9 * 1024}}, 0, 4096));
}

TEST(ParameterLoadCuda, DestroyingTheCheckpointWaitsForItsCopies) {
  SKIP_WITHOUT_CUDA();
  testing::TempDir dir;
  const int64_t rows = 5000, cols = 4096;  // 40 MB: three chunks
  std::vector<uint16_t> w(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = float_to_bf16(test::source_value(4, i));
  write_safetensors(dir.path() / "model.safetensors",
                    {{{"w", DType::kBf16, {rows, cols}}, std::as_bytes(std::span(w))}});
  Parameter p;
  {
    const Checkpoint ck = Checkpoint::open(dir.path());
    p = Parameter::load({RowRange{&ck.tensor("w"), 0, rows}}, 0, cols, Device::kCuda);
  }
  EXPECT_EQ(device_bytes_non_blocking(p), w);
}

}  // namespace
}  // namespace nanovllm
