// ShmCommunicator across 2 and 3 processes against a direct sum written here: f32 sums in rank
// order, bf16 rounded once, bit-identical on every rank; gather; an exact int64 minimum; a dead
// peer is an error.
#include "ipc/shm_communicator.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

#include "ipc/ipc_error.h"
#include "kernels/bf16.h"
#include "tests/ipc/child_processes.h"

namespace nanovllm {
namespace {

using namespace std::chrono_literals;
using testing::exited_ok;
using testing::fork_children;
using testing::wait_children;

// Anonymous shared memory: inherited by forked children like the launcher's segment.
struct SharedRegion {
  explicit SharedRegion(size_t n) : bytes(n) {
    data = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  }
  ~SharedRegion() { ::munmap(data, bytes); }
  void* data;
  size_t bytes;
};

std::vector<float> rank_data(int rank, size_t n) {
  std::mt19937 rng(1000 + rank);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// The reference: element i is ((x0[i] + x1[i]) + x2[i]) + ... in f32, rounded to bf16 once.
template <bool kBf16>
int run_all_reduce(void* region, size_t bytes, int rank, int world, size_t n) {
  ShmCommunicator comm(region, bytes, rank, WaitPolicy{.poll = 20ms, .timeout = 20000ms});
  const ExecContext ctx;
  std::vector<float> expect(n);
  for (int r = 0; r < world; ++r) {
    const std::vector<float> d = rank_data(r, n);
    for (size_t i = 0; i < n; ++i) {
      const float x = kBf16 ? bf16_to_float(float_to_bf16(d[i])) : d[i];
      expect[i] = r == 0 ? x : expect[i] + x;
    }
  }
  const std::vector<float> mine = rank_data(rank, n);
  for (int round = 0; round < 3; ++round) {  // repeated calls reuse the areas
    if constexpr (kBf16) {
      std::vector<uint16_t> buf(n);
      for (size_t i = 0; i < n; ++i) buf[i] = float_to_bf16(mine[i]);
      comm.all_reduce_sum(TensorView(buf.data(), DType::kBf16, {static_cast<int64_t>(n)}), ctx);
      for (size_t i = 0; i < n; ++i)
        if (buf[i] != float_to_bf16(expect[i])) {
          std::fprintf(stderr, "rank %d bf16 element %zu: %04x vs %04x\n", rank, i, buf[i],
                       float_to_bf16(expect[i]));
          return 1;
        }
    } else {
      std::vector<float> buf = mine;
      comm.all_reduce_sum(TensorView(buf.data(), DType::kF32, {static_cast<int64_t>(n)}), ctx);
      if (std::memcmp(buf.data(), expect.data(), n * sizeof(float)) != 0) {
        std::fprintf(stderr, "rank %d f32 result differs\n", rank);
        return 1;
      }
    }
  }
  return 0;
}

void all_reduce_case(int world, bool bf16) {
  constexpr size_t kMaxElems = 1000;  // smaller than the tensor: the chunked path runs
  constexpr size_t kN = 2 * kMaxElems + 357;
  const size_t bytes = shm_communicator_region_bytes(world, kMaxElems);
  SharedRegion region(bytes);
  shm_communicator_init(region.data, bytes, world, kMaxElems);
  const auto pids = fork_children(world, [&](int rank) {
    return bf16 ? run_all_reduce<true>(region.data, bytes, rank, world, kN)
                : run_all_reduce<false>(region.data, bytes, rank, world, kN);
  });
  const auto status = wait_children(pids, 30s);
  for (int r = 0; r < world; ++r) EXPECT_TRUE(exited_ok(status[r])) << "rank " << r;
}

TEST(ShmCommunicator, AllReduceF32TwoRanksEqualsRankOrderSumBitExact) {
  all_reduce_case(2, false);
}
TEST(ShmCommunicator, AllReduceF32ThreeRanksEqualsRankOrderSumBitExact) {
  all_reduce_case(3, false);
}
TEST(ShmCommunicator, AllReduceBf16TwoRanksRoundsOnceAtTheEnd) {
  all_reduce_case(2, true);
}
TEST(ShmCommunicator, AllReduceBf16ThreeRanksRoundsOnceAtTheEnd) {
  all_reduce_case(3, true);
}

TEST(ShmCommunicator, GatherToRootPlacesEachRanksRowsAtItsIndex) {
  constexpr int kWorld = 3;
  constexpr int64_t kRows = 7, kCols = 45;  // 1260 bytes a rank, areas of 256: chunked
  const size_t bytes = shm_communicator_region_bytes(kWorld, 64);
  SharedRegion region(bytes);
  shm_communicator_init(region.data, bytes, kWorld, 64);
  const auto pids = fork_children(kWorld, [&](int rank) -> int {
    ShmCommunicator comm(region.data, bytes, rank, WaitPolicy{.poll = 20ms, .timeout = 20000ms});
    std::vector<float> send = rank_data(rank, kRows * kCols);
    std::vector<float> recv(rank == 0 ? kWorld * kRows * kCols : 0);
    comm.gather_to_root(TensorView(send.data(), DType::kF32, {kRows, kCols}),
                        TensorView(recv.data(), DType::kF32, {kWorld, kRows, kCols}),
                        ExecContext{});
    if (rank != 0) return 0;
    for (int r = 0; r < kWorld; ++r) {
      const std::vector<float> want = rank_data(r, kRows * kCols);
      if (std::memcmp(recv.data() + r * kRows * kCols, want.data(), want.size() * 4) != 0) {
        std::fprintf(stderr, "gathered part %d differs\n", r);
        return 1;
      }
    }
    return 0;
  });
  const auto status = wait_children(pids, 30s);
  for (int r = 0; r < kWorld; ++r) EXPECT_TRUE(exited_ok(status[r])) << "rank " << r;
}

TEST(ShmCommunicator, DeadPeerIsAnErrorWithinTheBoundNotAHang) {
  const size_t bytes = shm_communicator_region_bytes(2, 16);
  SharedRegion region(bytes);
  shm_communicator_init(region.data, bytes, 2, 16);
  const auto pids = fork_children(2, [&](int rank) -> int {
    ShmCommunicator comm(region.data, bytes, rank, WaitPolicy{.poll = 20ms, .timeout = 0ms});
    if (rank == 1) return 0;  // registered, then gone before the collective
    ::usleep(50 * 1000);
    std::vector<float> x(16, 1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      comm.all_reduce_sum(TensorView(x.data(), DType::kF32, {16}), ExecContext{});
    } catch (const IpcError& e) {
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::printf("[ figures  ] dead peer noticed after %.0f ms: %s\n", ms, e.what());
      return std::string(e.what()).find("rank 1") != std::string::npos && ms < 2000 ? 0 : 3;
    }
    return 4;  // the collective "succeeded" without its peer
  });
  const auto status = wait_children(pids, 20s);
  EXPECT_TRUE(exited_ok(status[0])) << "rank 0 status " << status[0];
}

// Values past 2^53 (where a float/double reduction would round) and negative ones; rounds
// alternate with a sum so that both collectives reuse the same areas.
TEST(ShmCommunicator, AllReduceMinIsExactOnEveryRankAndInterleavesWithSums) {
  constexpr int kWorld = 3;
  const size_t bytes = shm_communicator_region_bytes(kWorld, 16);
  SharedRegion region(bytes);
  shm_communicator_init(region.data, bytes, kWorld, 16);
  auto value = [](int rank, int round) -> int64_t {
    const int64_t big = (int64_t{1} << 60) + 1;  // not representable as a double
    switch (round) {
      case 0:
        return big + 7 - rank;  // smallest on the last rank
      case 1:
        return rank == 1 ? -big : rank;  // negative, on a middle rank
      default:
        return 1000 + round + rank;  // smallest on rank 0
    }
  };
  const auto pids = fork_children(kWorld, [&](int rank) -> int {
    ShmCommunicator comm(region.data, bytes, rank, WaitPolicy{.poll = 20ms, .timeout = 20000ms});
    for (int round = 0; round < 4; ++round) {
      int64_t want = value(0, round);
      for (int r = 1; r < kWorld; ++r) want = std::min(want, value(r, round));
      const int64_t got = comm.all_reduce_min(value(rank, round), ExecContext{});
      if (got != want) {
        std::fprintf(stderr, "rank %d round %d: min %lld, want %lld\n", rank, round,
                     static_cast<long long>(got), static_cast<long long>(want));
        return 1;
      }
      std::vector<float> x(16, 1.0f);
      comm.all_reduce_sum(TensorView(x.data(), DType::kF32, {16}), ExecContext{});
      if (x[15] != static_cast<float>(kWorld)) return 2;
    }
    return 0;
  });
  const auto status = wait_children(pids, 30s);
  for (int r = 0; r < kWorld; ++r) EXPECT_TRUE(exited_ok(status[r])) << "rank " << r;
}

TEST(ShmCommunicator, AllReduceMinWithADeadPeerIsAnError) {
  const size_t bytes = shm_communicator_region_bytes(2, 16);
  SharedRegion region(bytes);
  shm_communicator_init(region.data, bytes, 2, 16);
  const auto pids = fork_children(2, [&](int rank) -> int {
    ShmCommunicator comm(region.data, bytes, rank, WaitPolicy{.poll = 20ms, .timeout = 0ms});
    if (rank == 1) return 0;  // registered, then gone before the collective
    ::usleep(50 * 1000);
    try {
      comm.all_reduce_min(5, ExecContext{});
    } catch (const IpcError& e) {
      return std::string(e.what()).find("rank 1") != std::string::npos ? 0 : 3;
    }
    return 4;
  });
  const auto status = wait_children(pids, 20s);
  EXPECT_TRUE(exited_ok(status[0])) << "rank 0 status " << status[0];
}

TEST(ShmCommunicator, AllReduceThroughputFigure) {
  // 1M bf16 elements (e.g. 1024 tokens x 1024 hidden), areas of 256K elements, 2 ranks.
  constexpr size_t kN = 1 << 20, kMaxElems = 1 << 18;
  constexpr int kRounds = 5;
  const size_t bytes = shm_communicator_region_bytes(2, kMaxElems);
  SharedRegion region(bytes);
  shm_communicator_init(region.data, bytes, 2, kMaxElems);
  const auto pids = fork_children(2, [&](int rank) -> int {
    ShmCommunicator comm(region.data, bytes, rank);
    std::vector<uint16_t> buf(kN, float_to_bf16(1.0f));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kRounds; ++i) {
      std::fill(buf.begin(), buf.end(), float_to_bf16(1.0f));
      comm.all_reduce_sum(TensorView(buf.data(), DType::kBf16, {int64_t{kN}}), ExecContext{});
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (rank == 0)
      std::printf("[ figures  ] all_reduce_sum 1M bf16, 2 ranks: %.2f ms per call\n", ms / kRounds);
    return buf[12345] == float_to_bf16(2.0f) ? 0 : 1;
  });
  const auto status = wait_children(pids, 30s);
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(exited_ok(status[r])) << "rank " << r;
}

TEST(ShmCommunicator, SingleRankAllReduceLeavesDataUnchanged) {
  const size_t bytes = shm_communicator_region_bytes(1, 8);
  SharedRegion region(bytes);
  shm_communicator_init(region.data, bytes, 1, 8);
  ShmCommunicator comm(region.data, bytes, 0);
  std::vector<float> x{1.5f, -2.0f, 3.25f};
  comm.all_reduce_sum(TensorView(x.data(), DType::kF32, {3}), ExecContext{});
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_EQ(comm.all_reduce_min(-42, ExecContext{}), -42);
}

TEST(ShmCommunicator, SingleRankCommunicatorMinIsTheIdentity) {
  SingleRankCommunicator comm;
  EXPECT_EQ(comm.all_reduce_min(int64_t{1} << 62, ExecContext{}), int64_t{1} << 62);
}

}  // namespace
}  // namespace nanovllm
