// The peer-memory all-reduce (kernels/peer_all_reduce.h) on 2 and 4 GPUs of this process:
// every rank ends with exactly the f32 sum over the ranks in order 0..N-1 rounded once to bf16
// (so the ranks agree to the bit and a rerun gives the same bits), for every size class (one
// element, odd sizes on the scalar path, 16-byte vectors, parts that do not divide evenly,
// several MiB), both algorithms, many calls in a row and replays of a captured CUDA graph.
// Skips (saying so) below two GPUs with peer access.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/rms_norm.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/peer_group.h"

namespace nanovllm {
namespace {

using kernels::PeerAllReduceAlgo;
using test::PeerGroup;

constexpr size_t kCapacity = size_t{8} << 20;

#define SKIP_WITHOUT_PEERS(n)                                                                   \
  do {                                                                                          \
    if (PeerGroup::usable_gpus() < (n))                                                         \
      GTEST_SKIP() << "needs " << (n) << " GPUs with peer access, " << PeerGroup::usable_gpus() \
                   << " here";                                                                  \
  } while (0)

// inputs[r]: rank r's random bf16 values.
std::vector<std::vector<uint16_t>> random_inputs(int ranks, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<uint16_t>> in;
  for (int r = 0; r < ranks; ++r) in.push_back(test::random_bf16(n, rng, -4.f, 4.f));
  return in;
}

std::vector<uint16_t> reference_sum(const std::vector<std::vector<uint16_t>>& in) {
  std::vector<uint16_t> out(in[0].size());
  for (size_t i = 0; i < out.size(); ++i) {
    float acc = 0.f;
    for (const auto& r : in) acc += bf16_to_float(r[i]);
    out[i] = float_to_bf16(acc);
  }
  return out;
}

void upload(const PeerGroup& g, const std::vector<std::vector<uint16_t>>& in) {
  for (int d = 0; d < g.size(); ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaMemcpy(g.io(d), in[d].data(), in[d].size() * 2, cudaMemcpyHostToDevice));
  }
}

std::vector<uint16_t> download(const PeerGroup& g, int d, size_t n) {
  std::vector<uint16_t> out(n);
  CUDA_CHECK(cudaSetDevice(d));
  CUDA_CHECK(cudaMemcpy(out.data(), g.io(d), n * 2, cudaMemcpyDeviceToHost));
  return out;
}

void all_reduce(const PeerGroup& g, size_t n, PeerAllReduceAlgo algo) {
  for (int d = 0; d < g.size(); ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    const TensorView io(g.io(d), DType::kBf16, {static_cast<int64_t>(n)}, Device::kCuda);
    kernels::peer_all_reduce_sum(io, g.buffers(d), algo, g.stream(d));
  }
  g.sync();
}

void expect_exact_sum_on_every_rank(int ranks, PeerAllReduceAlgo algo) {
  PeerGroup g(ranks, kCapacity);
  uint32_t seed = 1;
  // Sizes: scalar path (odd), one vector, parts shorter than a block, uneven parts, 4 MiB.
  for (const size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{24}, size_t{4096},
                         size_t{4096 * 3 + 8}, size_t{100003}, size_t{1} << 21}) {
    for (int repeat = 0; repeat < 3; ++repeat) {  // counters advance in step on every rank
      const auto in = random_inputs(ranks, n, seed++);
      const auto want = reference_sum(in);
      upload(g, in);
      all_reduce(g, n, algo);
      for (int d = 0; d < ranks; ++d)
        ASSERT_EQ(download(g, d, n), want) << ranks << " ranks, " << n << " elements, rank " << d;
    }
  }
}

class PeerAllReduceSizes : public ::testing::TestWithParam<std::tuple<int, PeerAllReduceAlgo>> {};

TEST_P(PeerAllReduceSizes, EveryRankGetsTheExactOrderedSum) {
  const auto [ranks, algo] = GetParam();
  SKIP_WITHOUT_PEERS(ranks);
  expect_exact_sum_on_every_rank(ranks, algo);
}

INSTANTIATE_TEST_SUITE_P(
    PeerAllReduceCuda, PeerAllReduceSizes,
    ::testing::Combine(::testing::Values(2, 4),
                       ::testing::Values(PeerAllReduceAlgo::kOneShot, PeerAllReduceAlgo::kTwoShot)),
    [](const auto& info) {
      return std::to_string(std::get<0>(info.param)) + "Ranks" +
             (std::get<1>(info.param) == PeerAllReduceAlgo::kOneShot ? "OneShot" : "TwoShot");
    });

