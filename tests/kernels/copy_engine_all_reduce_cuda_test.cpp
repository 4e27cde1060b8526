// The copy-engine all-reduce + residual add + RMSNorm (kernels/copy_engine_all_reduce.h) between
// processes, as the runtime runs it: one forked process per GPU, each buffer shared through a
// CUDA IPC handle. Every rank ends with the bits of the f32 sum over the ranks in order 0..N-1,
// rounded once to bf16, followed by kernels::cuda::fused_add_rms_norm, through many calls in a
// row (both inbox generations, the flags climbing), for one row, a few, and a full slot; on 2
// GPUs and, where there are 4, on 4. (Within one process a copy into another GPU's memory is
// serialised with that GPU's work, which the protocol's stream waits would deadlock.) This
// process never touches CUDA itself, so that its children can. Skips (saying so) below two GPUs
// with peer access.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/copy_engine_all_reduce.h"
#include "kernels/rms_norm.h"
#include "tests/kernels/host_tensors.h"
#include "tests/kernels/peer_group.h"

namespace nanovllm {
namespace {

constexpr size_t kSlot = size_t{4} << 20;
constexpr int64_t kHidden = 4096;
constexpr size_t kFlagBytes = 256;  // the flags' room at the start of each rank's block
// 512 rows fill a slot (4 MiB); the sizes alternate so both generations see every size.
constexpr int64_t kRows[] = {1, 37, 512, 3, 512, 200, 1, 64};

// What the processes share (an anonymous shared mapping made before the forks).
struct Board {
  std::atomic<int> usable_gpus;  // the probe's answer (test::PeerGroup::usable_gpus)
  std::atomic<int> published;    // ranks whose handle is on the board
  cudaIpcMemHandle_t handle[kernels::kMaxPeerRanks];
  char failure[kernels::kMaxPeerRanks][512];
};

void* upload(const std::vector<uint16_t>& v) {
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, v.size() * 2));
  CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * 2, cudaMemcpyHostToDevice));
  return p;
}

std::vector<uint16_t> download(const void* p, size_t n) {
  std::vector<uint16_t> out(n);
  CUDA_CHECK(cudaMemcpy(out.data(), p, n * 2, cudaMemcpyDeviceToHost));
  return out;
}

