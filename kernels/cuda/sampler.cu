// Sampler: greedy argmax, or temperature + top-k/top-p/min-p + Gumbel-max with the same
// Philox draws as the CPU reference (kernels/philox.h), so identical logits give identical
// tokens (up to 1-ulp differences between CUDA's and glibc's expf/logf, which can only matter
// when two candidates tie to within an ulp; philox.h says the same of the Gumbel noise).
//
// Rows with no filter (and greedy rows) are reduced in place, one block per row. Rows with a
// filter need the (scaled logit desc, id asc) order: they are sorted by CUB's segmented radix
// sort (stable, so equal logits stay in id order, as the CPU's comparator wants), in chunks
// of kChunkRows rows to bound the scratch, which is taken from the stream-ordered pool.
// The launcher reads the small per-row parameters back to the host to pick those rows, so
// it synchronises the stream and cannot be captured in a CUDA graph.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/philox.h"
#include "kernels/sampler.h"

namespace nanovllm::kernels::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kChunkRows = 32;

struct RowParams {
  const float* temperatures;  // [B]
  const int32_t* top_k;       // [B]
  const float* top_p;         // [B]
  const float* min_p;         // [B]
  const int64_t* seeds;       // [B]
  const int32_t* positions;   // [B]
  int32_t* out_tokens;        // [B]
};

// (score, id) pairs: higher score wins, the lower id breaks ties (the CPU's order).
struct Best {
  float score;
  int32_t id;
};
struct BestOp {
  __device__ Best operator()(const Best& a, const Best& b) const {
    if (a.id < 0) return b;
    if (b.id < 0) return a;
    if (a.score > b.score || (a.score == b.score && a.id < b.id)) return a;
    return b;
  }
};
struct MinOp {
  __device__ int operator()(int a, int b) const { return a < b ? a : b; }
};
__device__ __forceinline__ void consider(Best& best, float score, int32_t id) {
  best = BestOp()(best, Best{score, id});
}

__device__ __forceinline__ float gumbel(uint64_t seed, int32_t id, int32_t position) {
  return gumbel_from_bits(sampler_random_bits(seed, id, position));
}

// One block per row of logits [B, V] (row stride ld). Greedy rows and unfiltered sampled
// rows finish here; filtered rows are skipped (filtered[b] != 0).
__global__ void __launch_bounds__(kThreads)
    plain_sample_kernel(const float* __restrict__ logits, int64_t ld, int vocab, RowParams p,
                        const uint8_t* __restrict__ filtered) {
  using Reduce = cub::BlockReduce<Best, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const int b = blockIdx.x;
  if (filtered[b]) return;
  const float* row = logits + b * ld;
  const float t = effective_temperature(p.temperatures[b]);
  Best best{0.f, -1};
  if (t == 0.f) {
    for (int v = threadIdx.x; v < vocab; v += kThreads) consider(best, row[v], v);
  } else {
    const uint64_t seed = static_cast<uint64_t>(p.seeds[b]);
    const int32_t pos = p.positions[b];
    for (int v = threadIdx.x; v < vocab; v += kThreads)
      consider(best, row[v] / t + gumbel(seed, v, pos), v);
  }
  best = Reduce(tmp).Reduce(best, BestOp());
  if (threadIdx.x == 0) p.out_tokens[b] = best.id;
}

// keys: [n, V] = logits[rows[i]] / temperature, ids: [n, V] = 0..V-1.
__global__ void scale_kernel(const float* __restrict__ logits, int64_t ld, int vocab,
                             const float* __restrict__ temperatures,
                             const int32_t* __restrict__ rows, float* keys, int32_t* ids) {
  const int i = blockIdx.y, b = rows[i];
  const float t = effective_temperature(temperatures[b]);
  for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < vocab; v += gridDim.x * blockDim.x) {
    keys[static_cast<int64_t>(i) * vocab + v] = logits[b * ld + v] / t;
    ids[static_cast<int64_t>(i) * vocab + v] = v;
  }
}

