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

// The 36 graphs of a default run took 0.34-0.35 GiB a rank at --tp 2 and 4 on H200s, which
// the tp-blind 8 MiB a graph (0.28 GiB) reserved too little for, so every rank warned; 2 H100s
// measured 0.27 GiB at --tp 2 and 0.03 GiB at --tp 1 for the 0.6B shape (28 layers).
TEST(CudaGraphSizes, ReservationCoversTheMeasuredUse) {
  const size_t graphs = CudaGraphRunner::graph_batch_sizes(512).size();
  ASSERT_EQ(graphs, 36u);
  const double gib = 1073741824.0;
  for (const int tp : {2, 4})
    EXPECT_GE(static_cast<double>(CudaGraphRunner::graph_bytes_estimate(graphs, tp, 28)),
              0.35 * gib)
        << "--tp " << tp;
  EXPECT_GE(static_cast<double>(CudaGraphRunner::graph_bytes_estimate(graphs, 1, 28)), 0.03 * gib);
  // Deeper models hold more collectives a graph; --enforce-eager reserves nothing.
  EXPECT_GT(CudaGraphRunner::graph_bytes_estimate(graphs, 2, 64),
            CudaGraphRunner::graph_bytes_estimate(graphs, 2, 28));
  EXPECT_EQ(
      (CudaGraphRunner::graph_bytes_estimate(graphs, 2, 28) -
       CudaGraphRunner::kGraphSetBytesEstimate) /
          graphs,
      CudaGraphRunner::kGraphBytesEstimate + 58 * CudaGraphRunner::kCollectiveNodeBytesEstimate);
  EXPECT_EQ(CudaGraphRunner::graph_bytes_estimate(0, 4, 28), 0u);
}

// The examples' run (16 requests: max_num_seqs 16, sizes 1-16 and two short-context twins)
// took 0.07 GiB at --tp 1 on an H200 (2026-11-29), where 4 MiB a graph reserved 0.03 and the
// run warned: a set of graphs pays a part that does not grow with its size.
TEST(CudaGraphSizes, ASmallSetOfGraphsReservesWhatTheExamplesUsed) {
  const size_t graphs = CudaGraphRunner::graph_batch_sizes(16).size() + 2;
  ASSERT_EQ(graphs, 7u);
  EXPECT_GE(static_cast<double>(CudaGraphRunner::graph_bytes_estimate(graphs, 1, 28)),
            0.07 * 1073741824.0);
}

// With the peer all-reduce a graph holds one NCCL node (the LM head's gather): 72 graphs (36
// sizes in both forms, sampling from shards) of the 8B shape (36 layers) took 0.08-0.09 GiB a
// rank at --tp 2 and 4 on H200s, where NCCL's allowance reserved 1.09 GiB.
TEST(CudaGraphSizes, PeerAllReducesReserveOnlyTheGathersNode) {
  const size_t graphs = 2 * CudaGraphRunner::graph_batch_sizes(512).size();
  const double gib = 1073741824.0;
  const auto peer = CudaGraphRunner::graph_bytes_estimate(graphs, 4, 36, true);
  EXPECT_GE(static_cast<double>(peer), 0.09 * gib);
  EXPECT_LT(static_cast<double>(peer), 0.4 * gib);
  EXPECT_EQ((peer - CudaGraphRunner::kGraphSetBytesEstimate) / graphs,
            CudaGraphRunner::kGraphBytesEstimate + CudaGraphRunner::kCollectiveNodeBytesEstimate);
  EXPECT_GT(CudaGraphRunner::graph_bytes_estimate(graphs, 4, 36), 1.0 * gib);  // NCCL's
  EXPECT_EQ(CudaGraphRunner::graph_bytes_estimate(graphs, 1, 36, true),
            CudaGraphRunner::kGraphSetBytesEstimate +
                graphs * CudaGraphRunner::kGraphBytesEstimate);  // one rank: no collective at all
}

// Sizes up to 8 get a short-context twin (each form) where their cluster bound is positive and
// below max_model_len; where it is at or above it, the plain graph merges in clusters already.
// The bounds stand in for the 0.6B shape's on an H200: 4,096 for 1 row, 2,048 for 2, 1,280 for
// up to 4, none for 8 (decode_cluster_context_bound).
TEST(CudaGraphSizes, SmallSizesGetATwinOnlyWhereTheirClusterBoundIsBelowMaxModelLen) {
  const auto bound = [](int b) { return b == 1 ? 4096 : b == 2 ? 2048 : b <= 4 ? 1280 : 0; };
  const size_t sizes = CudaGraphRunner::graph_batch_sizes(64).size();
  EXPECT_EQ(CudaGraphRunner::graph_count(64, 4097, false, bound), sizes + 3);  // 1, 2, 4
  EXPECT_EQ(CudaGraphRunner::graph_count(64, 4097, true, bound), 2 * (sizes + 3));
  EXPECT_EQ(CudaGraphRunner::graph_count(64, 4096, false, bound), sizes + 2);  // 2, 4
  EXPECT_EQ(CudaGraphRunner::graph_count(64, 2049, false, bound), sizes + 2);
  EXPECT_EQ(CudaGraphRunner::graph_count(64, 2048, false, bound), sizes + 1);  // 4
  EXPECT_EQ(CudaGraphRunner::graph_count(64, 1280, false, bound), sizes);
  EXPECT_EQ(CudaGraphRunner::graph_count(3, 8192, false, bound), 3u + 3u);  // 1, 2, 3 and twins
  // Sizes above kShortContextMaxBatch never get one, whatever the bound says.
  const auto everywhere = [](int) { return 1024; };
  EXPECT_EQ(CudaGraphRunner::graph_count(64, 4096, false, everywhere), sizes + 4);
  const auto never = [](int) { return 0; };
  EXPECT_EQ(CudaGraphRunner::graph_count(64, 4096, false, never), sizes);
}

}  // namespace
}  // namespace nanovllm
