// The CUDA sampler (rules in kernels/sampler.h): no sort of the vocabulary, no allocation, no
// host round trip, so it is captured in the decode graphs.
//
// One thread-block cluster per row (Hopper): its C blocks each read a contiguous 1/C of the
// row and meet in cluster barriers; they add their histograms into the leader block's
// (rank 0) through distributed shared memory, and the leader decides what the next pass over
// the row does.
//   greedy rows: one pass, the argmax.
//   other rows: pass 1 finds the row max (and its token).
//   unfiltered / min-p rows: then one pass of Gumbel-max; the max token's score bounds it, so
//     a token more than the largest possible noise below it draws no noise.
//   top-k rows with k <= 32 (Qwen3's defaults): one pass, each thread keeping its 3 largest
//     logits (4 at 4 blocks a row or fewer), each block sending its top k above its floor to
//     the leader, which finishes as after a compaction (sampler_small_top_k.cuh; a flat row
//     goes on to the passes below).
//   other top-k / top-p rows: Then histogram passes narrow the candidates:
//     the first counts (top-k) or sums the fixed-point mass (top-p) of tokens in 2048 bins of
//     1/64 logit below the max (a token further than 32 below has zero mass); the bin where
//     the cumulative count / mass reaches top_k / the top-p target bounds the candidates.
//     - At most kMaxCandidates tokens at or above that bin: one pass copies them into the
//       leader's shared memory, which sorts them (bitonic) and applies top-k, top-p, min-p
//       and Gumbel-max exactly as the CPU reference does.
//     - More, but at most kMaxCandidates in the crossing bin itself: one pass copies that bin,
//       the leader sorts it and finds the exact cut token; a last pass draws over the tokens
//       at or above it (top-k then goes on to top-p's window the same way).
//     - Otherwise (flat rows, a cut further than 32 logits down) radix-select passes over
//       11-bit digits of the 64-bit candidate key narrow the range until one of the above
//       applies.
// Typical Qwen3 defaults (top_k 20, top_p 0.95): one pass over the row at every batch size.
// Emit mode (kernels/shard_sampler.h, cuda::shard_candidates below): the row is one rank's
// vocabulary shard (ids offset by its start) and the kernel writes candidate keys instead of a
// token: a greedy or unfiltered row's winner, or a top-k row's k keys sorted (top-p and min-p
// are left to rank 0's merge; the exact cut inside a bin then compacts the k keys it bounds).
// Rule P (logit_bias, penalties, min_tokens) runs first, as its own kernel
// (sampler_process.cuh): it writes the processed rows into the `processed` scratch, and a
// processed row's cluster reads that instead of the raw logits, which stay untouched for the
// logprobs kernel (kernels/cuda/logprobs.cu) launched after the draw. The leader counts the
// drawn token in the slot's token_state.
#include <cooperative_groups.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/sampler_passes.cuh"
#include "kernels/cuda/sampler_process.cuh"
#include "kernels/cuda/sampler_row.cuh"
#include "kernels/cuda/sampler_select.cuh"
#include "kernels/cuda/sampler_small_top_k.cuh"
#include "kernels/sampler.h"
#include "kernels/shard_sampler.h"

