// The peer-memory all-reduce (kernels/peer_all_reduce.h) on 2 and 4 GPUs of this process:
// every rank ends with exactly the f32 sum over the ranks in order 0..N-1 rounded once to bf16
// (so the ranks agree to the bit and a rerun gives the same bits), for every size class (one
// element, odd sizes on the scalar path, 16-byte vectors, parts that do not divide evenly,
// several MiB), every algorithm (one-shot, two-shot, push, push two-shot: the pushes on the
// 16-byte vector sizes, with -0 inputs sent as +0), every launch shape, many calls in a row and
// replays of a captured CUDA graph; and the fused all-reduce + residual add + RMSNorm, one-shot and
// push, gives the bits of the same sum followed by the norm. Skips (saying so) below two GPUs with
// peer access.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
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

bool is_push(PeerAllReduceAlgo algo) {
  return algo == PeerAllReduceAlgo::kPush || algo == PeerAllReduceAlgo::kPushTwoShot;
}

// inputs[r]: rank r's random bf16 values.
std::vector<std::vector<uint16_t>> random_inputs(int ranks, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<uint16_t>> in;
  for (int r = 0; r < ranks; ++r) in.push_back(test::random_bf16(n, rng, -4.f, 4.f));
  return in;
}

// The f32 sum over the ranks in order, rounded once; a push (either) sends -0 as +0 (kPushEmpty
// is -0), which changes only the sign of a sum whose every term is -0.
std::vector<uint16_t> reference_sum(const std::vector<std::vector<uint16_t>>& in,
                                    PeerAllReduceAlgo algo = PeerAllReduceAlgo::kOneShot) {
  std::vector<uint16_t> out(in[0].size());
  for (size_t i = 0; i < out.size(); ++i) {
    float acc = 0.f;
    for (const auto& r : in) {
      const bool negative_zero = r[i] == kernels::kPushEmpty;
      acc += is_push(algo) && negative_zero ? 0.f : bf16_to_float(r[i]);
    }
    out[i] = float_to_bf16(acc);
  }
  return out;
}

// "" where got == want, else how they differ: how many elements, which 16-byte units (8
// elements: a push's unit of data and of flag) and how many elements of each differ, and the
// first difference's bits. Whole units point at the protocol (a unit read before its data
// landed, or stale), single elements at the arithmetic.
std::string difference(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want) {
  if (got == want) return "";
  if (got.size() != want.size())
    return std::to_string(got.size()) + " elements, want " + std::to_string(want.size());
  size_t count = 0, first = got.size(), units = 0;
  std::string where;
  for (size_t u = 0; u * 8 < got.size(); ++u) {
    int in_unit = 0;
    for (size_t i = u * 8; i < std::min(got.size(), u * 8 + 8); ++i)
      if (got[i] != want[i]) {
        ++in_unit;
        first = std::min(first, i);
      }
    if (in_unit == 0) continue;
    count += static_cast<size_t>(in_unit);
    if (++units <= 8) where += " " + std::to_string(u) + "(" + std::to_string(in_unit) + ")";
  }
  char bits[64];
  std::snprintf(bits, sizeof(bits), "; element %zu got 0x%04x want 0x%04x", first, got[first],
                want[first]);
  return std::to_string(count) + " of " + std::to_string(got.size()) + " elements differ in " +
         std::to_string(units) + " units, unit(differing elements):" + where +
         (units > 8 ? " ..." : "") + bits;
}

// Rank d's input into its io buffer, landed on return: the all-reduce runs on a non-blocking
// stream, which a pageable cudaMemcpy's copy does not wait for (cuda_test_util.h's
// finish_legacy_stream). Without the wait, the likely cause of the 2-rank 4 MiB push failures
// of 2026-11-27: the kernel may read the tail of io before the copy's last chunk lands.
void upload(const PeerGroup& g, const std::vector<std::vector<uint16_t>>& in) {
  for (int d = 0; d < g.size(); ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaMemcpy(g.io(d), in[d].data(), in[d].size() * 2, cudaMemcpyHostToDevice));
  }
  g.sync();
}

