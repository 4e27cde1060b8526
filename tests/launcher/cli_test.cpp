// nanovllm-launch's flags: every flag parses into its field, bad values and missing files give
// a clear error (exit code 2) naming the flag or path, --help/--version exit 0.
#include "launcher/cli.h"

#include <gtest/gtest.h>

#include "tests/launcher/launch_cli_fixture.h"

namespace nanovllm {
namespace {

TEST_F(LaunchCli, PositionalsAloneGiveTheDocumentedDefaultsAndCpuWithoutGpu) {
  const LaunchParse p = parse({model_, prompts_}, 0);
  ASSERT_TRUE(p.options) << p.message;
  const LaunchOptions& o = *p.options;
  EXPECT_EQ(o.model, model_);
  EXPECT_EQ(o.prompts, prompts_);
  EXPECT_FALSE(o.output.has_value());
  EXPECT_EQ(o.tensor_parallel_size, 1);
  EXPECT_EQ(o.device, Device::kCpu);
  EXPECT_NE(p.notice.find("no GPU"), std::string::npos);
  EXPECT_EQ(o.block_size, 256);
  EXPECT_DOUBLE_EQ(o.gpu_memory_utilization, 0.9);
  EXPECT_FALSE(o.cpu_kv_cache_space_gib.has_value());  // sized for the request file
  EXPECT_TRUE(o.enable_prefix_caching);
  EXPECT_FALSE(o.max_model_len || o.num_gpu_blocks_override);
  const SamplingOverrides& d = o.sampling;
  EXPECT_FALSE(d.temperature || d.top_p || d.top_k || d.min_p || d.max_tokens || d.seed ||
               d.ignore_eos);
  EXPECT_FALSE(o.resume || o.enforce_eager || o.disable_custom_all_reduce);
  EXPECT_EQ(o.log_level, spdlog::level::info);
  EXPECT_EQ(o.max_num_batched_tokens, 16384);
  // Chunked prefill: EngineConfig's defaults (on, no threshold), set in one place.
  EXPECT_EQ(o.enable_chunked_prefill, EngineConfig{}.enable_chunked_prefill);
  EXPECT_TRUE(o.enable_chunked_prefill);
  EXPECT_EQ(o.long_prefill_token_threshold, EngineConfig{}.long_prefill_token_threshold);
}

TEST_F(LaunchCli, DeviceDefaultsToCudaWhenAGpuIsVisible) {
  const LaunchParse p = parse({model_, prompts_}, 2);
  ASSERT_TRUE(p.options);
  EXPECT_EQ(p.options->device, Device::kCuda);
  EXPECT_TRUE(p.notice.empty());
  EXPECT_EQ(ok({model_, prompts_, "--device", "cpu"}, 2).device, Device::kCpu);
}

TEST_F(LaunchCli, EveryFlagParsesIntoItsField) {
  const std::string out = (dir_ / "out.jsonl").string();
  const LaunchOptions o = ok({model_,
                              prompts_,
                              "-o",
                              out,
                              "--tp",
                              "2",
                              "--device",
                              "cpu",
                              "--max-model-len",
                              "2048",
                              "--max-num-seqs",
                              "8",
                              "--max-num-batched-tokens",
                              "1024",
                              "--gpu-memory-utilization",
                              "0.5",
                              "--block-size",
                              "32",
                              "--num-gpu-blocks-override",
                              "77",
                              "--cpu-kv-cache-space",
                              "1.5",
                              "--enforce-eager",
                              "--disable-custom-all-reduce",
                              "--temperature",
                              "0.7",
                              "--top-p",
                              "0.95",
                              "--top-k",
                              "20",
                              "--min-p",
                              "0.05",
                              "--max-tokens",
                              "99",
                              "--seed",
                              "18446744073709551615",
                              "--ignore-eos",
                              "--resume",
                              "--log-level",
                              "debug"});
  EXPECT_EQ(o.output, fs::path(out));
  EXPECT_EQ(o.tensor_parallel_size, 2);
  EXPECT_EQ(o.device, Device::kCpu);
  EXPECT_EQ(o.max_model_len, 2048);
  EXPECT_EQ(o.max_num_seqs, 8);
  EXPECT_EQ(o.max_num_batched_tokens, 1024);
  EXPECT_DOUBLE_EQ(o.gpu_memory_utilization, 0.5);
  EXPECT_EQ(o.block_size, 32);
  EXPECT_EQ(o.num_gpu_blocks_override, 77);
  EXPECT_EQ(o.cpu_kv_cache_space_gib, 1.5);
  EXPECT_TRUE(o.enforce_eager);
  EXPECT_TRUE(o.disable_custom_all_reduce);
  EXPECT_EQ(o.sampling.temperature, 0.7f);
  EXPECT_EQ(o.sampling.top_p, 0.95f);
  EXPECT_EQ(o.sampling.top_k, 20);
  EXPECT_EQ(o.sampling.min_p, 0.05f);
  EXPECT_EQ(o.sampling.max_tokens, 99);
  EXPECT_EQ(o.sampling.seed, UINT64_MAX);
  EXPECT_EQ(o.sampling.ignore_eos, true);
  EXPECT_TRUE(o.resume);
  EXPECT_EQ(o.log_level, spdlog::level::debug);
}

TEST_F(LaunchCli, LongTensorParallelNameAndTemperatureZeroAreAccepted) {
  EXPECT_EQ(
      ok({model_, prompts_, "--tensor-parallel-size", "3", "--device", "cpu"}).tensor_parallel_size,
      3);
  EXPECT_EQ(ok({model_, prompts_, "--temperature", "0"}).sampling.temperature, 0.0f);
}

TEST_F(LaunchCli, BadValuesGiveAClearErrorNamingTheFlag) {
  bad({model_, prompts_, "--tp", "0"}, "--tp");
  bad({model_, prompts_, "--tp", "two"}, "--tp");
  bad({model_, prompts_, "--block-size", "100"}, "multiple of 16");
  bad({model_, prompts_, "--block-size", "0"}, "--block-size");
  bad({model_, prompts_, "--gpu-memory-utilization", "0"}, "--gpu-memory-utilization");
  bad({model_, prompts_, "--gpu-memory-utilization", "1.5"}, "(0, 1]");
  bad({model_, prompts_, "--device", "tpu"}, "--device");
  bad({model_, prompts_, "--top-p", "0"}, "--top-p");
  bad({model_, prompts_, "--top-k", "-2"}, "--top-k");
  bad({model_, prompts_, "--min-p", "2"}, "--min-p");
  bad({model_, prompts_, "--temperature", "-1"}, "--temperature");
  bad({model_, prompts_, "--max-tokens", "0"}, "--max-tokens");
  bad({model_, prompts_, "--cpu-kv-cache-space", "0"}, "--cpu-kv-cache-space");
  bad({model_, prompts_, "--log-level", "loud"}, "--log-level");
  bad({model_, prompts_, "--stop", "x"}, "--stop");  // not offered yet
  bad({model_}, "prompts");
}

TEST_F(LaunchCli, OutputNamingThePromptsFileIsRefusedBeforeAnythingIsWritten) {
  const std::string before = read_file(prompts_);
  const std::filesystem::path link = dir_ / "prompts-link.jsonl",
                              hard = dir_ / "prompts-hard.jsonl";
  std::filesystem::create_symlink(prompts_, link);
  std::filesystem::create_hard_link(prompts_, hard);
  for (const std::string& out :
       {prompts_, link.string(), hard.string(), (dir_ / "." / "prompts.jsonl").string()}) {
    bad({model_, prompts_, "-o", out}, "is the prompts file");
    bad({model_, prompts_, "-o", out, "--resume"}, "would destroy the input");
  }
  EXPECT_EQ(read_file(prompts_), before);
  EXPECT_EQ(ok({model_, prompts_, "-o", (dir_ / "results.jsonl").string()}).output,
            dir_ / "results.jsonl");
}

TEST_F(LaunchCli, ResumeIsRefusedWithoutAnOutputFile) {
  bad({model_, prompts_, "--resume"}, "--resume needs -o FILE");
  bad({model_, prompts_, "--resume", "-o", "-"}, "--resume needs -o FILE");
  EXPECT_TRUE(ok({model_, prompts_, "--resume", "-o", (dir_ / "r.jsonl").string()}).resume);
  EXPECT_FALSE(ok({model_, prompts_, "-o", "-"}).output.has_value());  // "-" is stdout
}

TEST_F(LaunchCli, MissingModelFolderOrPromptsFileIsNamed) {
  bad({(dir_ / "nope").string(), prompts_},
      "model folder '" + (dir_ / "nope").string() + "' does not exist");
  bad({prompts_, prompts_}, "is not a directory");
  bad({model_, (dir_ / "missing.jsonl").string()}, "prompts file");
  bad({model_, model_}, "is not a regular file");
}

TEST_F(LaunchCli, CudaWithTooFewGpusIsRefused) {
  bad({model_, prompts_, "--device", "cuda"}, "0 visible", 0);
  bad({model_, prompts_, "--tp", "4"}, "needs 4 GPUs; 2 visible", 2);
  EXPECT_EQ(ok({model_, prompts_, "--tp", "2"}, 2).tensor_parallel_size, 2);
}

TEST_F(LaunchCli, DataParallelSizeParsesInEverySpellingAndNeedsDpTimesTpGpus) {
  EXPECT_EQ(ok({model_, prompts_}).data_parallel_size, 1);
  EXPECT_EQ(ok({model_, prompts_, "--data-parallel-size", "3"}).data_parallel_size, 3);
  EXPECT_EQ(ok({model_, prompts_, "--dp", "2"}).data_parallel_size, 2);
  const LaunchOptions vllm = ok({model_, prompts_, "-dp", "4", "-tp", "2"}, 8);
  EXPECT_EQ(vllm.data_parallel_size, 4);
  EXPECT_EQ(vllm.tensor_parallel_size, 2);
  bad({model_, prompts_, "--dp", "0"}, "--dp");
  // CUDA: every replica needs its own --tp GPUs.
  bad({model_, prompts_, "--device", "cuda", "--dp", "2", "--tp", "2"},
      "--data-parallel-size 2 x --tp 2 on --device cuda needs 4 GPUs; 3 visible", 3);
  EXPECT_EQ(
      ok({model_, prompts_, "--device", "cuda", "--dp", "2", "--tp", "2"}, 4).data_parallel_size,
      2);
  // The CPU backend runs replicas as processes: no GPU count applies.
  EXPECT_EQ(ok({model_, prompts_, "--device", "cpu", "--dp", "8"}).data_parallel_size, 8);
}

TEST_F(LaunchCli, ShardIsKOverNWithKBelowNAndBadSpellingsAreNamed) {
  const LaunchOptions whole = ok({model_, prompts_});
  EXPECT_EQ(whole.shard.index, 0);
  EXPECT_EQ(whole.shard.count, 1);
  const LaunchOptions third = ok({model_, prompts_, "--shard", "2/3"});
  EXPECT_EQ(third.shard.index, 2);
  EXPECT_EQ(third.shard.count, 3);
  for (const char* text : {"3/3", "-1/2", "0/0", "1", "a/2", "1/2x", "1/", "/2", "1/99999999999"})
    bad({model_, prompts_, "--shard", text}, std::string("--shard '") + text + "'");
}

// A launcher started by Slurm without --shard answers the whole file: it never guesses a
// shard from SLURM_ARRAY_TASK_ID / SLURM_PROCID.
TEST_F(LaunchCli, SlurmVariablesWithoutShardLeaveTheWholeFile) {
  ::setenv("SLURM_ARRAY_TASK_ID", "1", 1);
  ::setenv("SLURM_ARRAY_TASK_COUNT", "3", 1);
  ::setenv("SLURM_PROCID", "1", 1);
  ::setenv("SLURM_NTASKS", "3", 1);
  const LaunchOptions o = ok({model_, prompts_});
  ::unsetenv("SLURM_ARRAY_TASK_ID");
  ::unsetenv("SLURM_ARRAY_TASK_COUNT");
  ::unsetenv("SLURM_PROCID");
  ::unsetenv("SLURM_NTASKS");
  EXPECT_EQ(o.shard.index, 0);
  EXPECT_EQ(o.shard.count, 1);
}

TEST_F(LaunchCli, StallTimeoutDefaultsToFiveMinutesZeroIsOffAndTheLogIntervalIsHidden) {
  const LaunchOptions d = ok({model_, prompts_});
  EXPECT_EQ(d.stall_timeout_s, 300.0);
  EXPECT_EQ(d.stall_log_interval_s, 60.0);
  EXPECT_EQ(ok({model_, prompts_, "--stall-timeout", "2.5"}).stall_timeout_s, 2.5);
  EXPECT_EQ(ok({model_, prompts_, "--stall-timeout", "0"}).stall_timeout_s, 0.0);
  EXPECT_EQ(ok({model_, prompts_, "--stall-log-interval", "0.5"}).stall_log_interval_s, 0.5);
  bad({model_, prompts_, "--stall-timeout", "-1"}, "--stall-timeout");
  bad({model_, prompts_, "--stall-timeout", "soon"}, "--stall-timeout");
  bad({model_, prompts_, "--stall-timeout", "1e12"}, "--stall-timeout");
  bad({model_, prompts_, "--stall-timeout", "nan"}, "--stall-timeout");
  bad({model_, prompts_, "--stall-log-interval", "0"}, "--stall-log-interval");
  const LaunchParse help = parse({"--help"});
  EXPECT_NE(help.message.find("--stall-timeout"), std::string::npos) << help.message;
  EXPECT_EQ(help.message.find("--stall-log-interval"), std::string::npos) << help.message;
}

TEST_F(LaunchCli, HelpAndVersionExitZeroWithTheirText) {
  const LaunchParse help = parse({"--help"});
  EXPECT_FALSE(help.options);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.message.find("--tensor-parallel-size"), std::string::npos) << help.message;
  EXPECT_NE(help.message.find("--cpu-kv-cache-space"), std::string::npos);
  const LaunchParse version = parse({"--version"});
  EXPECT_FALSE(version.options);
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.message.find("nanovllm-launch"), std::string::npos) << version.message;
}

