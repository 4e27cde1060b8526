// The run's settings from the flags and the model's config.json (make_run_settings): the step
// budget against max_model_len, max_num_seqs lowered to the file's sequences (shared out among
// replicas), the CPU KV cache's size (bf16 or fp8), and the refusals that need the model.
#include "launcher/run_settings.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "launcher/usage_error.h"
#include "layers/model_presets.h"
#include "layers/model_writer.h"
#include "tests/launcher/launch_cli_fixture.h"

namespace nanovllm {
namespace {

// The budget vs max_model_len rule needs the model's position limit (max_model_len is capped
// by it), so it is checked by make_run_settings on a config.json at 32k positions.
class LaunchBudget : public LaunchCli {
 protected:
  void SetUp() override {
    LaunchCli::SetUp();
    ModelConfig c = model_preset("tiny");
    c.max_position_embeddings = 40960;
    std::ofstream(dir_ / "model" / "config.json") << make_config_json(c, {}).dump();
  }
  // Settings for the flags on the CPU backend (no GPU needed); throws UsageError.
  RunSettings settings(std::vector<std::string> flags) {
    std::vector<std::string> args = {model_, prompts_, "--device", "cpu"};
    args.insert(args.end(), flags.begin(), flags.end());
    return make_run_settings(ok(args));
  }
  // Expects make_run_settings to refuse the flags with a message containing `needle`.
  void refused(std::vector<std::string> flags, const std::string& needle) {
    try {
      settings(std::move(flags));
      ADD_FAILURE() << "expected a usage error mentioning '" << needle << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
};

TEST_F(LaunchBudget, ChunkingLetsTheStepBudgetBeSmallerThanMaxModelLen) {
  const RunSettings s =
      settings({"--max-model-len", "32768", "--long-prefill-token-threshold", "4096"});
  const EngineConfig& e = s.job.engine;
  EXPECT_EQ(e.max_model_len, 32768);
  EXPECT_EQ(e.max_num_batched_tokens, 16384);  // the default budget, below max_model_len
  EXPECT_TRUE(e.enable_chunked_prefill);
  EXPECT_EQ(e.long_prefill_token_threshold, 4096);
  EXPECT_TRUE(settings({"--max-model-len", "32768", "--max-num-batched-tokens", "1024",
                        "--max-num-seqs", "256"})
                  .job.engine.enable_chunked_prefill);
}

TEST_F(LaunchBudget, WithoutChunkingABudgetBelowMaxModelLenIsAUsageError) {
  refused({"--max-model-len", "32768", "--no-enable-chunked-prefill"},
          "--max-num-batched-tokens 16384 is less than max_model_len 32768 (--max-model-len)");
  refused({"--max-model-len", "32768", "--no-enable-chunked-prefill"},
          "--no-enable-chunked-prefill");
  const RunSettings s = settings({"--max-model-len", "32768", "--no-enable-chunked-prefill",
                                  "--max-num-batched-tokens", "32768"});
  EXPECT_FALSE(s.job.engine.enable_chunked_prefill);
  EXPECT_EQ(s.job.engine.max_num_batched_tokens, 32768);
  // The model's limit itself is fine without chunking when the budget holds it.
  EXPECT_EQ(settings({"--max-model-len", "40960", "--no-enable-chunked-prefill",
                      "--max-num-batched-tokens", "40960"})
                .job.engine.max_model_len,
            40960);
  // The default max_model_len (4096) against a small budget.
  refused(
      {"--no-enable-chunked-prefill", "--max-num-batched-tokens", "2048", "--max-num-seqs", "64"},
      "(the default --max-model-len)");
}

TEST(CudaStepTokens, AStepBeyondOneGridDimensionIsRefusedInTheFlagsWords) {
  EngineConfig e;
  e.max_num_seqs = 256;
  e.max_model_len = 1100;
  e.max_num_batched_tokens = 65535;
  EXPECT_NO_THROW(check_cuda_step_tokens(e));
  // 60 sequences of 1100 tokens hold 66000: a budget above the limit can still fit.
  e.max_num_seqs = 59;
  e.max_num_batched_tokens = 270000;
  EXPECT_NO_THROW(check_cuda_step_tokens(e));
  e.max_num_seqs = 256;
  try {
    check_cuda_step_tokens(e);
    ADD_FAILURE() << "expected a usage error";
  } catch (const UsageError& err) {
    const std::string m = err.what();
    EXPECT_NE(m.find("--max-num-batched-tokens 270000"), std::string::npos) << m;
    EXPECT_NE(m.find("at most 65535 tokens"), std::string::npos) << m;
    EXPECT_NE(m.find("could carry 270000 (256 sequences of up to 1100 tokens)"), std::string::npos)
        << m;
  }
  // Without chunking past the limit, the remedy is chunking.
  e.enable_chunked_prefill = false;
  e.max_model_len = 131072;
  e.max_num_batched_tokens = 131072;
  try {
    check_cuda_step_tokens(e);
    ADD_FAILURE() << "expected a usage error";
  } catch (const UsageError& err) {
    EXPECT_NE(std::string(err.what()).find("leave chunked prefill on"), std::string::npos)
        << err.what();
  }
}

TEST_F(LaunchBudget, MaxModelLenAboveTheModelsLimitIsAnErrorNamingBothNumbers) {
  refused({"--max-model-len", "60000"}, "--max-model-len 60000 exceeds the model's 40960");
  refused({"--max-model-len", "60000"}, "--rope-scaling");  // how to go further
  // The default (4096) stays under any limit; a model below it lowers it quietly.
  EXPECT_EQ(settings({}).job.engine.max_model_len, 4096);
}

TEST_F(LaunchBudget, YarnRopeScalingRaisesTheLimitToFactorTimesOriginal) {
  const std::string yarn =
      R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})";
  const RunSettings s = settings({"--rope-scaling", yarn, "--max-model-len", "131072"});
  EXPECT_EQ(s.job.engine.max_model_len, 131072);
  ASSERT_TRUE(s.model.rope_scaling.has_value());
  EXPECT_EQ(s.model.rope_scaling->factor, 4.0);
  refused({"--rope-scaling", yarn, "--max-model-len", "131073"},
          "--max-model-len 131073 exceeds the model's 131072 (rope_scaling");
  // --hf-overrides says the same; its fields reach the model's config.
  const RunSettings o =
      settings({"--hf-overrides", std::string(R"({"rope_scaling": )") + yarn + "}",
                "--max-model-len", "100000"});
  EXPECT_EQ(o.job.engine.max_model_len, 100000);
  EXPECT_TRUE(o.model.rope_scaling.has_value());
}

TEST_F(LaunchBudget, PrefixCachingFlagReachesTheEngineConfig) {
  EXPECT_TRUE(settings({}).job.engine.enable_prefix_caching);
  EXPECT_FALSE(settings({"--no-enable-prefix-caching"}).job.engine.enable_prefix_caching);
  EXPECT_TRUE(settings({"--enable-prefix-caching"}).job.engine.enable_prefix_caching);
}

TEST_F(LaunchBudget, StepBudgetBelowMaxNumSeqsIsRefusedInTheFlagsWords) {
  refused({"--max-num-batched-tokens", "1"},
          "--max-num-batched-tokens 1 is less than --max-num-seqs 512 (the default)");
  refused({"--max-num-batched-tokens", "8", "--max-num-seqs", "9"},
          "--max-num-batched-tokens 8 is less than --max-num-seqs 9:");
}

// max_num_seqs never exceeds the sequences the request file asks for (no more can run): a
// huge --max-num-seqs costs no memory. n > 1 counts n sequences, OpenAI lines their body's n.
TEST_F(LaunchBudget, MaxNumSeqsIsLoweredToTheSequencesTheRequestsAskFor) {
  EXPECT_EQ(settings({}).job.engine.max_num_seqs, 1);  // one request line
  EXPECT_EQ(settings({"--max-num-seqs", "2147483647", "--max-num-batched-tokens", "2147483647"})
                .job.engine.max_num_seqs,
            1);
  std::ofstream(prompts_) << "{\"prompt\": \"a\", \"n\": 3}\n\n  \n{\"prompt\": \"b\"}\n"
                          << R"({"custom_id": "c", "method": "POST", "url": "/v1/completions", )"
                          << R"("body": {"prompt": "c", "n": 4}})"
                          << "\n"
                          << "not json, \"n\": 9\n";
  EXPECT_EQ(count_request_sequences(prompts_, 512), 3 + 1 + 4 + 1);
  EXPECT_EQ(count_request_sequences(prompts_, 5), 5);  // stops at the limit
  EXPECT_EQ(settings({}).job.engine.max_num_seqs, 9);
  EXPECT_EQ(settings({"--max-num-seqs", "4"}).job.engine.max_num_seqs, 4);
  EXPECT_EQ(count_request_sequences(dir_ / "missing.jsonl", 7), 7);
  // --shard counts only its requests (non-blank lines from 0): 0 and 2 of 4 for 0/2.
  EXPECT_EQ(count_request_sequences(prompts_, 512, {0, 2}), 3 + 4);
  EXPECT_EQ(count_request_sequences(prompts_, 512, {1, 2}), 1 + 1);
}

// --kv-cache-dtype fp8: a block takes (D + 1) / (2 D) of bf16's bytes (each row's exponent
// beside its values), so the same --cpu-kv-cache-space holds about twice the blocks.
TEST_F(LaunchBudget, Fp8KvCacheHoldsAboutTwiceTheBlocks) {
  const int bf16 = settings({"--cpu-kv-cache-space", "0.5"}).job.engine.num_kvcache_blocks;
  const RunSettings fp8 = settings({"--cpu-kv-cache-space", "0.5", "--kv-cache-dtype", "fp8"});
  EXPECT_EQ(fp8.kv_cache_dtype, DType::kFp8E4M3);
  // tiny: head_dim 64, so (64 + 1) / 128 of the bytes.
  EXPECT_EQ(fp8.job.engine.num_kvcache_blocks, bf16 * 128 / 65);
  EXPECT_EQ(settings({"--kv-cache-dtype", "auto"}).kv_cache_dtype, DType::kBf16);
  EXPECT_EQ(settings({"--kv-cache-dtype", "fp8_e4m3"}).kv_cache_dtype, DType::kFp8E4M3);
  bad({model_, prompts_, "--kv-cache-dtype", "int4"}, "--kv-cache-dtype");
}

// --kv-cache-dtype int8 (kernels/int8_kv.h): fp8's bytes (a scale code beside each row), so as
// many blocks.
TEST_F(LaunchBudget, Int8KvCacheHoldsAsManyBlocksAsFp8) {
  const RunSettings fp8 = settings({"--cpu-kv-cache-space", "0.5", "--kv-cache-dtype", "fp8"});
  const RunSettings int8 = settings({"--cpu-kv-cache-space", "0.5", "--kv-cache-dtype", "int8"});
  EXPECT_EQ(int8.kv_cache_dtype, DType::kI8);
  EXPECT_EQ(int8.job.engine.num_kvcache_blocks, fp8.job.engine.num_kvcache_blocks);
}

// Replicas share the file's sequences out: each gets room for its part (rounded up), never
// more than --max-num-seqs; the CPU threads are shared by every process.
TEST_F(LaunchBudget, ReplicasEachGetRoomForTheirPartOfTheSequences) {
  std::ofstream out(prompts_);
  for (int i = 0; i < 10; ++i) out << "{\"prompt\": \"a\"}\n";
  out.close();
  EXPECT_EQ(settings({}).job.engine.max_num_seqs, 10);
  EXPECT_EQ(settings({"--dp", "2"}).job.engine.max_num_seqs, 5);
  EXPECT_EQ(settings({"--dp", "3"}).job.engine.max_num_seqs, 4);
  EXPECT_EQ(settings({"--dp", "3", "--max-num-seqs", "2"}).job.engine.max_num_seqs, 2);
  EXPECT_EQ(settings({"--dp", "20"}).job.engine.max_num_seqs, 1);
  EXPECT_EQ(settings({"--dp", "2"}).replicas, 2);
  EXPECT_EQ(settings({"--dp", "2", "--shard", "1/2"}).job.shard.index, 1);
}

TEST_F(LaunchBudget, CpuKvCacheDefaultsToWhatTheRequestsNeed) {
  // tiny: 2 (K, V) x 4 layers x 2 kv heads x 64 dims x 2 bytes = 2 KiB a token.
  const RunSettings one = settings({});  // one request, max_model_len 4096, blocks of 256
  EXPECT_EQ(one.job.engine.num_kvcache_blocks, 16);
  std::ofstream(prompts_) << "{\"prompt\": \"a\"}\n{\"prompt\": \"b\"}\n{\"prompt\": \"c\"}\n";
  EXPECT_EQ(settings({}).job.engine.num_kvcache_blocks, 48);
  EXPECT_EQ(settings({"--max-num-seqs", "2"}).job.engine.num_kvcache_blocks, 32);
  // With the flag: exactly what it says (0.5 GiB / 512 KiB blocks).
  EXPECT_EQ(settings({"--cpu-kv-cache-space", "0.5"}).job.engine.num_kvcache_blocks, 1024);
  refused({"--cpu-kv-cache-space", "1e-300"}, "--cpu-kv-cache-space 1e-300 GiB cannot hold one");
  EXPECT_EQ(settings({"--num-gpu-blocks-override", "20"}).job.engine.num_kvcache_blocks, 20);
}

TEST_F(LaunchBudget, AKvCacheBeyondThisMachineIsRefusedNamingTheFlag) {
  refused({"--num-gpu-blocks-override", "2147483647"}, "--num-gpu-blocks-override 2147483647");
  refused({"--num-gpu-blocks-override", "2147483647"}, "more than this machine's");
  // On CUDA the cache is not in this machine's memory, but slot ids are 32-bit everywhere.
  try {
    make_run_settings(
        ok({model_, prompts_, "--device", "cuda", "--num-gpu-blocks-override", "2147483647"}, 1));
    ADD_FAILURE() << "expected a usage error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("32-bit slot id"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--num-gpu-blocks-override"), std::string::npos);
  }
  refused({"--cpu-kv-cache-space", "1e300"}, "--cpu-kv-cache-space 1e+300");
  refused({"--cpu-kv-cache-space", "1e300"}, "more than this machine's");
  refused({"--block-size", "2147483632"}, "--block-size 2147483632");
  refused({"--block-size", "2147483632", "--num-gpu-blocks-override", "1"},
          "--num-gpu-blocks-override 1");
}

}  // namespace
}  // namespace nanovllm
