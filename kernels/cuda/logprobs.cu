// kernels/logprobs.h on the device: one thread-block cluster per row (as many blocks as keep
// the batch in one wave: 8 for small batches, one per row for large ones), one pass over the
// row. Each thread keeps an online max / sum of exp (lse), the count of logits >= the
// target's (the rank) and its own top kMaxLogprobs keys (candidate_key: x descending, id
// ascending) in registers (logprob_scan.cuh). A block's first kSeedElements tokens seed its
// top-n (one merge); past them a token enters a thread's list only when it beats the seed's
// n-th, which few do, so the warps seldom diverge into the register insert. Each block merges
// its threads' lists, then the leader block (rank 0) merges the blocks' results through
// distributed shared memory and writes the row. A skipped row costs three loads.
#include <cooperative_groups.h>

#include <algorithm>
#include <utility>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/logprob_scan.cuh"
#include "kernels/logprobs.h"
#include "kernels/sampler_math.h"

namespace nanovllm::kernels::cuda {
namespace {

namespace cg = cooperative_groups;
using namespace logprob_scan;  // NOLINT(google-build-using-namespace): this kernel's own parts

struct Args {
  const float* logits;  // [R, V], rows ld apart
  int64_t ld;
  int vocab;
  const int32_t* targets;        // [R]
  const int32_t* num_top;        // [M]
  int num_top_size;              // M
  const int32_t* num_top_index;  // [R] or null (identity)
  float* target_logprob;         // [R]
  int32_t* target_rank;          // [R]
  int32_t* top_ids;              // [R, width], rows ids_ld apart
  float* top_logprobs;           // [R, width], rows logprobs_ld apart
  int64_t ids_ld, logprobs_ld;
  int width;
};

struct ShareResult {  // one block's share of a row, in every thread
  Lse lse;
  int count;
};

// This block's share [begin, end) of the row: its lse and count, and its top-n in
// sh.block_top.
template <bool kWantTop>
__device__ __forceinline__ ShareResult scan_share(Shared& sh, float4 (*stage)[kThreads],
                                                  const float* x, float target, int begin, int end,
                                                  int n) {
  Scan<kWantTop> s;
  const int seed_end = begin + min((end - begin) & ~3, kSeedElements);  // a multiple of 4
  scan_range(s, stage, x, begin, seed_end, target);
  if constexpr (kWantTop) {
    merge_top(sh, s, n, nullptr, sh.seed_top);
    s.floor = sh.seed_top[n - 1];  // 0 while the seed holds fewer than n tokens
    s.reset_top();
  }
  scan_range(s, stage, x, seed_end, end, target);
  reduce_lse_count(sh, s);
  if constexpr (kWantTop) {
    s.drop_floor();
    merge_top(sh, s, n, sh.seed_top, sh.block_top);
  }
  return {s.lse, s.count};
}

// blockIdx.y is the row, the cluster's blocks split it. Launched as a dependent grid
// (common.cuh): every access follows the wait.
__global__ void __launch_bounds__(kThreads) logprobs_kernel(Args a) {
  __shared__ Shared sh;
  __shared__ float4 stage[kStages][kThreads];  // [stages, threads] the row's tiles in flight
  wait_for_previous_grid();
  const cg::cluster_group cluster = cg::this_cluster();
  const int row = static_cast<int>(blockIdx.y);
  const unsigned rank = cluster.block_rank(), blocks = cluster.num_blocks();
  // The same for every block of the row: the whole cluster leaves before any barrier.
  const int32_t i = a.num_top_index ? a.num_top_index[row] : row;
  if (i < 0) return;
  if (i >= a.num_top_size) __trap();  // the caller's index is broken: fail the step
  const int32_t n = min(a.num_top[i], kTop), t = a.targets[row];
  if (n < 0 || t < 0 || t >= a.vocab) return;
  const float* x = a.logits + row * a.ld;
  const float target = x[t];
  const int chunk =
      (((a.vocab + static_cast<int>(blocks) - 1) / static_cast<int>(blocks)) + 3) & ~3;
  const int begin = min(a.vocab, static_cast<int>(rank) * chunk);
  const int end = min(a.vocab, begin + chunk);
  // Arrived now, waited on before the leader's shared memory is written: by then every
  // block of the cluster has started.
  auto started = cluster.barrier_arrive();
  const ShareResult share = n > 0 ? scan_share<true>(sh, stage, x, target, begin, end, n)
                                  : scan_share<false>(sh, stage, x, target, begin, end, 0);
  cluster.barrier_wait(std::move(started));
  Shared* lead = cluster.map_shared_rank(&sh, 0);
  if (threadIdx.x == 0) {
    lead->cluster_lse[rank] = share.lse;
    lead->cluster_count[rank] = share.count;
  }
  for (int j = static_cast<int>(threadIdx.x); j < n; j += kThreads)
    lead->cluster_top[rank][j] = sh.block_top[j];
  cluster.sync();  // every block's results are in the leader's shared memory
  if (rank != 0) return;
  Lse lse;
  int count = 0;
  for (unsigned b = 0; b < blocks; ++b) {  // the same order in every thread
    lse = merge(lse, sh.cluster_lse[b]);
    count += sh.cluster_count[b];
  }
  const float row_lse = lse.max == -INFINITY ? -INFINITY : lse.max + logf(lse.sum);
  if (threadIdx.x == 0) {
    a.target_logprob[row] = target - row_lse;
    a.target_rank[row] = count;
  }
  const int lane = static_cast<int>(threadIdx.x) & 31;
  if (n > 0 && threadIdx.x < 32)
    merge_lists(static_cast<unsigned>(lane) < blocks ? sh.cluster_top[lane] : nullptr, n,
                sh.row_top);
  __syncthreads();
  for (int j = static_cast<int>(threadIdx.x); j < a.width; j += kThreads) {
    const u64 key = j < n ? sh.row_top[j] : 0;
    a.top_ids[row * a.ids_ld + j] = key ? key_id(key) : -1;
    a.top_logprobs[row * a.logprobs_ld + j] = key ? key_logit(key) - row_lse : -INFINITY;
  }
}

void check_batch(const LogprobsBatch& b) {
  check_cuda_tensor(b.logits, DType::kF32, "logprobs logits");
  check_cuda_tensor(b.targets, DType::kI32, "logprobs targets");
  check_cuda_tensor(b.num_top, DType::kI32, "logprobs num_top");
  check_cuda_tensor(b.target_logprob, DType::kF32, "logprobs target_logprob");
  check_cuda_tensor(b.target_rank, DType::kI32, "logprobs target_rank");
  check_cuda_tensor(b.top_ids, DType::kI32, "logprobs top_ids");
  check_cuda_tensor(b.top_logprobs, DType::kF32, "logprobs top_logprobs");
  CHECK_EQ(b.logits.ndim, 2);
  CHECK_GT(b.logits.size(1), 0);
  CHECK_LT(b.logits.size(1), int64_t{1} << 30);
  const int64_t rows = b.logits.size(0);
  CHECK_LT(rows, int64_t{1} << 31);
  CHECK_EQ(b.targets.size(0), rows);
  if (b.num_top_index.data) {
    check_cuda_tensor(b.num_top_index, DType::kI32, "logprobs num_top_index");
    CHECK_EQ(b.num_top_index.size(0), rows);
  } else {
    CHECK_EQ(b.num_top.size(0), rows);
  }
  CHECK(b.target_logprob.size(0) == rows && b.target_rank.size(0) == rows);
  CHECK(b.top_ids.ndim == 2 && b.top_logprobs.ndim == 2);
  CHECK(b.top_ids.size(0) == rows && b.top_logprobs.size(0) == rows);
  CHECK_GE(b.top_ids.size(1), kMaxLogprobs);
  CHECK_EQ(b.top_logprobs.size(1), b.top_ids.size(1));
  CHECK_LT(b.top_ids.size(1), int64_t{1} << 20);
}

constexpr int64_t kMaxRowsPerLaunch = 65535;  // grid.y

// The launch of `rows` rows of c-block clusters as a dependent grid (common.cuh); attrs: the
// two attributes it points at.
cudaLaunchConfig_t cluster_config(int c, int64_t rows, cudaStream_t stream,
                                  cudaLaunchAttribute (&attrs)[2]) {
  return cluster_launch_config(dim3(static_cast<unsigned>(c), static_cast<unsigned>(rows)),
                               dim3(kThreads), static_cast<unsigned>(c), true, stream, attrs);
}

// Clusters of c blocks that run at once (0 when c blocks cannot form a cluster here).
int max_active_clusters(int c) {
  static int cached[kMaxCluster + 1] = {};
  static bool known[kMaxCluster + 1] = {};
  if (known[c]) return cached[c];
  cudaLaunchAttribute attrs[2];
  const cudaLaunchConfig_t config = cluster_config(c, 1, nullptr, attrs);
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, logprobs_kernel, &config) != cudaSuccess) {
    (void)cudaGetLastError();  // a size this GPU cannot form: not a failure, not a choice
    n = 0;
  }
  cached[c] = n;
  known[c] = true;
  return n;
}