TEST_F(LaunchCli, ChunkedPrefillFlagsParseAsVllmSpellsThem) {
  EXPECT_TRUE(ok({model_, prompts_, "--enable-chunked-prefill"}).enable_chunked_prefill);
  EXPECT_FALSE(ok({model_, prompts_, "--no-enable-chunked-prefill"}).enable_chunked_prefill);
  // The last one given wins, as with vLLM's BooleanOptionalAction.
  EXPECT_TRUE(ok({model_, prompts_, "--no-enable-chunked-prefill", "--enable-chunked-prefill"})
                  .enable_chunked_prefill);
  EXPECT_EQ(
      ok({model_, prompts_, "--long-prefill-token-threshold", "2048"}).long_prefill_token_threshold,
      2048);
  EXPECT_EQ(
      ok({model_, prompts_, "--long-prefill-token-threshold", "0"}).long_prefill_token_threshold,
      0);
  bad({model_, prompts_, "--long-prefill-token-threshold", "-1"}, "--long-prefill-token-threshold");
  bad({model_, prompts_, "--long-prefill-token-threshold", "many"},
      "--long-prefill-token-threshold");
  // Without chunks the threshold (default 4096) has nothing to cap: accepted, and unused.
  EXPECT_EQ(
      ok({model_, prompts_, "--no-enable-chunked-prefill", "--long-prefill-token-threshold", "512"})
          .long_prefill_token_threshold,
      512);
  bad({model_, prompts_, "--enable-chunked-prefill=maybe"}, "--enable-chunked-prefill");
  const LaunchParse help = parse({"--help"});
  EXPECT_NE(help.message.find("--no-enable-chunked-prefill"), std::string::npos) << help.message;
  EXPECT_NE(help.message.find("--long-prefill-token-threshold"), std::string::npos);
}

