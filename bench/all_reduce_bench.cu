// One all-reduce inside a CUDA graph, on 2 and 4 GPUs of this process (as many as have peer
// access): the peer-memory one-shot, two-shot, push and push two-shot ("push2") kernels
// (kernels/peer_all_reduce.h) beside NCCL (NVLS off), bf16, in place, over the decode sizes
// (8 KiB .. 2 MiB) and a few larger.
// Each figure: a graph of kCallsPerGraph calls replayed kReplays times on every GPU, the time
// of the slowest GPU's replays over the calls. Prints a table and JSON lines. --sweep-shapes
// adds, per GPU count, both peer kernels at every launch shape (kernels::PeerAllReduceShape:
// 128 .. 1024 threads a block, at most 128 blocks) beside the default shape, and the best per
// size. --fused-norm adds, per GPU count, the all-reduce with the residual add and RMSNorm after
// it (H 4096): each peer kernel then kernels::cuda::fused_add_rms_norm, and the one-shot and
// push fused kernels (kernels::peer_all_reduce_add_rms_norm).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <vector>

#include "kernels/check.h"
#include "kernels/peer_all_reduce.h"
#include "kernels/rms_norm.h"
#include "tests/kernels/peer_group.h"

namespace nanovllm {
namespace {

constexpr int kCallsPerGraph = 20;
constexpr int kReplays = 50;
constexpr size_t kCapacity = size_t{16} << 20;
constexpr size_t kSizes[] = {size_t{8} << 10,   size_t{32} << 10,  size_t{128} << 10,
                             size_t{256} << 10, size_t{512} << 10, size_t{1} << 20,
                             size_t{2} << 20,   size_t{4} << 20,   size_t{8} << 20};
constexpr int kSweepThreads[] = {128, 256, 512, 1024};

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

// Enqueues one peer all-reduce of `elems` on every GPU.
std::function<void()> peer_call(const test::PeerGroup& g, size_t elems,
                                kernels::PeerAllReduceAlgo algo,
                                kernels::PeerAllReduceShape shape = {}) {
  return [&g, elems, algo, shape] {
    for (int d = 0; d < g.size(); ++d) {
      CUDA_CHECK(cudaSetDevice(d));
      const TensorView io(g.io(d), DType::kBf16, {static_cast<int64_t>(elems)}, Device::kCuda);
      kernels::peer_all_reduce_sum(io, g.buffers(d), algo, g.stream(d), shape);
    }
  };
}

// An algorithm's name in the tables ("one-shot") and in the JSON lines ("one_shot").
struct AlgoNames {
  const char* table;
  const char* json;
};
AlgoNames algo_names(kernels::PeerAllReduceAlgo algo) {
  switch (algo) {
    case kernels::PeerAllReduceAlgo::kOneShot:
      return {"one-shot", "one_shot"};
    case kernels::PeerAllReduceAlgo::kTwoShot:
      return {"two-shot", "two_shot"};
    case kernels::PeerAllReduceAlgo::kPushTwoShot:
      return {"push2", "push_two_shot"};
    default:
      return {"push", "push"};
  }
}

// The default shape's times at one size (the main table's).
struct DefaultTimes {
  double one_shot = 0, two_shot = 0;
  double of(kernels::PeerAllReduceAlgo algo) const {
    return algo == kernels::PeerAllReduceAlgo::kOneShot ? one_shot : two_shot;
  }
};

// --sweep-shapes: per size, both algorithms at every thread count (max_blocks 128), each beside
// the default shape's time of the same algorithm; then the size's fastest beside the default
// shape's faster algorithm.
void sweep_shapes(const test::PeerGroup& g, const std::vector<DefaultTimes>& defaults) {
  const int n = g.size();
  std::printf(
      "\n%d GPUs: launch shapes, microseconds per all-reduce in a CUDA graph (max_blocks %d)\n", n,
      kernels::kPeerAllReduceMaxBlocks);
  std::printf("%10s %14s %7s %6s %10s %10s %10s\n", "bytes", "algo", "threads", "blocks", "us",
              "default_us", "vs_default");
  for (size_t s = 0; s < std::size(kSizes); ++s) {
    const size_t bytes = kSizes[s], elems = bytes / 2;
    const TensorView io0(g.io(0), DType::kBf16, {static_cast<int64_t>(elems)}, Device::kCuda);
    struct Best {
      kernels::PeerAllReduceAlgo algo;
      int threads = 0, blocks = 0;
      double us = 0;
    } best{};
    for (const auto algo :
         {kernels::PeerAllReduceAlgo::kOneShot, kernels::PeerAllReduceAlgo::kTwoShot}) {
      for (const int threads : kSweepThreads) {
        const kernels::PeerAllReduceShape shape{threads, kernels::kPeerAllReduceMaxBlocks};
        const int blocks = kernels::peer_all_reduce_blocks(io0, g.buffers(0), algo, shape);
        const double us = time_in_graph(g, peer_call(g, elems, algo, shape));
        const double def = defaults[s].of(algo);
        std::printf("%10zu %14s %7d %6d %10.2f %10.2f %10.2f\n", bytes, algo_names(algo).table,
                    threads, blocks, us, def, us / def);
        std::printf(
            "JSON {\"bench\":\"all_reduce_shape\",\"ranks\":%d,\"bytes\":%zu,\"algo\":\"%s\","
            "\"threads\":%d,\"max_blocks\":%d,\"blocks\":%d,\"us\":%.3f,\"default_us\":%.3f}\n",
            n, bytes, algo_names(algo).json, threads, shape.max_blocks, blocks, us, def);
        if (best.threads == 0 || us < best.us) best = {algo, threads, blocks, us};
      }
    }
    const auto def_algo = defaults[s].one_shot <= defaults[s].two_shot
                              ? kernels::PeerAllReduceAlgo::kOneShot
                              : kernels::PeerAllReduceAlgo::kTwoShot;
    const double def = defaults[s].of(def_algo);
    std::printf("%10zu %5s %8s %7d %6d %10.2f %10.2f %10.2f\n", bytes, "best",
                algo_names(best.algo).table, best.threads, best.blocks, best.us, def,
                best.us / def);
    std::printf(
        "JSON {\"bench\":\"all_reduce_shape_best\",\"ranks\":%d,\"bytes\":%zu,\"algo\":\"%s\","
        "\"threads\":%d,\"max_blocks\":%d,\"blocks\":%d,\"us\":%.3f,\"default_algo\":\"%s\","
        "\"default_us\":%.3f}\n",
        n, bytes, algo_names(best.algo).json, best.threads, kernels::kPeerAllReduceMaxBlocks,
        best.blocks, best.us, algo_names(def_algo).json, def);
  }
}

// --fused-norm: per row count at H 4096, the one-shot and two-shot sums then the norm kernel
// beside the one-shot fused kernel (default launch shape). x is the io buffer; residual [512, 4096]
// and weight [4096] per GPU, zeroed (the values do not change the work).
void fused_norm(const test::PeerGroup& g) {
  constexpr int64_t kHidden = 4096, kMaxRows = 512;
  const int n = g.size();
  std::vector<void*> residual(n), weight(n);
  for (int d = 0; d < n; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaMalloc(&residual[d], kMaxRows * kHidden * 2));
    CUDA_CHECK(cudaMalloc(&weight[d], kHidden * 2));
    CUDA_CHECK(cudaMemset(residual[d], 0, kMaxRows * kHidden * 2));
    CUDA_CHECK(cudaMemset(weight[d], 0, kHidden * 2));
    CUDA_CHECK(cudaMemset(g.io(d), 0, kMaxRows * kHidden * 2));
  }
  std::printf(
      "\n%d GPUs: all-reduce + residual add + RMSNorm (H %lld) in a CUDA graph, microseconds per "
      "call\n",
      n, static_cast<long long>(kHidden));
  std::printf("%6s %10s %10s %10s %10s %10s %10s\n", "rows", "bytes", "one+norm", "two+norm",
              "one-fused", "push+norm", "push-fused");
  for (const int64_t rows : {1, 8, 32, 64, 128, 256, 512}) {
    const auto call = [&](bool fused, kernels::PeerAllReduceAlgo algo) {
      return [&, rows, fused, algo] {
        for (int d = 0; d < n; ++d) {
          CUDA_CHECK(cudaSetDevice(d));
          const TensorView x(g.io(d), DType::kBf16, {rows, kHidden}, Device::kCuda);
          const TensorView r(residual[d], DType::kBf16, {rows, kHidden}, Device::kCuda);
          const TensorView w(weight[d], DType::kBf16, {kHidden}, Device::kCuda);
          if (fused) {
            kernels::peer_all_reduce_add_rms_norm(x, r, w, 1e-6f, g.buffers(d), g.stream(d), algo);
          } else {
            const TensorView flat(g.io(d), DType::kBf16, {rows * kHidden}, Device::kCuda);
            kernels::peer_all_reduce_sum(flat, g.buffers(d), algo, g.stream(d));
            kernels::cuda::fused_add_rms_norm(x, r, w, 1e-6f, g.stream(d));
          }
        }
      };
    };
    using kernels::PeerAllReduceAlgo;
    const double one = time_in_graph(g, call(false, PeerAllReduceAlgo::kOneShot));
    const double two = time_in_graph(g, call(false, PeerAllReduceAlgo::kTwoShot));
    const double one_fused = time_in_graph(g, call(true, PeerAllReduceAlgo::kOneShot));
    const double push = time_in_graph(g, call(false, PeerAllReduceAlgo::kPush));
    const double push_fused = time_in_graph(g, call(true, PeerAllReduceAlgo::kPush));
    const size_t bytes = static_cast<size_t>(rows * kHidden * 2);
    std::printf("%6lld %10zu %10.2f %10.2f %10.2f %10.2f %10.2f\n", static_cast<long long>(rows),
                bytes, one, two, one_fused, push, push_fused);
    std::printf(
        "JSON {\"bench\":\"all_reduce_norm\",\"ranks\":%d,\"rows\":%lld,\"hidden\":%lld,"
        "\"bytes\":%zu,\"one_shot_then_norm_us\":%.3f,\"two_shot_then_norm_us\":%.3f,"
        "\"one_shot_fused_us\":%.3f,\"push_then_norm_us\":%.3f,\"push_fused_us\":%.3f}\n",
        n, static_cast<long long>(rows), static_cast<long long>(kHidden), bytes, one, two,
        one_fused, push, push_fused);
  }
  for (int d = 0; d < n; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaFree(residual[d]));
    CUDA_CHECK(cudaFree(weight[d]));
  }
}

