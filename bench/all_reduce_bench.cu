// One all-reduce inside a CUDA graph, on 2 and 4 GPUs of this process (as many as have peer
// access): the peer-memory one-shot and two-shot kernels (kernels/peer_all_reduce.h) beside
// NCCL (NVLS off), bf16, in place, over the decode sizes (8 KiB .. 2 MiB) and a few larger.
// Each figure: a graph of kCallsPerGraph calls replayed kReplays times on every GPU, the time
// of the slowest GPU's replays over the calls. Prints a table and JSON lines.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "kernels/check.h"
#include "kernels/peer_all_reduce.h"
#include "tests/kernels/peer_group.h"

namespace nanovllm {
namespace {

constexpr int kCallsPerGraph = 20;
constexpr int kReplays = 50;
constexpr size_t kCapacity = size_t{16} << 20;

#define NCCL_OK(x)                                                                             \
  do {                                                                                         \
    const ncclResult_t r_ = (x);                                                               \
    if (r_ != ncclSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

// Captures `enqueue(d)` kCallsPerGraph times on every GPU's stream (NCCL's grouped launch needs
// every stream capturing at once), replays, returns microseconds per call.
double time_in_graph(const test::PeerGroup& g, const std::function<void()>& enqueue_all) {
  const int n = g.size();
  std::vector<cudaGraphExec_t> execs(n);
  for (int d = 0; d < n; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaStreamBeginCapture(g.stream(d), cudaStreamCaptureModeRelaxed));
  }
  for (int c = 0; c < kCallsPerGraph; ++c) enqueue_all();
  for (int d = 0; d < n; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamEndCapture(g.stream(d), &graph));
    CUDA_CHECK(cudaGraphInstantiate(&execs[d], graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));
  }
  const auto replay = [&](int times) {
    for (int t = 0; t < times; ++t)
      for (int d = 0; d < n; ++d) {
        CUDA_CHECK(cudaSetDevice(d));
        CUDA_CHECK(cudaGraphLaunch(execs[d], g.stream(d)));
      }
  };
  replay(3);  // warm-up
  g.sync();
  std::vector<cudaEvent_t> start(n), stop(n);
  for (int d = 0; d < n; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaEventCreate(&start[d]));
    CUDA_CHECK(cudaEventCreate(&stop[d]));
    CUDA_CHECK(cudaEventRecord(start[d], g.stream(d)));
  }
  replay(kReplays);
  float slowest = 0.f;
  for (int d = 0; d < n; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaEventRecord(stop[d], g.stream(d)));
    CUDA_CHECK(cudaEventSynchronize(stop[d]));
    float ms = 0.f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start[d], stop[d]));
    slowest = std::max(slowest, ms);
    CUDA_CHECK(cudaEventDestroy(start[d]));
    CUDA_CHECK(cudaEventDestroy(stop[d]));
    CUDA_CHECK(cudaGraphExecDestroy(execs[d]));
  }
  return 1000.0 * slowest / (kReplays * kCallsPerGraph);
}

void bench_ranks(int n) {
  test::PeerGroup g(n, kCapacity);
  std::vector<ncclComm_t> comms(n);
  std::vector<int> devs(n);
  for (int d = 0; d < n; ++d) devs[d] = d;
  NCCL_OK(ncclCommInitAll(comms.data(), n, devs.data()));
  std::printf("\n%d GPUs: microseconds per all-reduce in a CUDA graph (bf16, in place)\n", n);
  std::printf("%10s %10s %10s %10s %8s\n", "bytes", "nccl", "one-shot", "two-shot", "best/nccl");
  for (const size_t bytes :
       {size_t{8} << 10, size_t{32} << 10, size_t{128} << 10, size_t{256} << 10, size_t{512} << 10,
        size_t{1} << 20, size_t{2} << 20, size_t{4} << 20, size_t{8} << 20}) {
    const size_t elems = bytes / 2;
    const auto nccl = [&] {
      NCCL_OK(ncclGroupStart());
      for (int d = 0; d < n; ++d)
        NCCL_OK(
            ncclAllReduce(g.io(d), g.io(d), elems, ncclBfloat16, ncclSum, comms[d], g.stream(d)));
      NCCL_OK(ncclGroupEnd());
    };
    const auto peer = [&](kernels::PeerAllReduceAlgo algo) {
      return [&g, n, elems, algo] {
        for (int d = 0; d < n; ++d) {
          CUDA_CHECK(cudaSetDevice(d));
          const TensorView io(g.io(d), DType::kBf16, {static_cast<int64_t>(elems)}, Device::kCuda);
          kernels::peer_all_reduce_sum(io, g.buffers(d), algo, g.stream(d));
        }
      };
    };
    const double t_nccl = time_in_graph(g, nccl);
    const double t_one = time_in_graph(g, peer(kernels::PeerAllReduceAlgo::kOneShot));
    const double t_two = time_in_graph(g, peer(kernels::PeerAllReduceAlgo::kTwoShot));
    std::printf("%10zu %10.2f %10.2f %10.2f %8.2f\n", bytes, t_nccl, t_one, t_two,
                std::min(t_one, t_two) / t_nccl);
    std::printf(
        "JSON {\"bench\":\"all_reduce\",\"ranks\":%d,\"bytes\":%zu,\"nccl_us\":%.3f,"
        "\"one_shot_us\":%.3f,\"two_shot_us\":%.3f}\n",
        n, bytes, t_nccl, t_one, t_two);
  }
  for (ncclComm_t c : comms) ncclCommDestroy(c);
}

}  // namespace
}  // namespace nanovllm

int main() {
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // never NVLink multicast on these hosts
  const int usable = nanovllm::test::PeerGroup::usable_gpus();
  if (usable < 2) {
    std::printf("all_reduce_bench: needs 2 GPUs with peer access, %d here; nothing measured\n",
                usable);
    return 0;
  }
  for (const int n : {2, 4, 8})
    if (n <= usable) nanovllm::bench_ranks(n);
  return 0;
}