TEST_F(LaunchCli, RopeScalingAndHfOverridesMustBeJsonObjects) {
  bad({model_, prompts_, "--rope-scaling", "yarn"}, "--rope-scaling: not JSON");
  bad({model_, prompts_, "--rope-scaling", "[4]"}, "--rope-scaling: expected a JSON object");
  bad({model_, prompts_, "--hf-overrides", "{\"a\": "}, "--hf-overrides: not JSON");
  bad({model_, prompts_, "--hf-overrides", "3"}, "--hf-overrides: expected a JSON object");
  const LaunchOptions o = ok({model_, prompts_, "--rope-scaling", R"({"rope_type": "yarn"})",
                              "--hf-overrides", R"({"max_position_embeddings": 8})"});
  EXPECT_EQ(o.hf_overrides["rope_scaling"]["rope_type"], "yarn");
  EXPECT_EQ(o.hf_overrides["max_position_embeddings"], 8);
}

TEST_F(LaunchCli, PrefixCachingFlagsParseAsVllmSpellsThem) {
  EXPECT_TRUE(ok({model_, prompts_}).enable_prefix_caching);  // EngineConfig's default
  EXPECT_EQ(ok({model_, prompts_}).enable_prefix_caching, EngineConfig{}.enable_prefix_caching);
  EXPECT_TRUE(ok({model_, prompts_, "--enable-prefix-caching"}).enable_prefix_caching);
  EXPECT_FALSE(ok({model_, prompts_, "--no-enable-prefix-caching"}).enable_prefix_caching);
  EXPECT_TRUE(ok({model_, prompts_, "--no-enable-prefix-caching", "--enable-prefix-caching"})
                  .enable_prefix_caching);  // the last one wins
  bad({model_, prompts_, "--enable-prefix-caching=maybe"}, "--enable-prefix-caching");
}

