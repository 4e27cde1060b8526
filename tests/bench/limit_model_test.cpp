// The limit model against bytes and FLOPs worked out by hand for a 1-layer toy decoder:
// hidden 64, intermediate 128, 4 q heads and 2 kv heads of 16, vocab 1000, untied.
#include "bench/limit_model.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/check.h"
#include "layers/model_config.h"

namespace nanovllm::bench {
namespace {

ModelShape toy() {
  ModelShape m;
  m.hidden_size = 64;
  m.intermediate_size = 128;
  m.num_hidden_layers = 1;
  m.num_attention_heads = 4;
  m.num_key_value_heads = 2;
  m.head_dim = 16;
  m.vocab_size = 1000;
  return m;
}

// 1 GB/s and 1 TFLOP/s: every toy decode op is bound by bytes (bytes/FLOPs >> 1e-3).
LimitSetup setup(int tp, double bytes_per_s = 1e9, double flop_per_s = 1e12) {
  LimitSetup s;
  s.model = toy();
  s.tp = tp;
  s.machine.copy_bytes_per_s = bytes_per_s;
  s.machine.bf16_flop_per_s = flop_per_s;
  return s;
}

const OpCost& op(const std::vector<OpCost>& ops, const std::string& name) {
  for (const OpCost& o : ops)
    if (o.name == name) return o;
  ADD_FAILURE() << "no op " << name;
  return ops.front();
}

TEST(LimitModel, DecodeStepByHand) {
  // One sequence, one new token, 10 tokens cached after the step, one logits row.
  const std::vector<OpCost> ops = step_breakdown(setup(1), decode_step(1, 10));
  const std::vector<std::string> order = {"qkv_proj",     "attention", "o_proj",
                                          "gate_up_proj", "down_proj", "lm_head"};
  ASSERT_EQ(ops.size(), order.size());
  for (size_t i = 0; i < ops.size(); ++i) EXPECT_EQ(ops[i].name, order[i]);
  // qkv: N = (4 + 2·2)·16 = 128, K = 64: 2·(128·64 + 64 + 128) bytes, 2·128·64 FLOPs.
  EXPECT_DOUBLE_EQ(op(ops, "qkv_proj").bytes, 16768);
  EXPECT_DOUBLE_EQ(op(ops, "qkv_proj").flops, 16384);
  // attention: K+V row = 2·2·16·2 = 128 B; 10 read + 1 written; q in + out 2·4·16·2 = 256 B.
  // FLOPs: 4·16·4·(1·9 + 1) = 2560.
  EXPECT_DOUBLE_EQ(op(ops, "attention").bytes, 1280 + 128 + 256);
  EXPECT_DOUBLE_EQ(op(ops, "attention").flops, 2560);
  // o_proj N = 64, K = 64; gate_up N = 256, K = 64; down N = 64, K = 128.
  EXPECT_DOUBLE_EQ(op(ops, "o_proj").bytes, 2 * (4096 + 64 + 64));
  EXPECT_DOUBLE_EQ(op(ops, "gate_up_proj").bytes, 2 * (16384 + 64 + 256));
  EXPECT_DOUBLE_EQ(op(ops, "gate_up_proj").flops, 2 * 256 * 64);
  EXPECT_DOUBLE_EQ(op(ops, "down_proj").bytes, 2 * (8192 + 128 + 64));
  // lm_head: bf16 weight 1000·64, bf16 hidden 64 in, f32 logits 1000 out.
  EXPECT_DOUBLE_EQ(op(ops, "lm_head").bytes, 128000 + 128 + 4000);
  EXPECT_DOUBLE_EQ(op(ops, "lm_head").flops, 2 * 1000 * 64);
  for (const OpCost& o : ops) EXPECT_DOUBLE_EQ(o.seconds, o.bytes / 1e9) << o.name;
  // 16768 + 1664 + 8448 + 33408 + 16768 + 132128 bytes at 1 GB/s.
  EXPECT_DOUBLE_EQ(step_limit_s(setup(1), decode_step(1, 10)), 209184e-9);
}

// --kv-cache-dtype fp8: a cached value is one byte plus its row's share of the exponent byte,
// (D + 1) / D; only attention's cache traffic changes (q and the output stay bf16).
TEST(LimitModel, Fp8CacheCountsOneBytePerValuePlusTheRowsExponent) {
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_value(false, 128), 2.0);
  EXPECT_DOUBLE_EQ(kv_cache_bytes_per_value(true, 128), 129.0 / 128.0);
  LimitSetup fp8 = setup(1);
  fp8.kv_bytes_per_value = kv_cache_bytes_per_value(true, 16);
  const std::vector<OpCost> ops = step_breakdown(fp8, decode_step(1, 10));
  const std::vector<OpCost> bf16 = step_breakdown(setup(1), decode_step(1, 10));
  // K+V row = 2·2·16·(17/16) = 68 B; 10 read + 1 written; q in + out 256 B as before.
  EXPECT_DOUBLE_EQ(op(ops, "attention").bytes, 68 * 11 + 256);
  EXPECT_DOUBLE_EQ(op(ops, "qkv_proj").bytes, op(bf16, "qkv_proj").bytes);
}

TEST(LimitModel, LayersMultiplyLayerOpsOnly) {
  LimitSetup three = setup(1);
  three.model.num_hidden_layers = 3;
  const std::vector<OpCost> one = step_breakdown(setup(1), decode_step(2, 50));
  const std::vector<OpCost> ops = step_breakdown(three, decode_step(2, 50));
  for (size_t i = 0; i < ops.size(); ++i) {
    const double times = ops[i].name == "lm_head" ? 1 : 3;
    EXPECT_DOUBLE_EQ(ops[i].bytes, times * one[i].bytes) << ops[i].name;
    EXPECT_DOUBLE_EQ(ops[i].seconds, times * one[i].seconds) << ops[i].name;
  }
}

TEST(LimitModel, TensorParallelHalvesWeightBytes) {
  // Matrices: per layer 128·64 + 64·64 + 3·128·64 = 36864, embedding + lm_head 2·1000·64.
  EXPECT_DOUBLE_EQ(weight_bytes_per_rank(toy(), 1), 2 * (36864 + 128000));
  EXPECT_DOUBLE_EQ(weight_bytes_per_rank(toy(), 2), 2 * (36864 + 128000) / 2);
  ModelShape tied = toy();
  tied.tie_word_embeddings = true;
  EXPECT_DOUBLE_EQ(weight_bytes_per_rank(tied, 1), 2 * (36864 + 64000));

  // tp = 2: 2 q heads, 1 kv head, intermediate 64, vocab 500 per rank.
  const std::vector<OpCost> ops = step_breakdown(setup(2), decode_step(1, 10));
  EXPECT_DOUBLE_EQ(op(ops, "qkv_proj").bytes, 2 * (4096 + 64 + 64));  // N = 64
  EXPECT_DOUBLE_EQ(op(ops, "gate_up_proj").bytes, 2 * (8192 + 64 + 128));
  EXPECT_DOUBLE_EQ(op(ops, "down_proj").bytes, 2 * (4096 + 64 + 64));
  EXPECT_DOUBLE_EQ(op(ops, "o_proj").bytes, 2 * (2048 + 32 + 64));  // K = 2·16
  EXPECT_DOUBLE_EQ(op(ops, "lm_head").bytes, 64000 + 128 + 2000);
  // Half the kv heads: half the cache read and written; half the q heads.
  EXPECT_DOUBLE_EQ(op(ops, "attention").bytes, 1664 / 2.0);
  EXPECT_DOUBLE_EQ(op(ops, "attention").flops, 2560 / 2.0);
}

TEST(LimitModel, KvHeadsReplicatedWhenMoreRanksThanKvHeads) {
  // tp = 4 over 2 kv heads: each rank keeps one (replicated), not half of one.
  const std::vector<OpCost> ops = step_breakdown(setup(4), decode_step(1, 10));
  EXPECT_DOUBLE_EQ(op(ops, "qkv_proj").bytes, 2 * (48 * 64 + 64 + 48));  // N = (1 + 2)·16
  // K+V row 2·1·16·2 = 64 B: 10 read, 1 written; q in + out 2·1·16·2 = 64 B.
  EXPECT_DOUBLE_EQ(op(ops, "attention").bytes, 640 + 64 + 64);
}

TEST(LimitModel, AttentionBytesGrowWithContext) {
  const std::vector<OpCost> short_ctx = step_breakdown(setup(1), decode_step(4, 10));
  const std::vector<OpCost> long_ctx = step_breakdown(setup(1), decode_step(4, 1010));
  // 4 sequences · 1000 more cached tokens · 128 B of K+V each.
  EXPECT_DOUBLE_EQ(op(long_ctx, "attention").bytes - op(short_ctx, "attention").bytes,
                   4 * 1000 * 128);
  for (const char* gemm : {"qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head"})
    EXPECT_DOUBLE_EQ(op(long_ctx, gemm).bytes, op(short_ctx, gemm).bytes) << gemm;
  EXPECT_GT(step_limit_s(setup(1), decode_step(4, 1010)),
            step_limit_s(setup(1), decode_step(4, 10)));
}

TEST(LimitModel, CausalWithinTheNewTokens) {
  // A prefill chunk of 4 tokens after 6 cached: the new tokens see 7, 8, 9, 10 keys = 34.
  Step chunk;
  chunk.seqs = {{4, 10}};
  chunk.num_logits = 1;
  EXPECT_EQ(chunk.num_tokens(), 4);
  EXPECT_DOUBLE_EQ(op(step_breakdown(setup(1), chunk), "attention").flops, 4.0 * 16 * 4 * 34);
  // A whole 3-token prompt: 1 + 2 + 3 = 6 keys.
  const std::vector<int64_t> prompt = {3};
  EXPECT_DOUBLE_EQ(op(step_breakdown(setup(1), prefill_step(prompt)), "attention").flops,
                   4.0 * 16 * 4 * 6);
}

TEST(LimitModel, LargePrefillUsesTheFlopTerm) {
  // 2 TB/s, 1 TFLOP/s; one 1024-token prompt.
  const LimitSetup s = setup(1, 2e12, 1e12);
  const std::vector<int64_t> prompt = {1024};
  const std::vector<OpCost> ops = step_breakdown(s, prefill_step(prompt));
  // gate_up: 2·1024·256·64 FLOPs against 2·(16384 + 1024·64 + 1024·256) bytes.
  const OpCost& gate_up = op(ops, "gate_up_proj");
  EXPECT_DOUBLE_EQ(gate_up.flops, 33554432);
  EXPECT_DOUBLE_EQ(gate_up.bytes, 688128);
  EXPECT_DOUBLE_EQ(gate_up.seconds, 33554432 / 1e12);
  // attention: 4·16·4·(1024·1025/2) FLOPs.
  const OpCost& attention = op(ops, "attention");
  EXPECT_DOUBLE_EQ(attention.flops, 134348800);
  EXPECT_DOUBLE_EQ(attention.seconds, 134348800 / 1e12);
  EXPECT_GT(attention.seconds, attention.bytes / 2e12);
}

TEST(LimitModel, RunSumsItsSteps) {
  const LimitSetup s = setup(1);
  const std::vector<int64_t> prompts = {100, 200};
  const std::vector<Step> steps = {prefill_step(prompts), decode_step(2, 201), decode_step(2, 202)};
  double expected = 0;
  for (const Step& step : steps) expected += step_limit_s(s, step);
  EXPECT_DOUBLE_EQ(run_limit_s(s, steps), expected);

  const std::vector<OpCost> total = run_breakdown(s, steps);
  ASSERT_EQ(total.size(), 6u);
  double seconds = 0;
  for (const OpCost& o : total) seconds += o.seconds;
  EXPECT_DOUBLE_EQ(seconds, expected);
  double attention_bytes = 0;
  for (const Step& step : steps) attention_bytes += op(step_breakdown(s, step), "attention").bytes;
  EXPECT_DOUBLE_EQ(op(total, "attention").bytes, attention_bytes);
  EXPECT_TRUE(run_breakdown(s, {}).empty());
  EXPECT_DOUBLE_EQ(run_limit_s(s, {}), 0);
}

TEST(LimitModel, ShapeFromModelConfig) {
  ModelConfig c;
  c.hidden_size = 1024;
  c.intermediate_size = 3072;
  c.num_hidden_layers = 28;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  c.vocab_size = 151936;
  c.tie_word_embeddings = true;
  const ModelShape m = model_shape(c);
  EXPECT_EQ(m.hidden_size, 1024);
  EXPECT_EQ(m.intermediate_size, 3072);
  EXPECT_EQ(m.num_hidden_layers, 28);
  EXPECT_EQ(m.num_attention_heads, 16);
  EXPECT_EQ(m.num_key_value_heads, 8);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.vocab_size, 151936);
  EXPECT_TRUE(m.tie_word_embeddings);
}