// One block per filtered row over its sorted keys/ids [V]: top-k, top-p, min-p cut a prefix
// of the sorted order; Gumbel-max picks within that prefix.
__global__ void __launch_bounds__(kThreads)
    filtered_sample_kernel(const float* __restrict__ keys, const int32_t* __restrict__ ids,
                           int vocab, const int32_t* __restrict__ rows, RowParams p) {
  using ReduceD = cub::BlockReduce<double, kThreads>;
  using ReduceI = cub::BlockReduce<int, kThreads>;
  using ReduceB = cub::BlockReduce<Best, kThreads>;
  using ScanD = cub::BlockScan<double, kThreads>;
  __shared__ union {
    typename ReduceD::TempStorage rd;
    typename ReduceI::TempStorage ri;
    typename ReduceB::TempStorage rb;
    typename ScanD::TempStorage sd;
  } tmp;
  __shared__ double s_total;
  __shared__ int s_n;
  const int i = blockIdx.x, b = rows[i];
  const float* k = keys + static_cast<int64_t>(i) * vocab;  // sorted descending
  const int32_t* id = ids + static_cast<int64_t>(i) * vocab;
  const int32_t top_k = p.top_k[b];
  const float top_p = p.top_p[b], min_p = p.min_p[b];
  const float l_max = k[0];
  int n = top_k > 0 && top_k < vocab ? top_k : vocab;

  if (top_p < 1.0f) {
    double part = 0.0;
    for (int j = threadIdx.x; j < n; j += kThreads) part += expf(k[j] - l_max);
    const double total = ReduceD(tmp.rd).Sum(part);
    if (threadIdx.x == 0) s_total = total;
    __syncthreads();
    const double target = static_cast<double>(top_p) * s_total;
    double carry = 0.0;
    int cut = n;  // the CPU keeps everything when the mass never reaches the target
    for (int base = 0; base < n; base += kThreads) {
      const int j = base + threadIdx.x;
      const double e = j < n ? static_cast<double>(expf(k[j] - l_max)) : 0.0;
      double incl, chunk;
      __syncthreads();
      ScanD(tmp.sd).InclusiveSum(e, incl, chunk);
      const int hit = (j < n && carry + incl >= target) ? j + 1 : INT_MAX;
      __syncthreads();
      const int first = ReduceI(tmp.ri).Reduce(hit, MinOp());
      if (threadIdx.x == 0) s_n = first;
      __syncthreads();
      if (s_n != INT_MAX) {
        cut = s_n;
        break;
      }
      carry += chunk;
    }
    n = cut;
  }
  if (min_p > 0.0f) {
    int fail = INT_MAX;  // first index >= 1 whose probability ratio is below min_p
    for (int j = 1 + threadIdx.x; j < n; j += kThreads)
      if (!(expf(k[j] - l_max) >= min_p)) fail = min(fail, j);
    __syncthreads();
    fail = ReduceI(tmp.ri).Reduce(fail, MinOp());
    if (threadIdx.x == 0) s_n = fail;
    __syncthreads();
    n = min(n, s_n);
  }
  const uint64_t seed = static_cast<uint64_t>(p.seeds[b]);
  const int32_t pos = p.positions[b];
  Best best{0.f, -1};
  for (int j = threadIdx.x; j < n; j += kThreads)
    consider(best, k[j] + gumbel(seed, id[j], pos), id[j]);
  __syncthreads();
  best = ReduceB(tmp.rb).Reduce(best, BestOp());
  if (threadIdx.x == 0) p.out_tokens[b] = best.id;
}

template <typename T>
std::vector<T> to_host(const TensorView& t, int64_t n, cudaStream_t stream) {
  std::vector<T> h(static_cast<size_t>(n));
  CHECK_EQ(t.stride[0], 1);
  CUDA_CHECK(cudaMemcpyAsync(h.data(), t.data, n * sizeof(T), cudaMemcpyDeviceToHost, stream));
  return h;
}