TEST(PeerAllReduceCuda, AlternatingAlgorithmsAndSizesKeepTheRanksInStep) {
  SKIP_WITHOUT_PEERS(2);
  PeerGroup g(2, kCapacity);
  for (int call = 0; call < 40; ++call) {
    const size_t n = call % 3 == 0 ? 5 : (call % 3 == 1 ? 8192 : 65536 + 16);
    const auto algo = call % 2 ? PeerAllReduceAlgo::kTwoShot : PeerAllReduceAlgo::kOneShot;
    const auto in = random_inputs(2, n, 1000 + call);
    upload(g, in);
    all_reduce(g, n, algo);
    ASSERT_EQ(download(g, 0, n), reference_sum(in)) << "call " << call;
    ASSERT_EQ(download(g, 1, n), reference_sum(in)) << "call " << call;
  }
}

// A graph of (copy the input in, all-reduce) per rank, replayed: the call counters live on the
// device, so every replay waits for the peers' replay of the same call.
TEST(PeerAllReduceCuda, GraphReplaysAreEachAFullAllReduce) {
  SKIP_WITHOUT_PEERS(2);
  const int ranks = PeerGroup::usable_gpus() >= 4 ? 4 : 2;
  PeerGroup g(ranks, kCapacity);
  const size_t n = 3 * 4096 + 8;
  std::vector<void*> src(ranks);
  std::vector<cudaGraphExec_t> execs(ranks);
  for (const auto algo : {PeerAllReduceAlgo::kOneShot, PeerAllReduceAlgo::kTwoShot}) {
    const auto in = random_inputs(ranks, n, algo == PeerAllReduceAlgo::kOneShot ? 77 : 78);
    for (int d = 0; d < ranks; ++d) {
      CUDA_CHECK(cudaSetDevice(d));
      CUDA_CHECK(cudaMalloc(&src[d], n * 2));
      CUDA_CHECK(cudaMemcpy(src[d], in[d].data(), n * 2, cudaMemcpyHostToDevice));
      cudaGraph_t graph = nullptr;
      CUDA_CHECK(cudaStreamBeginCapture(g.stream(d), cudaStreamCaptureModeThreadLocal));
      CUDA_CHECK(cudaMemcpyAsync(g.io(d), src[d], n * 2, cudaMemcpyDeviceToDevice, g.stream(d)));
      const TensorView io(g.io(d), DType::kBf16, {static_cast<int64_t>(n)}, Device::kCuda);
      kernels::peer_all_reduce_sum(io, g.buffers(d), algo, g.stream(d));
      CUDA_CHECK(cudaStreamEndCapture(g.stream(d), &graph));
      CUDA_CHECK(cudaGraphInstantiate(&execs[d], graph, 0));
      CUDA_CHECK(cudaGraphDestroy(graph));
    }
    const auto want = reference_sum(in);
    for (int replay = 0; replay < 5; ++replay) {
      for (int d = 0; d < ranks; ++d) {
        CUDA_CHECK(cudaSetDevice(d));
        CUDA_CHECK(cudaGraphLaunch(execs[d], g.stream(d)));
      }
      g.sync();
      for (int d = 0; d < ranks; ++d)
        ASSERT_EQ(download(g, d, n), want) << "replay " << replay << ", rank " << d;
    }
    for (int d = 0; d < ranks; ++d) {
      CUDA_CHECK(cudaSetDevice(d));
      CUDA_CHECK(cudaGraphExecDestroy(execs[d]));
      CUDA_CHECK(cudaFree(src[d]));
    }
  }
}