TEST(LimitModel, PrefillFlopsByHand) {
  ModelShape m;
  m.hidden_size = 4;
  m.num_attention_heads = 2;
  m.num_key_value_heads = 1;
  m.head_dim = 2;
  m.intermediate_size = 8;
  m.num_hidden_layers = 3;
  m.vocab_size = 10;
  // layer matmul weights 3 · (4·(2 + 2)·2 + 2·2·4 + 3·8·4) = 432; lm_head 10·4 = 40.
  // L = 1: 2·432 + 2·40 + 4·3·2·2·1 = 992; L = 3: 6·432 + 80 + 48·6 = 2960.
  const std::vector<int64_t> one{1}, both{1, 3};
  EXPECT_DOUBLE_EQ(prefill_flops(m, one), 992);
  EXPECT_DOUBLE_EQ(prefill_flops(m, both), 992 + 2960);
}

TEST(LimitModel, RejectsImpossibleInputs) {
  EXPECT_THROW(step_breakdown(setup(3), decode_step(1, 10)), CheckError);  // 4 heads over 3
  Step bad;
  bad.seqs = {{5, 4}};  // more new tokens than the context holds
  EXPECT_THROW(step_breakdown(setup(1), bad), CheckError);
  EXPECT_THROW(step_breakdown(setup(1, 0, 1e12), decode_step(1, 10)), CheckError);
}

}  // namespace
}  // namespace nanovllm::bench