void check_batch(const SamplingBatch& s) {
  check_cuda_tensor(s.logits, DType::kF32, "sampler logits");
  check_cuda_tensor(s.temperatures, DType::kF32, "sampler temperatures");
  check_cuda_tensor(s.top_k, DType::kI32, "sampler top_k");
  check_cuda_tensor(s.top_p, DType::kF32, "sampler top_p");
  check_cuda_tensor(s.min_p, DType::kF32, "sampler min_p");
  check_cuda_tensor(s.seeds, DType::kI64, "sampler seeds");
  check_cuda_tensor(s.positions, DType::kI32, "sampler positions");
  check_cuda_tensor(s.out_tokens, DType::kI32, "sampler out_tokens");
  CHECK_EQ(s.logits.ndim, 2);
  CHECK_GT(s.logits.size(1), 0);
  CHECK_LT(s.logits.size(1), int64_t{1} << 30);
}

// Which rows take the sort path. Host vectors: they are copied to the device asynchronously
// and must live until the stream is synchronised at the end of sample().
struct SortPlan {
  std::vector<uint8_t> filtered;  // [B] 1: the row is sorted, the plain kernel skips it
  std::vector<int32_t> rows;      // the sorted rows, ascending
  int chunk = 0;                  // rows sorted per pass (<= kChunkRows)
  std::vector<int32_t> offsets;   // [chunk + 1] segment starts of one pass's keys
};

// Reads the per-row settings back (synchronising the stream) and picks the rows that need
// the sorted order: the same rule as the CPU's filter_candidates.
SortPlan plan_sort(const SamplingBatch& s, int64_t batch, int64_t vocab, cudaStream_t stream) {
  const auto temps = to_host<float>(s.temperatures, batch, stream);
  const auto ks = to_host<int32_t>(s.top_k, batch, stream);
  const auto ps = to_host<float>(s.top_p, batch, stream);
  const auto mps = to_host<float>(s.min_p, batch, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  SortPlan plan;
  plan.filtered.assign(static_cast<size_t>(batch), 0);
  for (int64_t b = 0; b < batch; ++b) {
    const bool use =
        temps[b] != 0.f && ((ks[b] > 0 && ks[b] < vocab) || ps[b] < 1.f || mps[b] > 0.f);
    plan.filtered[b] = use;
    if (use) plan.rows.push_back(static_cast<int32_t>(b));
  }
  plan.chunk = std::min(static_cast<int>(plan.rows.size()), kChunkRows);
  plan.offsets.resize(static_cast<size_t>(plan.chunk) + 1);
  for (int i = 0; i <= plan.chunk; ++i) plan.offsets[i] = static_cast<int32_t>(i * vocab);
  return plan;
}

// Device scratch of one sample() call, one allocation from the stream-ordered pool:
// filtered flags [B] u8, rows [n] i32, offsets [chunk + 1] i32, keys/ids in and out
// [chunk, V] each, CUB temp storage.
struct Scratch {
  char* base = nullptr;  // the allocation: cudaFreeAsync this
  uint8_t* filtered = nullptr;
  int32_t* rows = nullptr;
  int32_t* offsets = nullptr;
  float* keys_in = nullptr;
  float* keys_out = nullptr;
  int32_t* ids_in = nullptr;
  int32_t* ids_out = nullptr;
  void* cub_tmp = nullptr;
  size_t cub_bytes = 0;
};

Scratch allocate_scratch(const SortPlan& plan, int64_t batch, int64_t vocab, cudaStream_t stream) {
  const int chunk = plan.chunk;
  Scratch d;
  if (chunk > 0) {
    CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
        nullptr, d.cub_bytes, static_cast<const float*>(nullptr), static_cast<float*>(nullptr),
        static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
        static_cast<int>(chunk * vocab), chunk, static_cast<const int32_t*>(nullptr),
        static_cast<const int32_t*>(nullptr), 0, 32, stream));
  }
  auto align = [](size_t x) { return (x + 255) & ~size_t{255}; };
  const size_t kv_bytes = align(static_cast<size_t>(chunk) * vocab * 4);
  const size_t rows_bytes = plan.rows.size() * 4 + 4;
  const size_t total =
      align(batch) + align(rows_bytes) + align((chunk + 1) * 4) + 4 * kv_bytes + align(d.cub_bytes);
  CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&d.base), total, stream));
  char* cur = d.base;
  auto take = [&](size_t bytes) {
    char* r = cur;
    cur += align(bytes);
    return r;
  };
  d.filtered = reinterpret_cast<uint8_t*>(take(batch));
  d.rows = reinterpret_cast<int32_t*>(take(rows_bytes));
  d.offsets = reinterpret_cast<int32_t*>(take((chunk + 1) * 4));
  d.keys_in = reinterpret_cast<float*>(take(kv_bytes));
  d.keys_out = reinterpret_cast<float*>(take(kv_bytes));
  d.ids_in = reinterpret_cast<int32_t*>(take(kv_bytes));
  d.ids_out = reinterpret_cast<int32_t*>(take(kv_bytes));
  d.cub_tmp = take(d.cub_bytes);
  return d;
}