std::vector<uint16_t> download(const PeerGroup& g, int d, size_t n) {
  std::vector<uint16_t> out(n);
  CUDA_CHECK(cudaSetDevice(d));
  CUDA_CHECK(cudaMemcpy(out.data(), g.io(d), n * 2, cudaMemcpyDeviceToHost));
  return out;
}

void all_reduce(const PeerGroup& g, size_t n, PeerAllReduceAlgo algo,
                const kernels::PeerAllReduceShape& shape = {}) {
  for (int d = 0; d < g.size(); ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    const TensorView io(g.io(d), DType::kBf16, {static_cast<int64_t>(n)}, Device::kCuda);
    kernels::peer_all_reduce_sum(io, g.buffers(d), algo, g.stream(d), shape);
  }
  g.sync();
}

void expect_exact_sum_on_every_rank(int ranks, PeerAllReduceAlgo algo) {
  PeerGroup g(ranks, kCapacity);
  uint32_t seed = 1;
  // Sizes: scalar path (odd), one vector, parts shorter than a block, uneven parts, 4 MiB.
  for (const size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{24}, size_t{4096},
                         size_t{4096 * 3 + 8}, size_t{100003}, size_t{1} << 21}) {
    if (is_push(algo) && n % 8 != 0) continue;    // vectors only
    for (int repeat = 0; repeat < 3; ++repeat) {  // counters advance in step on every rank
      const auto in = random_inputs(ranks, n, seed++);
      const auto want = reference_sum(in, algo);
      upload(g, in);
      all_reduce(g, n, algo);
      for (int d = 0; d < ranks; ++d)
        ASSERT_EQ(difference(download(g, d, n), want), "")
            << ranks << " ranks, " << n << " elements, rank " << d;
    }
  }
}

const char* algo_name(PeerAllReduceAlgo algo) {
  switch (algo) {
    case PeerAllReduceAlgo::kOneShot:
      return "OneShot";
    case PeerAllReduceAlgo::kTwoShot:
      return "TwoShot";
    case PeerAllReduceAlgo::kPush:
      return "Push";
    default:
      return "PushTwoShot";
  }
}

class PeerAllReduceSizes : public ::testing::TestWithParam<std::tuple<int, PeerAllReduceAlgo>> {};

TEST_P(PeerAllReduceSizes, EveryRankGetsTheExactOrderedSum) {
  const auto [ranks, algo] = GetParam();
  SKIP_WITHOUT_PEERS(ranks);
  expect_exact_sum_on_every_rank(ranks, algo);
}

INSTANTIATE_TEST_SUITE_P(PeerAllReduceCuda, PeerAllReduceSizes,
                         ::testing::Combine(::testing::Values(2, 4),
                                            ::testing::Values(PeerAllReduceAlgo::kOneShot,
                                                              PeerAllReduceAlgo::kTwoShot,
                                                              PeerAllReduceAlgo::kPush,
                                                              PeerAllReduceAlgo::kPushTwoShot)),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "Ranks" +
                                  algo_name(std::get<1>(info.param));
                         });

// Inputs with many -0 elements (every third element of rank 0, every element of rank 1 at some
// positions): a push must send them as +0, never leave them reading as kPushEmpty (that call
// would wait forever), and every rank gets the ordered sum; repeated, so each inbox slot is
// filled and emptied several times.
TEST(PeerAllReduceCuda, PushesSendNegativeZerosAsPositiveZeros) {
  SKIP_WITHOUT_PEERS(2);
  const int ranks = PeerGroup::usable_gpus() >= 4 ? 4 : 2;
  PeerGroup g(ranks, kCapacity);
  const size_t n = 4096 * 5;
  for (int repeat = 0; repeat < 8; ++repeat) {
    const auto algo = repeat % 2 ? PeerAllReduceAlgo::kPushTwoShot : PeerAllReduceAlgo::kPush;
    auto in = random_inputs(ranks, n, 900 + repeat);
    for (size_t i = 0; i < n; ++i) {
      if (i % 3 == 0) in[0][i] = kernels::kPushEmpty;
      if (i % 7 == 0)
        for (auto& r : in) r[i] = kernels::kPushEmpty;  // every term -0
    }
    upload(g, in);
    all_reduce(g, n, algo);
    const auto want = reference_sum(in, algo);
    for (size_t i = 0; i < n; i += 7) ASSERT_EQ(want[i], 0) << "the sum of -0s is +0 here";
    for (int d = 0; d < ranks; ++d)
      ASSERT_EQ(difference(download(g, d, n), want), "") << algo_name(algo) << ", rank " << d;
  }
}

