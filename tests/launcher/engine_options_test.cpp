// The C library's engine keywords (Python's LLM(**kwargs)) become nanovllm-launch's options
// through the launcher's own parser: nano-vllm's and vLLM's names reach their fields, an
// unknown keyword or a value of the wrong type is a TypeError naming it, a value the launcher
// refuses a ValueError carrying the launcher's reason.
#include "launcher/engine_options.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace nanovllm {
namespace {

namespace fs = std::filesystem;

class EngineOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("nvtest-engine-options-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "config.json") << "{}";
  }
  void TearDown() override { fs::remove_all(dir_); }
  nlohmann::json with(nlohmann::json extra) {
    extra["model"] = dir_.string();
    extra["device"] = "cpu";
    return extra;
  }
  // The error's type, and that its message names `needle`.
  void refused(const nlohmann::json& options, const std::string& type, const std::string& needle) {
    try {
      engine_options_from_json(options);
      ADD_FAILURE() << "accepted " << options.dump();
    } catch (const EngineOptionError& e) {
      EXPECT_EQ(e.type, type) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
  fs::path dir_;
};

TEST_F(EngineOptionsTest, NanoVllmAndVllmNamesReachTheLaunchersFields) {
  const LaunchOptions o = engine_options_from_json(with({{"tensor_parallel_size", 2},
                                                         {"enforce_eager", true},
                                                         {"max_num_batched_tokens", 4096},
                                                         {"max_num_seqs", 7},
                                                         {"max_model_len", 1024},
                                                         {"gpu_memory_utilization", 0.5},
                                                         {"kvcache_block_size", 32},
                                                         {"num_kvcache_blocks", 40},
                                                         {"enable_prefix_caching", false},
                                                         {"seed", 9}}))
                              .launch;
  EXPECT_EQ(o.tensor_parallel_size, 2);
  EXPECT_TRUE(o.enforce_eager);
  EXPECT_EQ(o.max_num_batched_tokens, 4096);
  EXPECT_EQ(o.max_num_seqs, 7);
  EXPECT_EQ(o.max_model_len, std::optional<int>(1024));
  EXPECT_DOUBLE_EQ(o.gpu_memory_utilization, 0.5);
  EXPECT_EQ(o.block_size, 32);
  EXPECT_EQ(o.num_gpu_blocks_override, std::optional<int>(40));
  EXPECT_FALSE(o.enable_prefix_caching);
  EXPECT_EQ(o.sampling.seed, std::optional<uint64_t>(9));
  EXPECT_TRUE(o.prompts.empty());  // no prompts file sizes anything
  EXPECT_EQ(engine_options_from_json(with({{"block_size", 48}})).launch.block_size, 48);
  // A flag with a --no- form: false is said, not left to the default (on).
  EXPECT_FALSE(
      engine_options_from_json(with({{"async_scheduling", false}})).launch.async_scheduling);
  EXPECT_TRUE(engine_options_from_json(with({{"async_scheduling", true}})).launch.async_scheduling);
  EXPECT_EQ(engine_options_from_json(with({{"kv_cache_dtype", "fp8"}})).launch.kv_cache_dtype,
            DType::kFp8E4M3);
  EXPECT_EQ(engine_options_from_json(with({{"kv_cache_dtype", "auto"}})).launch.kv_cache_dtype,
            DType::kBf16);
  EXPECT_EQ(engine_options_from_json(with({{"kv_cache_dtype", "int8"}})).launch.kv_cache_dtype,
            DType::kI8);
  // nano-vllm's num_kvcache_blocks = -1 and None: sized as when not given.
  EXPECT_FALSE(
      engine_options_from_json(with({{"num_kvcache_blocks", -1}})).launch.num_gpu_blocks_override);
  EXPECT_FALSE(engine_options_from_json(with({{"max_model_len", nullptr}})).launch.max_model_len);
  EXPECT_EQ(engine_options_from_json(with({{"worker_path", "/x/nanovllm-worker"}})).worker_path,
            "/x/nanovllm-worker");
}

TEST_F(EngineOptionsTest, UnknownKeywordsAndWrongTypesAreTypeErrorsNamingThem) {
  refused(with({{"tensor_parallel", 2}}), "TypeError",
          "unexpected keyword argument 'tensor_parallel'");
  refused(with({{"enforce_eager", 1}}), "TypeError", "enforce_eager");
  refused(with({{"max_num_seqs", "8"}}), "TypeError", "max_num_seqs");
  refused({{"device", "cpu"}}, "TypeError", "model");
}

TEST_F(EngineOptionsTest, ValuesTheLauncherRefusesAreValueErrorsWithItsReason) {
  refused(with({{"kvcache_block_size", 20}}), "ValueError", "multiple of 16");
  refused(with({{"gpu_memory_utilization", 1.5}}), "ValueError", "(0, 1]");
  // The launcher's flag becomes the keyword in the message.
  refused(with({{"max_num_seqs", 0}}), "ValueError", "max_num_seqs: Value 0 not in range");
  refused(with({{"kv_cache_dtype", "int4"}}), "ValueError", "kv_cache_dtype");
  refused({{"model", (dir_ / "missing").string()}}, "ValueError", "no config.json");
}

}  // namespace
}  // namespace nanovllm