// The fused all-reduce + residual add + RMSNorm gives the bits of the one-shot sum followed by
// kernels::cuda::fused_add_rms_norm, on every rank, for one row, a few, and many (rows spread
// over the blocks), at two hidden sizes.
TEST(PeerAllReduceCuda, FusedAddRmsNormMatchesTheSumThenTheNorm) {
  SKIP_WITHOUT_PEERS(2);
  const int ranks = PeerGroup::usable_gpus() >= 4 ? 4 : 2;
  PeerGroup g(ranks, kCapacity);
  uint32_t seed = 500;
  for (const int64_t hidden : {1024, 4096}) {
    for (const int64_t rows : {1, 3, 200}) {
      const size_t n = static_cast<size_t>(rows * hidden);
      const auto in = random_inputs(ranks, n, seed++);
      std::mt19937 rng(seed++);
      const auto residual = test::random_bf16(n, rng, -2.f, 2.f);
      const auto weight = test::random_bf16(static_cast<size_t>(hidden), rng, 0.5f, 1.5f);
      std::vector<std::vector<uint16_t>> want_x(ranks), want_r(ranks), got_x(ranks), got_r(ranks);
      for (const bool fused : {false, true}) {
        upload(g, in);
        std::vector<void*> res(ranks), w(ranks);
        for (int d = 0; d < ranks; ++d) {
          CUDA_CHECK(cudaSetDevice(d));
          CUDA_CHECK(cudaMalloc(&res[d], n * 2));
          CUDA_CHECK(cudaMalloc(&w[d], hidden * 2));
          CUDA_CHECK(cudaMemcpy(res[d], residual.data(), n * 2, cudaMemcpyHostToDevice));
          CUDA_CHECK(cudaMemcpy(w[d], weight.data(), hidden * 2, cudaMemcpyHostToDevice));
        }
        // One host thread drives every GPU: each rank's peer kernel goes in before any rank's
        // next launch (a launch behind a spinning kernel can wait on the host).
        for (int d = 0; d < ranks; ++d) {
          CUDA_CHECK(cudaSetDevice(d));
          const TensorView x(g.io(d), DType::kBf16, {rows, hidden}, Device::kCuda);
          const TensorView r(res[d], DType::kBf16, {rows, hidden}, Device::kCuda);
          const TensorView wv(w[d], DType::kBf16, {hidden}, Device::kCuda);
          const TensorView flat(g.io(d), DType::kBf16, {rows * hidden}, Device::kCuda);
          if (fused)
            kernels::peer_all_reduce_add_rms_norm(x, r, wv, 1e-6f, g.buffers(d), g.stream(d));
          else
            kernels::peer_all_reduce_sum(flat, g.buffers(d), PeerAllReduceAlgo::kOneShot,
                                         g.stream(d));
        }
        for (int d = 0; !fused && d < ranks; ++d) {
          CUDA_CHECK(cudaSetDevice(d));
          const TensorView x(g.io(d), DType::kBf16, {rows, hidden}, Device::kCuda);
          const TensorView r(res[d], DType::kBf16, {rows, hidden}, Device::kCuda);
          const TensorView wv(w[d], DType::kBf16, {hidden}, Device::kCuda);
          kernels::cuda::fused_add_rms_norm(x, r, wv, 1e-6f, g.stream(d));
        }
        g.sync();
        for (int d = 0; d < ranks; ++d) {
          (fused ? got_x : want_x)[d] = download(g, d, n);
          std::vector<uint16_t> r(n);
          CUDA_CHECK(cudaSetDevice(d));
          CUDA_CHECK(cudaMemcpy(r.data(), res[d], n * 2, cudaMemcpyDeviceToHost));
          (fused ? got_r : want_r)[d] = r;
          CUDA_CHECK(cudaFree(res[d]));
          CUDA_CHECK(cudaFree(w[d]));
        }
      }
      for (int d = 0; d < ranks; ++d) {
        ASSERT_EQ(got_r[d], want_r[d]) << "residual, rank " << d << ", " << rows << " x " << hidden;
        ASSERT_EQ(got_x[d], want_x[d]) << "normed, rank " << d << ", " << rows << " x " << hidden;
        ASSERT_EQ(got_x[d], got_x[0]) << "rank " << d << " differs from rank 0";
      }
    }
  }
}

TEST(PeerAllReduceCuda, BadArgumentsAreRefusedBeforeAnyLaunch) {
  SKIP_WITHOUT_PEERS(2);
  PeerGroup g(2, 1024);
  CUDA_CHECK(cudaSetDevice(0));
  const TensorView too_big(g.io(0), DType::kBf16, {1024}, Device::kCuda);  // 2048 bytes
  EXPECT_THROW(
      kernels::peer_all_reduce_sum(too_big, g.buffers(0), PeerAllReduceAlgo::kOneShot, g.stream(0)),
      std::invalid_argument);
  kernels::PeerAllReduceBuffers lone = g.buffers(0);
  lone.world_size = 1;
  const TensorView io(g.io(0), DType::kBf16, {16}, Device::kCuda);
  EXPECT_THROW(kernels::peer_all_reduce_sum(io, lone, PeerAllReduceAlgo::kOneShot, g.stream(0)),
               std::invalid_argument);
}

}  // namespace
}  // namespace nanovllm