TEST_F(LaunchCli, AsyncSchedulingFlagsParseAsVllmSpellsThem) {
  EXPECT_TRUE(ok({model_, prompts_}).async_scheduling);  // EngineConfig's default
  EXPECT_EQ(ok({model_, prompts_}).async_scheduling, EngineConfig{}.async_scheduling);
  EXPECT_FALSE(ok({model_, prompts_, "--no-async-scheduling"}).async_scheduling);
  EXPECT_TRUE(ok({model_, prompts_, "--no-async-scheduling", "--async-scheduling"})
                  .async_scheduling);  // the last one wins
  bad({model_, prompts_, "--async-scheduling=maybe"}, "--async-scheduling");
}

// The help shows each default as it is: a flag pair names both spellings without CLI11's
// "{false}" (which read as "off by default" for chunked prefill, on by default).
TEST_F(LaunchCli, HelpShowsTheRealDefaults) {
  const std::string help = parse({"--help"}).message;
  EXPECT_EQ(help.find("{false}"), std::string::npos) << help;
  EXPECT_EQ(help.find("{true}"), std::string::npos) << help;
  EXPECT_NE(help.find("--enable-chunked-prefill,--no-enable-chunked-prefill\n"), std::string::npos)
      << help;
  EXPECT_NE(help.find("--enable-prefix-caching,--no-enable-prefix-caching\n"), std::string::npos)
      << help;
  // Each pair's description says its default: on, for both.
  const auto description_of = [&help](const std::string& name) {
    const size_t at = help.find(name);
    return at == std::string::npos ? std::string() : help.substr(at, help.find("\n  -", at) - at);
  };
  EXPECT_NE(description_of("--enable-chunked-prefill").find("(default: on)"), std::string::npos)
      << help;
  EXPECT_NE(description_of("--enable-prefix-caching").find("(default: on)"), std::string::npos)
      << help;
  EXPECT_NE(description_of("--async-scheduling").find("default: on)"), std::string::npos) << help;
  // --tp 1 and max_model_len's default and cap.
  EXPECT_NE(description_of("--tp,--tensor-parallel-size").find("=1"), std::string::npos) << help;
  EXPECT_NE(description_of("--max-model-len")
                .find("default 4096, capped by the model's max_position_embeddings"),
            std::string::npos)
      << help;
  // The CPU cache's default is the requests' need, not a fixed 4 GiB.
  const std::string cpu = description_of("--cpu-kv-cache-space");
  EXPECT_EQ(cpu.find("=4"), std::string::npos) << help;
  EXPECT_NE(cpu.find("at most 4 GiB"), std::string::npos) << help;
}

TEST_F(LaunchCli, LimitsNoRequestCouldRunAreRefusedByTheParser) {
  bad({model_, prompts_, "--max-model-len", "1"}, "--max-model-len");  // no room for a token
  EXPECT_EQ(ok({model_, prompts_, "--max-model-len", "2"}).max_model_len, 2);
  bad({model_, prompts_, "--cpu-kv-cache-space", "inf"}, "--cpu-kv-cache-space");
  bad({model_, prompts_, "--cpu-kv-cache-space", "nan"}, "--cpu-kv-cache-space");
  bad({model_, prompts_, "--cpu-kv-cache-space", "-1"}, "--cpu-kv-cache-space");
  EXPECT_EQ(ok({model_, prompts_, "--cpu-kv-cache-space", "1e-300"}).cpu_kv_cache_space_gib,
            1e-300);  // accepted here; make_run_settings finds it holds no block
}

}  // namespace
}  // namespace nanovllm