// One rank's whole part; "" when every call matched, else what differed.
std::string run_rank(Board& board, int rank, int ranks) {
  CUDA_CHECK(cudaSetDevice(rank));
  void* own = nullptr;
  const size_t inbox_bytes = kernels::copy_engine_inbox_bytes(ranks, kSlot);
  CUDA_CHECK(cudaMalloc(&own, kFlagBytes + inbox_bytes));
  CUDA_CHECK(cudaMemset(own, 0, kFlagBytes));
  CUDA_CHECK(cudaDeviceSynchronize());  // zeroed before any peer can learn the handle
  CUDA_CHECK(cudaIpcGetMemHandle(&board.handle[rank], own));
  board.published.fetch_add(1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (board.published.load() < ranks) {
    if (std::chrono::steady_clock::now() > deadline) return "the peers' handles never came";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kernels::CopyEngineBuffers b;
  b.rank = rank;
  b.world_size = ranks;
  b.slot_bytes = kSlot;
  for (int r = 0; r < ranks; ++r) {
    void* base = own;
    if (r != rank)
      CUDA_CHECK(cudaIpcOpenMemHandle(&base, board.handle[r], cudaIpcMemLazyEnablePeerAccess));
    b.flags[r] = static_cast<uint32_t*>(base);
    b.inbox[r] = static_cast<uint8_t*>(base) + kFlagBytes;
  }
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  uint32_t call = 0;
  for (const int64_t rows : kRows) {
    ++call;
    // Every rank draws every rank's inputs from the same seed, so each holds the reference.
    std::mt19937 rng(1000 * ranks + call);
    const size_t n = static_cast<size_t>(rows * kHidden);
    std::vector<std::vector<uint16_t>> in;
    for (int r = 0; r < ranks; ++r) in.push_back(test::random_bf16(n, rng, -4.f, 4.f));
    const auto residual = test::random_bf16(n, rng, -2.f, 2.f);
    const auto weight = test::random_bf16(static_cast<size_t>(kHidden), rng, 0.5f, 1.5f);
    std::vector<uint16_t> sum(n);
    for (size_t i = 0; i < n; ++i) {
      float acc = 0.f;
      for (const auto& r : in) acc += bf16_to_float(r[i]);
      sum[i] = float_to_bf16(acc);
    }
    void* x = upload(in[rank]);
    void* res = upload(residual);
    void* w = upload(weight);
    void* want_x = upload(sum);
    void* want_res = upload(residual);
    const auto view = [&](void* p) {
      return TensorView(p, DType::kBf16, {rows, kHidden}, Device::kCuda);
    };
    const TensorView wv(w, DType::kBf16, {kHidden}, Device::kCuda);
    kernels::cuda::fused_add_rms_norm(view(want_x), view(want_res), wv, 1e-6f, stream);
    kernels::copy_engine_add_rms_norm(view(x), view(res), wv, 1e-6f, b, call, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::string what = std::to_string(ranks) + " ranks, rank " + std::to_string(rank) +
                             ", call " + std::to_string(call) + ", " + std::to_string(rows) +
                             " rows: ";
    if (download(res, n) != download(want_res, n)) return what + "the residual differs";
    if (download(x, n) != download(want_x, n)) return what + "the normed x differs";
    for (void* p : {x, res, w, want_x, want_res}) CUDA_CHECK(cudaFree(p));
  }
  return "";
}

// Forks `ranks` processes running run_rank; "" when all passed, else their failures.
std::string run_group(Board& board, int ranks) {
  board.published = 0;
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    std::memset(board.failure[r], 0, sizeof board.failure[r]);
    const pid_t pid = ::fork();
    if (pid == 0) {
      std::string why;
      try {
        why = run_rank(board, r, ranks);
      } catch (const std::exception& e) {
        why = e.what();
      }
      std::snprintf(board.failure[r], sizeof board.failure[r], "%s", why.c_str());
      ::_exit(why.empty() ? 0 : 1);
    }
    pids.push_back(pid);
  }
  std::string failures;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (int r = 0; r < ranks; ++r) {
    int status = 0;
    while (::waitpid(pids[r], &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        for (const pid_t p : pids) ::kill(p, SIGKILL);
        for (const pid_t p : pids) ::waitpid(p, nullptr, 0);
        return failures + "rank " + std::to_string(r) + " still ran after 120 s (a hang)";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      failures += "rank " + std::to_string(r) + ": " +
                  (board.failure[r][0] ? board.failure[r] : "died") + "; ";
  }
  return failures;
}

TEST(CopyEngineAllReduceCuda, EveryProcessGetsTheOrderedSumThenTheNormOverManyCalls) {
  void* shared =
      ::mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  Board& board = *new (shared) Board();
  const pid_t probe = ::fork();
  if (probe == 0) {  // CUDA only in a child: a parent that touched it could not fork ranks
    try {
      board.usable_gpus = test::PeerGroup::usable_gpus();
    } catch (const std::exception&) {
      board.usable_gpus = 0;
    }
    ::_exit(0);
  }
  ASSERT_EQ(::waitpid(probe, nullptr, 0), probe);
  const int usable = board.usable_gpus.load();
  if (usable < 2) {
    ::munmap(shared, sizeof(Board));
    GTEST_SKIP() << "needs 2 GPUs with peer access, " << usable << " here";
  }
  for (const int ranks : {2, 4}) {
    if (ranks > usable) continue;
    EXPECT_EQ(run_group(board, ranks), "") << ranks << " ranks";
    std::printf("%d ranks: %zu calls in separate processes\n", ranks, std::size(kRows));
  }
  ::munmap(shared, sizeof(Board));
}

}  // namespace
}  // namespace nanovllm