// Every launch shape gives the default shape's bits: an element's sum is the same whichever
// block and thread make it. max_blocks 7 cuts the grid short, so each block loops over more.
class PeerAllReduceShapes : public ::testing::TestWithParam<int> {};

TEST_P(PeerAllReduceShapes, EveryShapeGivesTheDefaultShapesBits) {
  const int ranks = GetParam();
  SKIP_WITHOUT_PEERS(ranks);
  PeerGroup g(ranks, kCapacity);
  uint32_t seed = 300;
  for (const auto algo : {PeerAllReduceAlgo::kOneShot, PeerAllReduceAlgo::kTwoShot,
                          PeerAllReduceAlgo::kPush, PeerAllReduceAlgo::kPushTwoShot}) {
    // The scalar path, uneven parts, more units than 128 blocks of 1024 threads take at once.
    for (const size_t n : {size_t{7}, size_t{4096 * 3 + 8}, size_t{100003}, size_t{1} << 21}) {
      if (is_push(algo) && n % 8 != 0) continue;  // vectors only
      const auto in = random_inputs(ranks, n, seed++);
      upload(g, in);
      all_reduce(g, n, algo);
      std::vector<std::vector<uint16_t>> want(ranks);
      for (int d = 0; d < ranks; ++d) {
        want[d] = download(g, d, n);
        ASSERT_EQ(difference(want[d], reference_sum(in, algo)), "")
            << algo_name(algo) << ", " << n << ", rank " << d;
      }
      for (const int threads : {128, 256, 512, 1024}) {
        for (const int max_blocks : {kernels::kPeerAllReduceMaxBlocks, 7}) {
          upload(g, in);
          all_reduce(g, n, algo, {threads, max_blocks});
          for (int d = 0; d < ranks; ++d)
            ASSERT_EQ(difference(download(g, d, n), want[d]), "")
                << algo_name(algo) << ", " << n << " elements, " << threads << " threads, "
                << max_blocks << " blocks at most, rank " << d;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PeerAllReduceCuda, PeerAllReduceShapes, ::testing::Values(2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "Ranks"; });

// The grid each shape launches (no GPU needed: nothing is launched). 2 MiB on 4 ranks is
// 131072 16-byte vectors, a two-shot part 32768 of them.
TEST(PeerAllReduceCuda, BlocksAreTheWorkOverTheThreadsUpToMaxBlocks) {
  alignas(16) static uint32_t fake[64];  // stands in for every device pointer
  kernels::PeerAllReduceBuffers b;
  b.rank = 1;
  b.world_size = 4;
  for (int r = 0; r < 4; ++r) {
    b.data[r] = fake;
    b.flags[r] = fake;
  }
  b.counters = fake;
  b.capacity_bytes = size_t{8} << 20;
  const auto blocks = [&](int64_t elems, PeerAllReduceAlgo algo,
                          kernels::PeerAllReduceShape shape) {
    return kernels::peer_all_reduce_blocks(TensorView(fake, DType::kBf16, {elems}, Device::kCuda),
                                           b, algo, shape);
  };
  constexpr int64_t kTwoMiB = int64_t{1} << 20;  // elements
  EXPECT_EQ(blocks(kTwoMiB, PeerAllReduceAlgo::kTwoShot, {}), 64);
  EXPECT_EQ(blocks(kTwoMiB, PeerAllReduceAlgo::kTwoShot, {1024, 128}), 32);
  EXPECT_EQ(blocks(kTwoMiB, PeerAllReduceAlgo::kTwoShot, {256, 128}), 128);
  EXPECT_EQ(blocks(kTwoMiB, PeerAllReduceAlgo::kTwoShot, {128, 100}), 100);
  EXPECT_EQ(blocks(kTwoMiB, PeerAllReduceAlgo::kOneShot, {}), 128);
  EXPECT_EQ(blocks(4096, PeerAllReduceAlgo::kOneShot, {}), 1);  // 512 vectors
  EXPECT_EQ(blocks(4096, PeerAllReduceAlgo::kOneShot, {128, 128}), 4);
  EXPECT_EQ(blocks(4097, PeerAllReduceAlgo::kOneShot, {128, 128}), 33);  // scalar path
  EXPECT_EQ(blocks(0, PeerAllReduceAlgo::kOneShot, {}), 0);
  b.inbox_bytes = size_t{2} << 20;  // a push: the one-shot's grid, 16-byte vectors only
  for (int r = 0; r < 4; ++r) b.inbox[r] = fake;
  EXPECT_EQ(blocks(kTwoMiB / 2, PeerAllReduceAlgo::kPush, {}), 128);
  EXPECT_EQ(blocks(4096, PeerAllReduceAlgo::kPush, {128, 128}), 4);
  EXPECT_THROW(blocks(4097, PeerAllReduceAlgo::kPush, {}), std::invalid_argument);
  EXPECT_EQ(blocks(kTwoMiB, PeerAllReduceAlgo::kPush, {}), 128);  // the whole inbox
  EXPECT_THROW(blocks(kTwoMiB + 8, PeerAllReduceAlgo::kPush, {}), std::invalid_argument);
  // A push two-shot: the two-shot's grid; its parts (not the message) must fit a slot.
  EXPECT_EQ(blocks(kTwoMiB, PeerAllReduceAlgo::kPushTwoShot, {}), 64);
  EXPECT_EQ(blocks(4 * kTwoMiB, PeerAllReduceAlgo::kPushTwoShot, {}), 128);  // 4 whole slots
  EXPECT_THROW(blocks(4 * kTwoMiB + 32, PeerAllReduceAlgo::kPushTwoShot, {}),
               std::invalid_argument);
  EXPECT_THROW(blocks(4100, PeerAllReduceAlgo::kPushTwoShot, {}), std::invalid_argument);
  EXPECT_THROW(blocks(8, PeerAllReduceAlgo::kOneShot, {384, 128}), std::invalid_argument);
  EXPECT_THROW(blocks(8, PeerAllReduceAlgo::kOneShot, {512, 0}), std::invalid_argument);
  EXPECT_THROW(blocks(8, PeerAllReduceAlgo::kOneShot, {512, 129}), std::invalid_argument);
}

TEST(PeerAllReduceCuda, AlternatingAlgorithmsAndSizesKeepTheRanksInStep) {
  SKIP_WITHOUT_PEERS(2);
  PeerGroup g(2, kCapacity);
  // Sizes cycle by 3, algorithms by 5 (one-shot, two-shot, push, push, push two-shot): the
  // staging halves and the inbox generations follow the same call count whichever algorithm
  // makes a call.
  for (int call = 0; call < 60; ++call) {
    const size_t n = call % 3 == 0 ? 8 * 5 : (call % 3 == 1 ? 8192 : 65536 + 16);
    const PeerAllReduceAlgo algos[] = {PeerAllReduceAlgo::kOneShot, PeerAllReduceAlgo::kTwoShot,
                                       PeerAllReduceAlgo::kPush, PeerAllReduceAlgo::kPush,
                                       PeerAllReduceAlgo::kPushTwoShot};
    const auto algo = algos[call % 5];
    const auto in = random_inputs(2, n, 1000 + call);
    upload(g, in);
    all_reduce(g, n, algo);
    ASSERT_EQ(difference(download(g, 0, n), reference_sum(in, algo)), "") << "call " << call;
    ASSERT_EQ(difference(download(g, 1, n), reference_sum(in, algo)), "") << "call " << call;
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
  for (const auto algo : {PeerAllReduceAlgo::kOneShot, PeerAllReduceAlgo::kTwoShot,
                          PeerAllReduceAlgo::kPush, PeerAllReduceAlgo::kPushTwoShot}) {
    const auto in = random_inputs(ranks, n, 77 + static_cast<uint32_t>(algo));
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
    g.sync();  // the inputs copied into src have landed (upload says why)
    const auto want = reference_sum(in, algo);
    for (int replay = 0; replay < 5; ++replay) {
      for (int d = 0; d < ranks; ++d) {
        CUDA_CHECK(cudaSetDevice(d));
        CUDA_CHECK(cudaGraphLaunch(execs[d], g.stream(d)));
      }
      g.sync();
      for (int d = 0; d < ranks; ++d)
        ASSERT_EQ(difference(download(g, d, n), want), "") << "replay " << replay << ", rank " << d;
    }
    for (int d = 0; d < ranks; ++d) {
      CUDA_CHECK(cudaSetDevice(d));
      CUDA_CHECK(cudaGraphExecDestroy(execs[d]));
      CUDA_CHECK(cudaFree(src[d]));
    }
  }
}

// Every rank's x [rows, hidden] and residual [rows, pitch] after one all-reduce + residual add +
// RMSNorm on inputs `in` (rank r's x) with `residual` [rows, pitch] and `weight` [hidden], the
// same on every rank: fused into the peer kernel of `algo` (one-shot or push), or that sum and
// then kernels::cuda::fused_add_rms_norm.
struct AddNormResult {
  std::vector<std::vector<uint16_t>> x, residual;
};

AddNormResult add_rms_norm(const PeerGroup& g, const std::vector<std::vector<uint16_t>>& in,
                           const std::vector<uint16_t>& residual,
                           const std::vector<uint16_t>& weight, int64_t rows, int64_t hidden,
                           int64_t pitch, bool fused, PeerAllReduceAlgo algo) {
  const int ranks = g.size();
  const size_t n = static_cast<size_t>(rows * hidden);
  upload(g, in);
  std::vector<void*> res(ranks), w(ranks);
  for (int d = 0; d < ranks; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaMalloc(&res[d], residual.size() * 2));
    CUDA_CHECK(cudaMalloc(&w[d], hidden * 2));
    CUDA_CHECK(cudaMemcpy(res[d], residual.data(), residual.size() * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(w[d], weight.data(), hidden * 2, cudaMemcpyHostToDevice));
  }
  g.sync();  // landed before the kernels on the non-blocking streams (upload says why)
  const auto views = [&](int d) {
    TensorView r(res[d], DType::kBf16, {rows, hidden}, Device::kCuda);
    r.stride[0] = pitch;
    return std::make_tuple(TensorView(g.io(d), DType::kBf16, {rows, hidden}, Device::kCuda), r,
                           TensorView(w[d], DType::kBf16, {hidden}, Device::kCuda));
  };
  // One host thread drives every GPU: each rank's peer kernel goes in before any rank's next
  // launch (a launch behind a spinning kernel can wait on the host).
  for (int d = 0; d < ranks; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    const auto [x, r, wv] = views(d);
    const TensorView flat(g.io(d), DType::kBf16, {rows * hidden}, Device::kCuda);
    if (fused)
      kernels::peer_all_reduce_add_rms_norm(x, r, wv, 1e-6f, g.buffers(d), g.stream(d), algo);
    else
      kernels::peer_all_reduce_sum(flat, g.buffers(d), algo, g.stream(d));
  }
  for (int d = 0; !fused && d < ranks; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    const auto [x, r, wv] = views(d);
    kernels::cuda::fused_add_rms_norm(x, r, wv, 1e-6f, g.stream(d));
  }
  g.sync();
  AddNormResult out;
  for (int d = 0; d < ranks; ++d) {
    out.x.push_back(download(g, d, n));
    std::vector<uint16_t> r(residual.size());
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaMemcpy(r.data(), res[d], r.size() * 2, cudaMemcpyDeviceToHost));
    out.residual.push_back(std::move(r));
    CUDA_CHECK(cudaFree(res[d]));
    CUDA_CHECK(cudaFree(w[d]));
  }
  return out;
}

// `got` has `want`'s bits on every rank, and every rank has rank 0's.
void expect_same_bits(const AddNormResult& got, const AddNormResult& want,
                      const std::string& what) {
  for (size_t d = 0; d < want.x.size(); ++d) {
    ASSERT_EQ(got.residual[d], want.residual[d]) << "residual, rank " << d << ", " << what;
    ASSERT_EQ(got.x[d], want.x[d]) << "normed, rank " << d << ", " << what;
    ASSERT_EQ(got.x[d], got.x[0]) << "rank " << d << " differs from rank 0, " << what;
  }
}

// The fused all-reduce + residual add + RMSNorm gives the bits of the same algorithm's sum (one-
// shot or push) followed by kernels::cuda::fused_add_rms_norm, on every rank, for one row, a
// few, and many (rows spread over the blocks), at two hidden sizes; at 7 rows the residual's
// rows are padded, and the padding stays as it was.
TEST(PeerAllReduceCuda, FusedAddRmsNormMatchesTheSumThenTheNorm) {
  SKIP_WITHOUT_PEERS(2);
  const int ranks = PeerGroup::usable_gpus() >= 4 ? 4 : 2;
  PeerGroup g(ranks, kCapacity);
  uint32_t seed = 500;
  for (const int64_t hidden : {1024, 4096}) {
    for (const int64_t rows : {1, 3, 7, 200}) {
      const int64_t pitch = rows == 7 ? hidden + 8 : hidden;
      const auto in = random_inputs(ranks, static_cast<size_t>(rows * hidden), seed++);
      std::mt19937 rng(seed++);
      const auto residual = test::random_bf16(static_cast<size_t>(rows * pitch), rng, -2.f, 2.f);
      const auto weight = test::random_bf16(static_cast<size_t>(hidden), rng, 0.5f, 1.5f);
      for (const auto algo : {PeerAllReduceAlgo::kOneShot, PeerAllReduceAlgo::kPush}) {
        const auto run = [&](bool fused) {
          return add_rms_norm(g, in, residual, weight, rows, hidden, pitch, fused, algo);
        };
        const AddNormResult got = run(true);
        ASSERT_NO_FATAL_FAILURE(expect_same_bits(got, run(false),
                                                 std::string(algo_name(algo)) + ", " +
                                                     std::to_string(rows) + " x " +
                                                     std::to_string(hidden)));
        for (int64_t t = 0; t < rows && pitch > hidden; ++t)
          for (int64_t i = hidden; i < pitch; ++i)
            ASSERT_EQ(got.residual[0][t * pitch + i], residual[t * pitch + i]) << "padding";
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
  const TensorView odd(g.io(0), DType::kBf16, {15}, Device::kCuda);  // no 16-byte vectors
  EXPECT_THROW(
      kernels::peer_all_reduce_sum(odd, g.buffers(0), PeerAllReduceAlgo::kPush, g.stream(0)),
      std::invalid_argument);
  kernels::PeerAllReduceBuffers no_inbox = g.buffers(0);
  no_inbox.inbox[1] = nullptr;
  EXPECT_THROW(kernels::peer_all_reduce_sum(io, no_inbox, PeerAllReduceAlgo::kPush, g.stream(0)),
               std::invalid_argument);
  EXPECT_FALSE(kernels::peer_push_fits(odd, g.buffers(0)));
  EXPECT_TRUE(kernels::peer_push_fits(io, g.buffers(0)));
  EXPECT_FALSE(kernels::peer_push_fits(io, no_inbox));
}

}  // namespace
}  // namespace nanovllm