// Blocks per row: the most that still run the whole batch in one wave (a row alone on one
// SM reads it at a few GB/s: the per-token work, not the memory, bounds a block).
int cluster_size(int64_t rows) {
  for (int c = kMaxCluster; c > 1; c /= 2)
    if (rows <= max_active_clusters(c)) return c;
  return 1;
}

}  // namespace

void token_logprobs(const LogprobsBatch& b, cudaStream_t stream) {
  check_batch(b);
  const int64_t rows = b.logits.size(0);
  if (rows == 0) return;
  const int c = cluster_size(rows);
  const bool indexed = b.num_top_index.data != nullptr;
  for (int64_t r0 = 0; r0 < rows; r0 += kMaxRowsPerLaunch) {  // rows past grid.y: more launches
    const int64_t r = std::min(rows - r0, kMaxRowsPerLaunch);
    const int64_t m0 = indexed ? 0 : r0;  // num_top follows the rows when not indexed
    const Args a{b.logits.ptr<float>() + r0 * b.logits.stride[0],
                 b.logits.stride[0],
                 static_cast<int>(b.logits.size(1)),
                 b.targets.ptr<int32_t>() + r0,
                 b.num_top.ptr<int32_t>() + m0,
                 static_cast<int>(b.num_top.size(0) - m0),
                 indexed ? b.num_top_index.ptr<int32_t>() + r0 : nullptr,
                 b.target_logprob.ptr<float>() + r0,
                 b.target_rank.ptr<int32_t>() + r0,
                 b.top_ids.ptr<int32_t>() + r0 * b.top_ids.stride[0],
                 b.top_logprobs.ptr<float>() + r0 * b.top_logprobs.stride[0],
                 b.top_ids.stride[0],
                 b.top_logprobs.stride[0],
                 static_cast<int>(b.top_ids.size(1))};
    cudaLaunchAttribute attrs[2];
    const cudaLaunchConfig_t config = cluster_config(c, r, stream, attrs);
    CUDA_CHECK(cudaLaunchKernelEx(&config, logprobs_kernel, a));
  }
}

}  // namespace nanovllm::kernels::cuda
