// Sampling from vocabulary shards on the GPU (kernels/shard_sampler.h): each shard's keys equal
// the CPU reference's (Gumbel scores to logf's ulp), and the merged tokens equal the CUDA
// full-row sampler's on the same logits, which equal the CPU reference's. The large-vocabulary case
// drives the sampler kernel's emitting paths: window compaction, the exact cut inside one bin, the
// radix levels of a flat row.
#include <gtest/gtest.h>

#include "tests/kernels/cuda_test_util.h"
#include "tests/kernels/shard_sampler_case.h"

namespace nanovllm::test {
namespace {

constexpr int K = kernels::kShardCandidates;

struct DeviceCase {
  explicit DeviceCase(ShardCase& c)
      : slots(c.row_slot),
        positions(c.positions),
        temperatures(c.temperatures),
        top_p(c.top_p),
        min_p(c.min_p),
        top_k(c.top_k),
        seeds(c.seeds) {}
  kernels::SamplingSlotParams params(int64_t n) const {
    kernels::SamplingSlotParams p;
    p.temperatures = temperatures.view(DType::kF32, {n});
    p.top_k = top_k.view(DType::kI32, {n});
    p.top_p = top_p.view(DType::kF32, {n});
    p.min_p = min_p.view(DType::kF32, {n});
    p.seeds = seeds.view(DType::kI64, {n});
    return p;
  }
  DevVec<int32_t> slots, positions;
  DevVec<float> temperatures, top_p, min_p;
  DevVec<int32_t> top_k;
  DevVec<int64_t> seeds;
};

// Every rank's keys from the GPU, each beside the CPU reference's: equal, except that an
// unfiltered row's key holds l + g, whose Gumbel term comes from logf, within 1 ulp between glibc
// and CUDA (kernels/philox.h): there the same id and a score 1 ulp apart pass.
void expect_keys_match(ShardCase& c, const DeviceCase& d, int tp, DevVec<int64_t>& all_keys) {
  std::vector<int64_t> want(static_cast<size_t>(tp * c.rows * K));  // [tp, rows, K]
  for (int r = 0; r < tp; ++r) {
    std::vector<float> shard = c.shard(tp, r);
    const DevVec<float> dev_shard(shard);
    kernels::ShardCandidatesBatch b;
    b.vocab_start = r * c.shard_width(tp);
    b.columns = c.shard_columns(tp, r);
    b.vocab = c.vocab;
    b.params = d.params(c.num_slots());
    b.shard_logits = dev_shard.view(DType::kF32, {c.rows, c.shard_width(tp)});
    b.slots = d.slots.view(DType::kI32, {c.rows});
    b.positions = d.positions.view(DType::kI32, {c.rows});
    b.keys = TensorView(static_cast<int64_t*>(all_keys.mem.get()) + r * c.rows * K, DType::kI64,
                        {c.rows, K}, Device::kCuda);
    kernels::cuda::shard_candidates(b, nullptr);
    CUDA_CHECK(cudaGetLastError());
    b.shard_logits = view(shard, {c.rows, c.shard_width(tp)});
    b.slots = view(c.row_slot, {c.rows});
    b.positions = view(c.positions, {c.rows});
    b.params = c.params();
    b.keys = TensorView(want.data() + r * c.rows * K, DType::kI64, {c.rows, K});
    kernels::cpu::shard_candidates(b);
  }
  const std::vector<int64_t> got = all_keys.host();
  int ulp_apart = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] == want[i]) continue;
    const int64_t row = static_cast<int64_t>(i / K) % c.rows;
    const int32_t slot = c.row_slot[row];
    const auto g = static_cast<uint64_t>(got[i]), w = static_cast<uint64_t>(want[i]);
    const uint64_t score_gap = g > w ? (g >> 32) - (w >> 32) : (w >> 32) - (g >> 32);
    const bool unfiltered =
        slot >= 0 && kernels::shard_rule(c.temperatures[slot], c.top_k[slot], c.vocab) ==
                         kernels::ShardRule::kUnfiltered;
    EXPECT_TRUE(unfiltered && i % K == 0 && kernels::key_id(g) == kernels::key_id(w) &&
                score_gap == 1)
        << "tp " << tp << ", rank " << i / K / c.rows << ", row " << row << ", key " << i % K
        << ": " << g << " vs the CPU's " << w;
    ++ulp_apart;
  }
  EXPECT_LE(ulp_apart, c.rows / 8) << "tp " << tp << ": logf differs that often?";
}

