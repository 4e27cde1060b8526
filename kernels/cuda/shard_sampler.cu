// Rank 0's merge of the shards' candidate keys (kernels/shard_sampler.h): one thread a row runs
// shard_sampler_math.h's merge_shard_row, the CPU reference's own code. A row reads at most
// tp x kShardCandidates keys and draws over at most kShardCandidates, so one thread is enough.
// (The shards' candidates come from the sampler's own kernel: kernels/cuda/sampler.cu.)
#include "kernels/cuda/common.cuh"
#include "kernels/shard_sampler.h"

namespace nanovllm::kernels::cuda {
namespace {

constexpr int kThreads = 64;

struct MergeArgs {
  const uint64_t* keys;  // [tp, B, kShardCandidates]
  int64_t rank_stride;   // B * kShardCandidates
  int tp;
  int rows;
  int64_t vocab;
  const int32_t* slots;      // [B]
  const int32_t* positions;  // [B]
  const float* temperatures;
  const int32_t* top_k;
  const float* top_p;
  const float* min_p;
  const int64_t* seeds;
  int num_slots;
  int32_t* out_tokens;   // [B]
  int32_t* last_tokens;  // [N] or null
};

__global__ void __launch_bounds__(kThreads) merge_kernel(MergeArgs a) {
  const int row = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  if (row >= a.rows) return;
  const int32_t slot = a.slots[row];
  if (slot < 0) {
    a.out_tokens[row] = 0;
    return;
  }
  if (slot >= a.num_slots) __trap();  // rank 0's slot allocator is broken: fail the step
  const ShardRule rule = shard_rule(a.temperatures[slot], a.top_k[slot], a.vocab);
  const int32_t token =
      merge_shard_row(a.keys + static_cast<int64_t>(row) * kShardCandidates, a.tp, a.rank_stride,
                      rule, a.top_k[slot], a.top_p[slot], a.min_p[slot],
                      static_cast<uint64_t>(a.seeds[slot]), a.positions[row] + 1);
  a.out_tokens[row] = token;
  if (a.last_tokens) a.last_tokens[slot] = token;
}

}  // namespace

void merge_shard_candidates(const ShardMergeBatch& b, cudaStream_t stream) {
  check_cuda_tensor(b.keys, DType::kI64, "shard merge keys");
  check_cuda_tensor(b.slots, DType::kI32, "shard merge slots");
  check_cuda_tensor(b.positions, DType::kI32, "shard merge positions");
  check_cuda_tensor(b.out_tokens, DType::kI32, "shard merge out_tokens");
  const SamplingSlotParams& p = b.params;
  check_draw_params(p, Device::kCuda);
  if (b.last_tokens.data) check_cuda_tensor(b.last_tokens, DType::kI32, "shard merge last_tokens");
  CHECK(b.keys.ndim == 3 && b.keys.is_contiguous());
  CHECK_EQ(b.keys.size(2), kShardCandidates);
  const int64_t tp = b.keys.size(0), rows = b.keys.size(1);
  CHECK(tp >= 1 && tp <= kMaxShardRanks);
  CHECK_EQ(b.slots.size(0), rows);
  CHECK_EQ(b.positions.size(0), rows);
  CHECK_EQ(b.out_tokens.size(0), rows);
  if (rows == 0) return;
  const MergeArgs a{reinterpret_cast<const uint64_t*>(b.keys.ptr<int64_t>()),
                    b.keys.stride[0],
                    static_cast<int>(tp),
                    static_cast<int>(rows),
                    b.vocab,
                    b.slots.ptr<int32_t>(),
                    b.positions.ptr<int32_t>(),
                    p.temperatures.ptr<float>(),
                    p.top_k.ptr<int32_t>(),
                    p.top_p.ptr<float>(),
                    p.min_p.ptr<float>(),
                    p.seeds.ptr<int64_t>(),
                    static_cast<int>(p.temperatures.size(0)),
                    b.out_tokens.ptr<int32_t>(),
                    b.last_tokens.data ? b.last_tokens.ptr<int32_t>() : nullptr};
  merge_kernel<<<static_cast<unsigned>((rows + kThreads - 1) / kThreads), kThreads, 0, stream>>>(a);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace nanovllm::kernels::cuda
