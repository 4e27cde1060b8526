// Start-up sizing of a run: ring slots hold the largest step the engine limits allow (checked
// against commands prepared from real sequences at those limits), the CPU KV-cache block
// count, and the seeds derived for requests that name none.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
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

// The warm-up measures the activation peak the KV cache is sized around: the largest step is
// the token budget (chunks whose contexts reach max_model_len), not max_model_len tokens.
// Every sequence's context (cu_seqlens_k) is max_model_len; the first q_lens are full.
void expect_warmup_layout(const StepCommand& cmd, const std::vector<int>& q_lens, int model_len) {
  ASSERT_EQ(cmd.kind, StepKind::kPrefill);
  ASSERT_EQ(cmd.num_seqs(), static_cast<int>(q_lens.size()));
  int tokens = 0, max_q = 0;
  for (size_t i = 0; i < q_lens.size(); ++i) {
    EXPECT_EQ(cmd.cu_seqlens_q[i + 1] - cmd.cu_seqlens_q[i], q_lens[i]) << "sequence " << i;
    EXPECT_EQ(cmd.cu_seqlens_k[i + 1] - cmd.cu_seqlens_k[i], model_len) << "sequence " << i;
    // A chunk's positions continue its cached prefix up to max_model_len - 1.
    EXPECT_EQ(cmd.positions[static_cast<size_t>(tokens)], model_len - q_lens[i]);
    EXPECT_EQ(cmd.positions[static_cast<size_t>(tokens + q_lens[i] - 1)], model_len - 1);
    tokens += q_lens[i];
    max_q = std::max(max_q, q_lens[i]);
  }
  EXPECT_EQ(cmd.num_tokens(), tokens);
  EXPECT_EQ(cmd.max_seqlen_q, max_q);
  EXPECT_EQ(cmd.max_seqlen_k, model_len);
  for (const int32_t slot : cmd.slot_mapping) EXPECT_EQ(slot, -1);  // nothing stored
}

TEST(WarmupSizing, ChunkingAt32kWarmsUpTheBudgetNotMaxModelLen) {
  // max_model_len 32768, budget 16384, chunked prefill on (EngineConfig accepts it).
  EngineConfig c = limits(16384, 512, 32768, 256);
  c.enable_chunked_prefill = true;
  EXPECT_NO_THROW(c.validate());
  const WarmupShape shape = warmup_shape(c.max_num_batched_tokens, c.max_num_seqs, c.max_model_len);
  EXPECT_EQ(shape.tokens, 16384);  // not 32768: activations for the budget only
  EXPECT_EQ(shape.rows, 512);
  // One chunk: the last 16384 tokens of a 32768-token sequence (cached prefix 16384).
  const int width = 32768 / 256;
  const StepCommand cmd = warmup_step_command(shape, width, c.max_num_seqs);
  expect_warmup_layout(cmd, {16384}, 32768);
  EXPECT_EQ(cmd.block_tables.size(), static_cast<size_t>(width));
  EXPECT_EQ(cmd.logits_indices.size(), 512u);
  EXPECT_EQ(cmd.new_slot_params.size(), 512u);
}

TEST(WarmupSizing, WithoutChunkingTheBudgetMustHoldMaxModelLen) {
  EngineConfig c = limits(16384, 512, 32768, 256);
  c.enable_chunked_prefill = false;
  EXPECT_THROW(c.validate(), std::invalid_argument);  // refused: a prompt fits no step
  c.max_num_batched_tokens = 32768;
  EXPECT_NO_THROW(c.validate());
  const WarmupShape shape = warmup_shape(c.max_num_batched_tokens, c.max_num_seqs, c.max_model_len);
  EXPECT_EQ(shape.tokens, 32768);
  expect_warmup_layout(warmup_step_command(shape, 128, c.max_num_seqs), {32768}, 32768);
}

TEST(WarmupSizing, BudgetAboveMaxModelLenIsFullSequencesThenAChunk) {
  const WarmupShape shape = warmup_shape(40000, 2, 16384);
  EXPECT_EQ(shape.tokens, 40000);
  EXPECT_EQ(shape.rows, 3);  // one logits row per sequence at least
  const StepCommand cmd = warmup_step_command(shape, 64, 2);
  expect_warmup_layout(cmd, {16384, 16384, 7232}, 16384);
  EXPECT_EQ(cmd.logits_indices, (std::vector<int32_t>{16383, 32767, 39999}));
  EXPECT_EQ(cmd.sample_slots, (std::vector<int32_t>{0, 1, 0}));  // slots reused past 2
}

TEST(WarmupSizing, ADecodeBatchLargerThanTheBudgetSetsTheTokens) {
  const WarmupShape shape = warmup_shape(64, 128, 4096);
  EXPECT_EQ(shape.tokens, 128);
  EXPECT_EQ(shape.rows, 128);
  expect_warmup_layout(warmup_step_command(shape, 16, 128), {128}, 4096);
}

TEST(RequestSeed, DerivedSeedDependsOnBaseSeedAndIdOnly) {
  EXPECT_EQ(derive_request_seed(0, "a"), derive_request_seed(0, "a"));
  EXPECT_NE(derive_request_seed(0, "a"), derive_request_seed(0, "b"));
  EXPECT_NE(derive_request_seed(0, "a"), derive_request_seed(1, "a"));
}

}  // namespace
}  // namespace nanovllm
