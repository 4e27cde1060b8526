// The decode batch sizes that get a CUDA graph (pure arithmetic; runs on the CPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "rank/cuda_graph_runner.h"

namespace nanovllm {
namespace {

TEST(CudaGraphSizes, PowersOfTwoThenStepsOf16ThenMaxNumSeqsItself) {
  const std::vector<int> sizes = CudaGraphRunner::graph_batch_sizes(100);
  const std::vector<int> expected = {1, 2, 4, 8, 16, 32, 48, 64, 80, 96, 100};
  EXPECT_EQ(sizes, expected);
}

TEST(CudaGraphSizes, MaxNumSeqsOnTheGridIsNotRepeated) {
  const std::vector<int> sizes = CudaGraphRunner::graph_batch_sizes(64);
  EXPECT_EQ(sizes.back(), 64);
  EXPECT_EQ(std::count(sizes.begin(), sizes.end(), 64), 1);
  EXPECT_EQ(CudaGraphRunner::graph_batch_sizes(3), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(CudaGraphRunner::graph_batch_sizes(1), (std::vector<int>{1}));
}

TEST(CudaGraphSizes, BeyondTheGridMaxNumSeqsStillGetsItsGraph) {
  const std::vector<int> sizes = CudaGraphRunner::graph_batch_sizes(600);
  EXPECT_EQ(sizes[sizes.size() - 2], 512);
  EXPECT_EQ(sizes.back(), 600);
}

}  // namespace
}  // namespace nanovllm
