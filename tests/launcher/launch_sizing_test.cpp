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
#include "launcher/kv_cache_report.h"
#include "launcher/run_settings.h"
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

// Without --cpu-kv-cache-space the CPU cache holds `sequences` sequences of max_model_len
// (what the request file can run at once), at most 4 GiB a rank and at least one sequence; the
// start-up line says which of these decided it.
TEST(KvCacheSizing, CpuDefaultIsSizedForTheRequestsWithinFourGibAndAtLeastOneSequence) {
  ModelConfig m;
  m.num_hidden_layers = 4;
  m.num_key_value_heads = 2;
  m.head_dim = 64;
  KvCacheSizing s;  // no --cpu-kv-cache-space
  s.block_size = 256;
  s.max_model_len = 4096;
  s.sequences = 3;
  const size_t block = ModelRunner::kv_block_bytes(m, 1, 256);
  EXPECT_EQ(block, 524288u);  // 2 x 4 layers x 256 tokens x 2 heads x 64 dims x 2 bytes
  EXPECT_EQ(plan_kv_cache_blocks(s, m, Device::kCpu), 48);  // 3 x 4096 / 256
  EXPECT_EQ(kv_cache_line(s, m, Device::kCpu, 48),
            "KV cache: 48 blocks of 256 tokens (24.0 MiB per rank, sized for 3 sequences of up "
            "to max_model_len 4096 tokens; --cpu-kv-cache-space sets it)");
  s.max_model_len = 4097;  // a partial block counts whole
  EXPECT_EQ(plan_kv_cache_blocks(s, m, Device::kCpu), 51);
  s.max_model_len = 4096;
  // 1000 sequences would take 7.8 GiB: capped at 4 GiB (8192 blocks), room for 512 of them.
  s.sequences = 1000;
  EXPECT_EQ(plan_kv_cache_blocks(s, m, Device::kCpu), 8192);
  EXPECT_EQ(kv_cache_line(s, m, Device::kCpu, 8192),
            "KV cache: 8192 blocks of 256 tokens (4.00 GiB per rank, room for 512 of the 1000 "
            "sequences of up to max_model_len 4096 tokens: the default stops at 4 GiB; "
            "--cpu-kv-cache-space sets it)");
  // One sequence above 4 GiB (a long max_model_len on a wide model): one sequence anyway.
  m.num_hidden_layers = 400;
  s.max_model_len = 40960;
  EXPECT_EQ(plan_kv_cache_blocks(s, m, Device::kCpu), 160);  // not the 4 GiB cap's 81
  EXPECT_EQ(kv_cache_line(s, m, Device::kCpu, 160),
            "KV cache: 160 blocks of 256 tokens (7.81 GiB per rank, room for 1 of the 1000 "
            "sequences of up to max_model_len 40960 tokens, the least that runs; "
            "--cpu-kv-cache-space sets it)");
  m.num_hidden_layers = 4;
  // At tp 2 each rank holds half the KV heads: the same blocks, half the bytes.
  s.tp_size = 2;
  s.sequences = 3;
  s.max_model_len = 4096;
  EXPECT_EQ(plan_kv_cache_blocks(s, m, Device::kCpu), 48);
  EXPECT_NE(kv_cache_line(s, m, Device::kCpu, 48).find("(12.0 MiB per rank, sized for 3"),
            std::string::npos);
  // The flag: exactly what it says, whatever the requests.
  s.tp_size = 1;
  s.cpu_kv_cache_space_gib = 0.25;
  EXPECT_EQ(plan_kv_cache_blocks(s, m, Device::kCpu), 512);
  EXPECT_EQ(kv_cache_line(s, m, Device::kCpu, 512),
            "KV cache: 512 blocks of 256 tokens (256.0 MiB per rank, --cpu-kv-cache-space 0.25)");
  s.num_blocks_override = 20;
  EXPECT_EQ(kv_cache_line(s, m, Device::kCpu, 20),
            "KV cache: 20 blocks of 256 tokens (10.0 MiB per rank, --num-gpu-blocks-override 20)");
  // CUDA: measured after the warm-up, and the line says that (not "0 blocks").
  s.num_blocks_override.reset();
  EXPECT_EQ(plan_kv_cache_blocks(s, m, Device::kCuda), 0);
  EXPECT_EQ(kv_cache_line(s, m, Device::kCuda, 0),
            "KV cache: sized from GPU memory after the warm-up");
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
  const WarmupShape shape = warmup_shape(40000, 3, 16384);
  EXPECT_EQ(shape.tokens, 40000);
  EXPECT_EQ(shape.rows, 3);  // one logits row per sequence
  const StepCommand cmd = warmup_step_command(shape, 64, 3);
  expect_warmup_layout(cmd, {16384, 16384, 7232}, 16384);
  EXPECT_EQ(cmd.logits_indices, (std::vector<int32_t>{16383, 32767, 39999}));
  EXPECT_EQ(cmd.sample_slots, (std::vector<int32_t>{0, 1, 2}));
}

TEST(WarmupSizing, FewerSequencesThanTheBudgetNeedsCapTheTokens) {
  // Two sequences of 16384 hold 32768 of the 40000-token budget: no step carries more.
  const WarmupShape shape = warmup_shape(40000, 2, 16384);
  EXPECT_EQ(shape.tokens, 32768);
  EXPECT_EQ(shape.rows, 2);
  const StepCommand cmd = warmup_step_command(shape, 64, 2);
  expect_warmup_layout(cmd, {16384, 16384}, 16384);
  EXPECT_EQ(cmd.sample_slots, (std::vector<int32_t>{0, 1}));
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