void upload_plan(const SortPlan& plan, const Scratch& d, int64_t batch, cudaStream_t stream) {
  CUDA_CHECK(
      cudaMemcpyAsync(d.filtered, plan.filtered.data(), batch, cudaMemcpyHostToDevice, stream));
  if (plan.rows.empty()) return;
  CUDA_CHECK(cudaMemcpyAsync(d.rows, plan.rows.data(), plan.rows.size() * 4, cudaMemcpyHostToDevice,
                             stream));
  CUDA_CHECK(cudaMemcpyAsync(d.offsets, plan.offsets.data(), plan.offsets.size() * 4,
                             cudaMemcpyHostToDevice, stream));
}

// Greedy rows and sampled rows without a filter: argmax (plus Gumbel noise) in place.
void draw_unsorted_rows(const SamplingBatch& s, const RowParams& p, const Scratch& d, int64_t batch,
                        int64_t vocab, cudaStream_t stream) {
  plain_sample_kernel<<<static_cast<unsigned>(batch), kThreads, 0, stream>>>(
      s.logits.ptr<float>(), s.logits.stride[0], static_cast<int>(vocab), p, d.filtered);
  CUDA_CHECK_LAUNCH();
}

// Filtered rows, kChunkRows at a time: scale by temperature, sort (scaled logit desc, id
// asc), cut by top-k/top-p/min-p and draw within the cut.
void draw_sorted_rows(const SamplingBatch& s, const RowParams& p, const SortPlan& plan,
                      const Scratch& d, int64_t vocab, cudaStream_t stream) {
  const int n_rows = static_cast<int>(plan.rows.size());
  for (int first = 0; first < n_rows; first += plan.chunk) {
    const int n = std::min(plan.chunk, n_rows - first);
    scale_kernel<<<dim3(ceil_div(vocab, 1024), n), 256, 0, stream>>>(
        s.logits.ptr<float>(), s.logits.stride[0], static_cast<int>(vocab), p.temperatures,
        d.rows + first, d.keys_in, d.ids_in);
    CUDA_CHECK_LAUNCH();
    size_t bytes = d.cub_bytes;
    CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
        d.cub_tmp, bytes, d.keys_in, d.keys_out, d.ids_in, d.ids_out, static_cast<int>(n * vocab),
        n, d.offsets, d.offsets + 1, 0, 32, stream));
    filtered_sample_kernel<<<n, kThreads, 0, stream>>>(d.keys_out, d.ids_out,
                                                       static_cast<int>(vocab), d.rows + first, p);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

void sample(const SamplingBatch& s, cudaStream_t stream) {
  check_batch(s);
  const int64_t batch = s.logits.size(0), vocab = s.logits.size(1);
  if (batch == 0) return;
  const RowParams p{s.temperatures.ptr<float>(), s.top_k.ptr<int32_t>(), s.top_p.ptr<float>(),
                    s.min_p.ptr<float>(),        s.seeds.ptr<int64_t>(), s.positions.ptr<int32_t>(),
                    s.out_tokens.ptr<int32_t>()};
  const SortPlan plan = plan_sort(s, batch, vocab, stream);
  const Scratch scratch = allocate_scratch(plan, batch, vocab, stream);
  upload_plan(plan, scratch, batch, stream);
  draw_unsorted_rows(s, p, scratch, batch, vocab, stream);
  draw_sorted_rows(s, p, plan, scratch, vocab, stream);
  CUDA_CHECK(cudaFreeAsync(scratch.base, stream));
  // Also keeps the plan's host vectors alive until their copies are done.
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace nanovllm::kernels::cuda
