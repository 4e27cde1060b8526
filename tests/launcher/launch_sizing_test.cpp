// Start-up sizing of a run: ring slots hold the largest step the engine limits allow (checked
// against commands prepared from real sequences at those limits), the CPU KV-cache block
// count, and the seeds derived for requests that name none.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/job/run_job.h"
#include "engine/step_builder.h"
#include "ipc/step_command_serialization.h"
#include "ipc/step_ring_sizing.h"
#include "rank/kv_cache_sizing.h"
#include "rank/model_runner.h"

namespace nanovllm {
namespace {

EngineConfig limits(int tokens, int seqs, int model_len, int block) {
  EngineConfig c;
  c.max_num_batched_tokens = tokens;
  c.max_num_seqs = seqs;
  c.max_model_len = model_len;
  c.kvcache_block_size = block;
  return c;
}

// `n` sequences of `len` tokens each, every one with the widest block table the limits allow.
std::vector<std::unique_ptr<Sequence>> full_batch(int n, int len, const EngineConfig& c) {
  std::vector<std::unique_ptr<Sequence>> seqs;
  const int width = (c.max_model_len + c.kvcache_block_size - 1) / c.kvcache_block_size;
  for (int i = 0; i < n; ++i) {
    SamplingParams p;
    p.seed = static_cast<uint64_t>(i);
    auto s = std::make_unique<Sequence>(i, std::vector<int32_t>(len, 7), p, c.kvcache_block_size);
    for (int b = 0; b < width; ++b) s->block_table.push_back(b);
    seqs.push_back(std::move(s));
  }
  return seqs;
}

std::vector<Sequence*> raw(const std::vector<std::unique_ptr<Sequence>>& seqs) {
  std::vector<Sequence*> out;
  for (const auto& s : seqs) out.push_back(s.get());
  return out;
}

// Decode sequences hold the sampling slots their prefill took.
std::vector<Sequence*> running(const std::vector<std::unique_ptr<Sequence>>& seqs) {
  for (size_t i = 0; i < seqs.size(); ++i) seqs[i]->sampling_slot = static_cast<int>(i);
  return raw(seqs);
}

TEST(StepRingSizing, LargestPrefillAndDecodeAtTheLimitsFitTheSlot) {
  const EngineConfig c = limits(512, 8, 512, 16);
  const size_t slot = max_step_command_bytes(step_limits(c));
  // Prefill: the whole token budget in max_num_seqs sequences, every one new to its sampling
  // slot (all parameters travel).
  const auto prefill = full_batch(8, 512 / 8, c);
  SamplingSlots slots(c.max_num_seqs);
  const StepCommand prefill_cmd = build_prefill_command(raw(prefill), 16, slots, {});
  ASSERT_EQ(prefill_cmd.new_slot_params.size(), 8u);
  const size_t prefill_bytes = encode_step_command(prefill_cmd).size();
  EXPECT_LE(prefill_bytes, slot);
  // Decode: max_num_seqs sequences near max_model_len.
  const auto decode = full_batch(8, 500, c);
  EXPECT_LE(encode_step_command(build_decode_command(running(decode), 16)).size(), slot);
  // Tight: the bound is not wildly above a real worst case (the prefill shares most fields).
  EXPECT_LT(slot, prefill_bytes * 2);
}

TEST(StepRingSizing, DecodeBatchLargerThanTokenBudgetStillFits) {
  const EngineConfig c = limits(64, 128, 64, 16);  // max_num_seqs > max_num_batched_tokens
  const auto decode = full_batch(128, 60, c);
  EXPECT_LE(encode_step_command(build_decode_command(running(decode), 16)).size(),
            max_step_command_bytes(step_limits(c)));
}

TEST(StepRingSizing, RingConfigCarriesReadersAndMeasuredSlotBytes) {
  const EngineConfig c = limits(256, 4, 256, 16);
  const RingConfig ring = step_ring_config(step_limits(c), 3);
  EXPECT_EQ(ring.num_readers, 3u);
  EXPECT_EQ(ring.slot_bytes, max_step_command_bytes(step_limits(c)));
  EXPECT_GE(ring.slot_count, 1u);
  EXPECT_EQ(ring.payload_schema, kStepCommandSchemaVersion);  // what the ranks attach with
}

TEST(KvCacheSizing, CpuBlocksAreSpaceOverBlockBytesRoundedDown) {
  EXPECT_EQ(cpu_kv_cache_blocks(1.0, 1 << 20), 1024);
  EXPECT_EQ(cpu_kv_cache_blocks(1.0, 3 << 20), 341);  // 1024 / 3 = 341.3
  EXPECT_EQ(cpu_kv_cache_blocks(0.0001, 1 << 20), 0);
}

TEST(KvCacheSizing, OverrideWinsAndCpuPlanMatchesKvBlockBytes) {
  ModelConfig m;
  m.num_hidden_layers = 4;
  m.num_key_value_heads = 2;
  m.head_dim = 64;
  KvCacheSizing s;
  s.block_size = 16;
  s.tp_size = 2;
  s.cpu_kv_cache_space_gib = 0.5;
  // Per rank: 2 (K, V) * 4 layers * 16 tokens * 1 head * 64 dims * 2 bytes = 16 KiB.
  EXPECT_EQ(ModelRunner::kv_block_bytes(m, 2, 16), 16384u);
  EXPECT_EQ(plan_kv_cache_blocks(s, m, Device::kCpu), (1 << 29) / 16384);
  s.num_blocks_override = 7;
  EXPECT_EQ(plan_kv_cache_blocks(s, m, Device::kCpu), 7);
  s.num_blocks_override.reset();
  s.cpu_kv_cache_space_gib = 1e-9;
  EXPECT_THROW(plan_kv_cache_blocks(s, m, Device::kCpu), std::runtime_error);
  // CUDA: measured by the runner after its warm-up unless overridden.
  EXPECT_EQ(plan_kv_cache_blocks(s, m, Device::kCuda), 0);
  s.num_blocks_override = 9;
  EXPECT_EQ(plan_kv_cache_blocks(s, m, Device::kCuda), 9);
}

TEST(RequestSeed, DerivedSeedDependsOnBaseSeedAndIdOnly) {
  EXPECT_EQ(derive_request_seed(0, "a"), derive_request_seed(0, "a"));
  EXPECT_NE(derive_request_seed(0, "a"), derive_request_seed(0, "b"));
  EXPECT_NE(derive_request_seed(0, "a"), derive_request_seed(1, "a"));
}

}  // namespace
}  // namespace nanovllm