std::vector<int32_t> merge_on_gpu(ShardCase& c, const DeviceCase& d, int tp,
                                  const DevVec<int64_t>& all_keys) {
  DevVec<int32_t> out(static_cast<size_t>(c.rows));
  kernels::ShardMergeBatch m;
  m.keys = all_keys.view(DType::kI64, {tp, c.rows, K});
  m.slots = d.slots.view(DType::kI32, {c.rows});
  m.positions = d.positions.view(DType::kI32, {c.rows});
  m.vocab = c.vocab;
  m.params = d.params(c.num_slots());
  m.out_tokens = out.view(DType::kI32, {c.rows});
  kernels::cuda::merge_shard_candidates(m, nullptr);
  return out.host();
}

// The CUDA full-row sampler on the same logits.
std::vector<int32_t> full_row_on_gpu(ShardCase& c, const DeviceCase& d) {
  const DevVec<float> logits(c.logits);
  DevVec<int32_t> out(static_cast<size_t>(c.rows));
  kernels::SamplingBatch b;
  b.logits = logits.view(DType::kF32, {c.rows, c.vocab});
  b.slots = d.slots.view(DType::kI32, {c.rows});
  b.positions = d.positions.view(DType::kI32, {c.rows});
  b.params = d.params(c.num_slots());
  b.out_tokens = out.view(DType::kI32, {c.rows});
  kernels::cuda::sample(b, nullptr);
  return out.host();
}

void expect_shards_reproduce_full_rows(ShardCase& c, std::initializer_list<int> tps) {
  const DeviceCase d(c);
  const std::vector<int32_t> want = c.reference_tokens();
  const std::vector<int32_t> full_gpu = full_row_on_gpu(c, d);
  EXPECT_EQ(full_gpu, want) << "the CUDA full-row sampler against the CPU's";
  for (const int tp : tps) {
    DevVec<int64_t> keys(static_cast<size_t>(tp * c.rows * K));
    expect_keys_match(c, d, tp, keys);
    // The merge on the device and the full-row sampler on the device: one logf, no gap.
    EXPECT_EQ(merge_on_gpu(c, d, tp, keys), full_gpu) << "tp " << tp;
  }
}

TEST(ShardSamplerCuda, KeysMatchTheCpuAndMergedTokensTheFullRowSampler) {
  SKIP_WITHOUT_CUDA();
  ShardCase c = make_shard_case(1000, 77, 1000);
  expect_shards_reproduce_full_rows(c, {1, 2, 3, 4, 8});
}

TEST(ShardSamplerCuda, QwenSizedShardsTakeTheCutInBinAndRadixPaths) {
  SKIP_WITHOUT_CUDA();
  ShardCase c = make_shard_case(151936, 24, 7);
  for (int64_t b = 0; b < c.rows; ++b) {
    float* x = c.logits.data() + b * c.vocab;
    if (b % 4 == 1) {  // 10 tokens above a bin of 2040 ties: the exact cut inside that bin
      for (int64_t v = 0; v < c.vocab; ++v) x[v] = -10.0f;
      for (int64_t v = 0; v < 2040; ++v) x[(v * 37) % c.vocab] = 4.0f;
      for (int64_t v = 0; v < 10; ++v) x[(v * 7919 + 5) % c.vocab] = 5.0f;
    } else if (b % 4 == 2) {  // flat: the radix levels down to the ids
      std::fill(x, x + c.vocab, 0.25f);
    }
  }
  expect_shards_reproduce_full_rows(c, {2, 4});
}

}  // namespace
}  // namespace nanovllm::test