namespace nanovllm::kernels::cuda {
namespace {

using namespace sampling;  // NOLINT(google-build-using-namespace): this kernel's own parts

struct SlotParams {
  const float* temperatures;
  const int32_t* top_k;
  const float* top_p;
  const float* min_p;
  const int64_t* seeds;
};

struct Args {
  const float* logits;
  int64_t ld;  // row stride
  int vocab;
  const int32_t* slots;      // [B]
  const int32_t* positions;  // [B]
  SlotParams params;
  int num_slots;  // N
  ProcessParams process;
  const float* processed;  // [B, V] contiguous (rule P's rows), or null
  int32_t* out_tokens;     // [B] (null when emitting)
  int32_t* last_tokens;    // [N] or null
  int32_t* row_passes;     // [B] or null
  // Shard candidates (kernels/shard_sampler.h) instead of tokens: [B, kShardCandidates] keys
  // of ids id_offset + column; top_p / min_p are left to rank 0's merge. Null: a draw.
  u64* emit_keys;
  int id_offset;
  int64_t full_vocab;  // V, which a top_k must be below to cut
};

// The greedy draw, out of line so that the kernel's inlined histogram passes keep their
// registers (inlined, the kernel spilled and the passes ran 3-9 % slower; sampler_bench on an
// H200). The row is copied in: read through the caller's local copy, the loop would load it.
__device__ __noinline__ Best draw_greedy(Shared& sh, const cg::cluster_group& cluster,
                                         const Row& row) {
  const Row r = row;
  return draw(
      sh, cluster, r, false, [](float x) { return x; }, [](int, float) { return true; });
}

__global__ void __launch_bounds__(kThreads, 2) sample_kernel(Args a) {
  NANOVLLM_TRACE_SCOPE(trace::kSampler, nullptr);
  __shared__ Shared sh;
  const cg::cluster_group cluster = cg::this_cluster();
  const int row = blockIdx.y;
  const unsigned rank = cluster.block_rank(), blocks = cluster.num_blocks();
  const bool leader = rank == 0;
  const int32_t slot = a.slots[row];
  u64* keys = a.emit_keys ? a.emit_keys + static_cast<int64_t>(row) * kShardCandidates : nullptr;
  if (slot < 0) {  // padding: the whole cluster leaves before any barrier
    if (leader && keys)
      for (int i = threadIdx.x; i < kShardCandidates; i += kThreads) keys[i] = 0;
    if (leader && threadIdx.x == 0) {
      if (!keys) a.out_tokens[row] = 0;
      if (a.row_passes) a.row_passes[row] = 0;
    }
    return;
  }
  if (slot >= a.num_slots) __trap();  // rank 0's slot allocator is broken: fail the step
  Row r;
  const int chunk =
      (((a.vocab + static_cast<int>(blocks) - 1) / static_cast<int>(blocks)) + 3) & ~3;
  const SlotPenalties pen = slot_penalties(a.process, slot);
  const bool processed = a.processed && row_processed(a.process, slot, pen, a.positions[row]);
  r.logits = processed ? a.processed + static_cast<int64_t>(row) * a.vocab : a.logits + row * a.ld;
  r.begin = min(a.vocab, static_cast<int>(rank) * chunk);
  r.end = min(a.vocab, r.begin + chunk);
  r.vocab = a.vocab;
  r.id_offset = a.id_offset;
  r.emit = keys != nullptr;
  const float t_raw = a.params.temperatures[slot];
  r.temperature = effective_temperature(t_raw);
  r.window_scale = kWindowBinsPerLogit / r.temperature;
  r.top_k = a.params.top_k[slot];
  r.top_p = a.params.top_p[slot];
  r.min_p = a.params.min_p[slot];
  r.seed = static_cast<uint64_t>(a.params.seeds[slot]);
  r.position = a.positions[row] + 1;
  r.use_k = r.top_k > 0 && r.top_k < a.full_vocab;
  // A shard short of top_k tokens: rank 0's rule (ipc/shard_sampling_rule.h) is broken.
  if (r.emit && r.use_k && r.top_k >= a.vocab) __trap();
  r.use_p = !r.emit && r.top_p < 1.0f;
  r.use_min_p = !r.emit && r.min_p > 0.0f;
  const bool greedy = t_raw == 0.0f;
  int passes = 1;
  int32_t token = -1;
  Best drawn{0.f, -1};  // greedy and Gumbel rows: the winner, whose key a shard emits
  if (threadIdx.x == 0) sh.best_bits = ordered_bits(-INFINITY);
  __syncthreads();
  if (greedy) {
    drawn = draw_greedy(sh, cluster, r);
    token = drawn.id;
  } else {
    const bool small_top_k = r.use_k && r.top_k <= kSmallTopK && !r.emit;
    if (small_top_k)  // sampler_small_top_k.cuh
      token = blocks <= kKeepFourBlocks ? draw_small_top_k<4>(sh, cluster, r)
                                        : draw_small_top_k<3>(sh, cluster, r);
    if (!small_top_k || token == kSmallTopKFallback) {  // a flat row starts over
      const PassesOutcome o = draw_in_passes(sh, cluster, r, keys);
      if (o.emitted) return;  // the last cluster barrier is behind every block
      passes = static_cast<int>(small_top_k) + o.passes;
      token = o.token;
      drawn = o.drawn;
    }
  }
  if (keys) {  // a greedy or unfiltered row of a shard: its winner's key
    if (leader && threadIdx.x < kShardCandidates)
      keys[threadIdx.x] =
          threadIdx.x == 0 && drawn.id >= 0 ? u64{score_key(drawn.score, drawn.id)} : 0;
    return;
  }
  if (leader && threadIdx.x == 0) {
    a.out_tokens[row] = token;
    if (a.last_tokens) a.last_tokens[slot] = token;
    if (a.row_passes) a.row_passes[row] = passes;
    if (pen.active && token >= 0 && token < a.vocab)
      count_sampled_token(a.process.token_state + slot * a.process.state_ld + token);
  }
}

// The launch of `rows` rows of c-block clusters (not early); attrs: what it points at.
cudaLaunchConfig_t cluster_config(int c, int rows, cudaStream_t stream,
                                  cudaLaunchAttribute (&attrs)[2]) {
  return cluster_launch_config(dim3(static_cast<unsigned>(c), static_cast<unsigned>(rows)),
                               dim3(kThreads), static_cast<unsigned>(c), false, stream, attrs);
}

// Clusters of c blocks that run at once (0 when c blocks cannot form a cluster here).
int max_active_clusters(int c) {
  static int cached[kMaxCluster + 1] = {};
  static bool known[kMaxCluster + 1] = {};
  if (known[c]) return cached[c];
  if (c > 8)
    CUDA_CHECK(
        cudaFuncSetAttribute(sample_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchAttribute attrs[2];
  const cudaLaunchConfig_t config = cluster_config(c, 1, nullptr, attrs);
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, sample_kernel, &config) != cudaSuccess) {
    (void)cudaGetLastError();  // a size this GPU cannot form: not a failure, not a choice
    n = 0;
  }
  cached[c] = n;
  known[c] = true;
  return n;
}

// Blocks per row: the most that still run the whole batch in one wave (small batches spread
// over the GPU; a second wave would double the time).
int cluster_size(int64_t batch) {
  for (int c = kMaxCluster; c > 1; c /= 2)
    if (batch <= max_active_clusters(c)) return c;
  return 1;
}

void check_batch(const SamplingBatch& s) {
  check_cuda_tensor(s.logits, DType::kF32, "sampler logits");
  check_cuda_tensor(s.slots, DType::kI32, "sampler slots");
  check_cuda_tensor(s.positions, DType::kI32, "sampler positions");
  check_draw_params(s.params, Device::kCuda);
  check_cuda_tensor(s.out_tokens, DType::kI32, "sampler out_tokens");
  if (s.last_tokens.data) check_cuda_tensor(s.last_tokens, DType::kI32, "sampler last_tokens");
  if (s.row_passes.data) check_cuda_tensor(s.row_passes, DType::kI32, "sampler row_passes");
  CHECK_EQ(s.logits.ndim, 2);
  CHECK_EQ(s.logits.stride[1], 1);
  CHECK_GT(s.logits.size(1), 0);
  CHECK_LT(s.logits.size(1), int64_t{1} << 30);
  CHECK_EQ(s.slots.size(0), s.logits.size(0));
  CHECK_EQ(s.positions.size(0), s.logits.size(0));
  CHECK_EQ(s.out_tokens.size(0), s.logits.size(0));
  check_slot_params(s.params, s.logits.size(1));
  const int64_t n = s.params.temperatures.size(0);
  CHECK(!s.last_tokens.data || s.last_tokens.size(0) == n);
  if (s.params.num_logprobs.data)
    check_cuda_tensor(s.params.num_logprobs, DType::kI32, "sampler num_logprobs");
  const SampledLogprobs& lp = s.logprobs;
  const bool logprobs = lp.logprob.data != nullptr;
  CHECK_MSG(logprobs == (lp.rank.data != nullptr) && logprobs == (lp.top_ids.data != nullptr) &&
                logprobs == (lp.top_logprobs.data != nullptr),
            "sampler logprobs: all four outputs or none");
  CHECK_MSG(!logprobs || s.params.num_logprobs.data, "sampler logprobs need num_logprobs");
}

// Rule P's scratch, required where some slot may be processed.
void check_processed(const SamplingBatch& s, const ProcessParams& q) {
  if (!any_processing(q)) return;
  check_cuda_tensor(s.processed, DType::kF32, "sampler processed");
  CHECK_EQ(s.processed.ndim, 2);
  CHECK(s.processed.size(0) == s.logits.size(0) && s.processed.size(1) == s.logits.size(1));
  CHECK_EQ(s.processed.stride[0], s.logits.size(1));
}

}  // namespace

void sample(const SamplingBatch& s, cudaStream_t stream) {
  check_batch(s);
  const int64_t batch = s.logits.size(0), vocab = s.logits.size(1);
  const ProcessParams q = process_params(s.params);
  check_processed(s, q);
  if (batch == 0) return;
  CHECK_LT(batch, int64_t{65536});  // grid.y
  const int num_slots = static_cast<int>(s.params.temperatures.size(0));
  float* processed = any_processing(q) ? s.processed.ptr<float>() : nullptr;
  const Args a{s.logits.ptr<float>(),
               s.logits.stride[0],
               static_cast<int>(vocab),
               s.slots.ptr<int32_t>(),
               s.positions.ptr<int32_t>(),
               SlotParams{s.params.temperatures.ptr<float>(), s.params.top_k.ptr<int32_t>(),
                          s.params.top_p.ptr<float>(), s.params.min_p.ptr<float>(),
                          s.params.seeds.ptr<int64_t>()},
               num_slots,
               q,
               processed,
               s.out_tokens.ptr<int32_t>(),
               s.last_tokens.data ? s.last_tokens.ptr<int32_t>() : nullptr,
               s.row_passes.data ? s.row_passes.ptr<int32_t>() : nullptr,
               nullptr,
               0,
               vocab};
  if (processed) {
    const ProcessArgs pa{s.logits.ptr<float>(),
                         s.logits.stride[0],
                         static_cast<int>(vocab),
                         s.slots.ptr<int32_t>(),
                         s.positions.ptr<int32_t>(),
                         num_slots,
                         q,
                         processed};
    launch_dependent(
        process_logits_kernel,
        dim3(static_cast<unsigned>(process_blocks_per_row(batch)), static_cast<unsigned>(batch)),
        dim3(kProcessThreads), stream, pa);
  }
  const int c = cluster_size(batch);
  cudaLaunchAttribute attrs[2];
  const cudaLaunchConfig_t config = cluster_config(c, static_cast<int>(batch), stream, attrs);
  CUDA_CHECK(cudaLaunchKernelEx(&config, sample_kernel, a));
  if (s.logprobs.logprob.data)  // on the raw rows, for the tokens just drawn
    token_logprobs({s.logits, s.out_tokens, s.params.num_logprobs, s.slots, s.logprobs.logprob,
                    s.logprobs.rank, s.logprobs.top_ids, s.logprobs.top_logprobs},
                   stream);
}

void shard_candidates(const ShardCandidatesBatch& b, cudaStream_t stream) {
  const TensorView& l = b.shard_logits;
  check_cuda_tensor(l, DType::kF32, "shard sampler logits");
  check_cuda_tensor(b.slots, DType::kI32, "shard sampler slots");
  check_cuda_tensor(b.positions, DType::kI32, "shard sampler positions");
  check_draw_params(b.params, Device::kCuda);
  check_cuda_tensor(b.keys, DType::kI64, "shard sampler keys");
  CHECK_EQ(l.ndim, 2);
  CHECK_EQ(l.stride[1], 1);
  const int64_t rows = l.size(0);
  CHECK(b.columns > 0 && b.columns <= l.size(1));
  CHECK(b.vocab_start >= 0 && b.vocab_start + b.columns <= b.vocab);
  CHECK_LT(b.vocab, int64_t{1} << 30);
  CHECK(b.keys.ndim == 2 && b.keys.is_contiguous());
  CHECK(b.keys.size(0) == rows && b.keys.size(1) == kShardCandidates);
  CHECK_EQ(b.slots.size(0), rows);
  CHECK_EQ(b.positions.size(0), rows);
  if (rows == 0) return;
  CHECK_LT(rows, int64_t{65536});  // grid.y
  const SamplingSlotParams& p = b.params;
  const Args a{l.ptr<float>(),
               l.stride[0],
               static_cast<int>(b.columns),
               b.slots.ptr<int32_t>(),
               b.positions.ptr<int32_t>(),
               SlotParams{p.temperatures.ptr<float>(), p.top_k.ptr<int32_t>(), p.top_p.ptr<float>(),
                          p.min_p.ptr<float>(), p.seeds.ptr<int64_t>()},
               static_cast<int>(p.temperatures.size(0)),
               ProcessParams{},
               nullptr,
               nullptr,
               nullptr,
               nullptr,
               reinterpret_cast<u64*>(b.keys.ptr<int64_t>()),
               static_cast<int>(b.vocab_start),
               b.vocab};
  const int c = cluster_size(rows);
  cudaLaunchAttribute attrs[2];
  const cudaLaunchConfig_t config = cluster_config(c, static_cast<int>(rows), stream, attrs);
  CUDA_CHECK(cudaLaunchKernelEx(&config, sample_kernel, a));
}

}  // namespace nanovllm::kernels::cuda