void bench_ranks(int n, bool sweep, bool fused) {
  test::PeerGroup g(n, kCapacity);
  std::vector<ncclComm_t> comms(n);
  std::vector<int> devs(n);
  for (int d = 0; d < n; ++d) devs[d] = d;
  NCCL_OK(ncclCommInitAll(comms.data(), n, devs.data()));
  std::printf("\n%d GPUs: microseconds per all-reduce in a CUDA graph (bf16, in place)\n", n);
  std::printf("%10s %10s %10s %10s %10s %10s %8s\n", "bytes", "nccl", "one-shot", "two-shot",
              "push", "push2", "best/nccl");
  std::vector<DefaultTimes> defaults;
  for (const size_t bytes : kSizes) {
    const size_t elems = bytes / 2;
    const auto nccl = [&] {
      NCCL_OK(ncclGroupStart());
      for (int d = 0; d < n; ++d)
        NCCL_OK(
            ncclAllReduce(g.io(d), g.io(d), elems, ncclBfloat16, ncclSum, comms[d], g.stream(d)));
      NCCL_OK(ncclGroupEnd());
    };
    const double t_nccl = time_in_graph(g, nccl);
    const double t_one =
        time_in_graph(g, peer_call(g, elems, kernels::PeerAllReduceAlgo::kOneShot));
    const double t_two =
        time_in_graph(g, peer_call(g, elems, kernels::PeerAllReduceAlgo::kTwoShot));
    const double t_push = time_in_graph(g, peer_call(g, elems, kernels::PeerAllReduceAlgo::kPush));
    const double t_push2 =
        time_in_graph(g, peer_call(g, elems, kernels::PeerAllReduceAlgo::kPushTwoShot));
    defaults.push_back({t_one, t_two});
    std::printf("%10zu %10.2f %10.2f %10.2f %10.2f %10.2f %8.2f\n", bytes, t_nccl, t_one, t_two,
                t_push, t_push2, std::min({t_one, t_two, t_push, t_push2}) / t_nccl);
    std::printf(
        "JSON {\"bench\":\"all_reduce\",\"ranks\":%d,\"bytes\":%zu,\"nccl_us\":%.3f,"
        "\"one_shot_us\":%.3f,\"two_shot_us\":%.3f,\"push_us\":%.3f,\"push_two_shot_us\":%.3f}\n",
        n, bytes, t_nccl, t_one, t_two, t_push, t_push2);
  }
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  if (sweep) sweep_shapes(g, defaults);
  if (fused) fused_norm(g);
}

}  // namespace
}  // namespace nanovllm

int main(int argc, char** argv) {
  bool sweep = false, fused = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--sweep-shapes")) {
      sweep = true;
    } else if (!std::strcmp(argv[i], "--fused-norm")) {
      fused = true;
    } else {
      std::fprintf(stderr, "usage: %s [--sweep-shapes] [--fused-norm]\n", argv[0]);
      return 2;
    }
  }
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // never NVLink multicast on these hosts
  const int usable = nanovllm::test::PeerGroup::usable_gpus();
  if (usable < 2) {
    std::printf("all_reduce_bench: needs 2 GPUs with peer access, %d here; nothing measured\n",
                usable);
    return 0;
  }
  for (const int n : {2, 4, 8})
    if (n <= usable) nanovllm::bench_ranks(n, sweep, fused);
  return 0;
}
