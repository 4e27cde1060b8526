// nanovllm-bench's chunked-prefill flags (vLLM's names and defaults, plus the bench's own step
// mode), the workload list (`all` leaves out long and interference), and how the flags reach
// the engine config.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "bench/nanovllm_bench_options.h"
#include "bench/nanovllm_bench_settings_json.h"
#include "launcher/usage_error.h"

namespace nanovllm::bench {
namespace {

BenchParse parse_on(const std::string& device, int visible_gpus, std::vector<std::string> flags) {
  std::vector<std::string> args{"nanovllm-bench", std::filesystem::temp_directory_path().string(),
                                "--device", device};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_bench_options(static_cast<int>(argv.size()), argv.data(), visible_gpus);
}

BenchParse parse(std::vector<std::string> flags) {
  return parse_on("cpu", 0, std::move(flags));
}

TEST(BenchOptions, ChunkedPrefillDefaultsAreTheEngineConfigs) {
  const BenchParse p = parse({"--workloads", "long"});
  ASSERT_TRUE(p.options) << p.message;
  const EngineConfig defaults;
  EXPECT_EQ(p.options->enable_chunked_prefill, defaults.enable_chunked_prefill);
  EXPECT_TRUE(p.options->enable_chunked_prefill);
  EXPECT_EQ(p.options->long_prefill_token_threshold, defaults.long_prefill_token_threshold);
  EXPECT_EQ(p.options->mixed_chunked_steps, defaults.mixed_chunked_steps);
  EXPECT_FALSE(p.options->max_num_batched_tokens_given);
}

TEST(BenchOptions, ChunkedPrefillFlags) {
  const BenchParse p = parse({"--workloads", "long,interference", "--no-enable-chunked-prefill",
                              "--long-prefill-token-threshold", "512", "--chunked-step-mode",
                              "alternating", "--max-num-batched-tokens", "40000"});
  ASSERT_TRUE(p.options) << p.message;
  EXPECT_FALSE(p.options->enable_chunked_prefill);
  EXPECT_EQ(p.options->long_prefill_token_threshold, 512);
  EXPECT_FALSE(p.options->mixed_chunked_steps);
  EXPECT_TRUE(p.options->max_num_batched_tokens_given);
  EXPECT_EQ(p.options->workloads, (std::vector<std::string>{"long", "interference"}));

  const BenchParse on =
      parse({"--workloads", "long", "--enable-chunked-prefill", "--chunked-step-mode", "mixed"});
  ASSERT_TRUE(on.options) << on.message;
  EXPECT_TRUE(on.options->enable_chunked_prefill);
  EXPECT_TRUE(on.options->mixed_chunked_steps);
}

TEST(BenchOptions, PrefixCachingFlagsParseAsVllmSpellsThem) {
  EXPECT_TRUE(parse({}).options->enable_prefix_caching);
  EXPECT_FALSE(parse({"--no-enable-prefix-caching"}).options->enable_prefix_caching);
  EXPECT_TRUE(parse({"--no-enable-prefix-caching", "--enable-prefix-caching"})
                  .options->enable_prefix_caching);
}

// CLI11 prints a negated flag's value ("{false}") after a pair, which reads as its default.
TEST(BenchOptions, HelpListsFlagPairsWithTheirRealDefault) {
  const BenchParse help = parse({"--help"});
  ASSERT_FALSE(help.options);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_EQ(help.message.find("{false}"), std::string::npos) << help.message;
  EXPECT_NE(help.message.find("--enable-chunked-prefill,--no-enable-chunked-prefill"),
            std::string::npos)
      << help.message;
  EXPECT_NE(help.message.find("--enable-prefix-caching,--no-enable-prefix-caching"),
            std::string::npos)
      << help.message;
}

TEST(BenchOptions, BadChunkedFlagsAreUsageErrors) {
  EXPECT_EQ(parse({"--workloads", "long", "--chunked-step-mode", "sometimes"}).exit_code, 2);
  EXPECT_EQ(parse({"--workloads", "long", "--long-prefill-token-threshold", "-1"}).exit_code, 2);
}

TEST(BenchOptions, AllLeavesOutTheLongWorkloads) {
  const BenchParse all = parse({"--workloads", "all"});  // on the CPU: nanovllm-cpu
  ASSERT_TRUE(all.options) << all.message;
  EXPECT_EQ(all.options->workloads, (std::vector<std::string>{"nanovllm-cpu", "fixed", "latency",
                                                              "shared-prefix", "decode-step"}));
  const BenchParse more = parse({"--workloads", "interference,all,long"});
  ASSERT_TRUE(more.options) << more.message;
  EXPECT_EQ(more.options->workloads.size(), 7u);
  EXPECT_EQ(more.options->workloads.back(), "interference");
}

TEST(BenchOptions, EngineFlagsReachTheEngineConfig) {
  BenchOptions o;
  o.enable_chunked_prefill = true;
  o.long_prefill_token_threshold = 2048;
  o.mixed_chunked_steps = false;
  o.enable_prefix_caching = false;
  EngineConfig e;
  e.max_model_len = 33792;
  e.max_num_batched_tokens = 16384;  // chunking: a prompt may be longer than the budget
  apply_engine_flags(o, e);
  EXPECT_TRUE(e.enable_chunked_prefill);
  EXPECT_EQ(e.long_prefill_token_threshold, 2048);
  EXPECT_FALSE(e.mixed_chunked_steps);
  EXPECT_FALSE(e.enable_prefix_caching);
  EXPECT_EQ(e.max_num_batched_tokens, 16384);
}

TEST(BenchOptions, LaunchOptionsCarryTheChunkingFlags) {
  BenchOptions o;
  o.max_model_len = 33792;
  o.long_prefill_token_threshold = 1024;
  LaunchOptions l = launch_options(o, 1);
  EXPECT_TRUE(l.enable_chunked_prefill);
  EXPECT_EQ(l.long_prefill_token_threshold, 1024);
  EXPECT_EQ(l.max_num_batched_tokens, 16384);
  o.enable_chunked_prefill = false;
  l = launch_options(o, 1);
  EXPECT_FALSE(l.enable_chunked_prefill);
  EXPECT_EQ(l.max_num_batched_tokens, 33792);
  o.max_num_batched_tokens_given = true;
  EXPECT_EQ(launch_options(o, 1).max_num_batched_tokens, 16384);
}

TEST(BenchOptions, WithoutChunkingTheBudgetGrowsToMaxModelLenUnlessGiven) {
  BenchOptions o;
  o.enable_chunked_prefill = false;
  EngineConfig e;
  e.max_model_len = 33792;
  e.max_num_batched_tokens = 16384;
  apply_engine_flags(o, e);  // vLLM's default without chunking: max(budget, max_model_len)
  EXPECT_FALSE(e.enable_chunked_prefill);
  EXPECT_EQ(e.max_num_batched_tokens, 33792);

  o.max_num_batched_tokens_given = true;  // --max-num-batched-tokens 16384: kept, refused
  EngineConfig given;
  given.max_model_len = 33792;
  given.max_num_batched_tokens = 16384;
  EXPECT_THROW(apply_engine_flags(o, given), UsageError);
}

TEST(BenchOptions, KnockOutAllReduceNeedsCudaAndATpAboveOne) {
  const BenchParse cpu = parse({"--tp", "1,2", "--knock-out-all-reduce"});
  EXPECT_EQ(cpu.exit_code, 2);
  EXPECT_NE(cpu.message.find("--knock-out-all-reduce"), std::string::npos) << cpu.message;
  const BenchParse tp1 = parse_on("cuda", 2, {"--tp", "1", "--knock-out-all-reduce"});
  EXPECT_EQ(tp1.exit_code, 2);
  EXPECT_NE(tp1.message.find("a --tp above 1"), std::string::npos) << tp1.message;
  const BenchParse ok = parse_on("cuda", 2, {"--tp", "1,2", "--knock-out-all-reduce"});
  ASSERT_TRUE(ok.options) << ok.message;
  EXPECT_TRUE(ok.options->knock_out_all_reduce);
  const BenchParse plain = parse_on("cuda", 2, {"--tp", "1,2"});
  ASSERT_TRUE(plain.options) << plain.message;
  EXPECT_FALSE(plain.options->knock_out_all_reduce);
}

TEST(BenchOptions, AKnockedOutRunSaysSoInItsEngineJson) {
  RunSettings s;
  EXPECT_EQ(engine_json(EngineConfig{}, s)["all_reduce_knocked_out"], false);
  s.knock_out_all_reduce = true;
  EXPECT_EQ(engine_json(EngineConfig{}, s)["all_reduce_knocked_out"], true);
}

}  // namespace
}  // namespace nanovllm::bench
