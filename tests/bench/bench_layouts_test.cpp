// nanovllm-bench's configurations (bench/nanovllm_bench_layouts.h): --tp x --dp in order,
// --layouts exactly as listed in either spelling, vLLM's -tp / -dp, and the refusals: a layout
// needing more GPUs than visible (naming the numbers), a bad entry, --layouts beside --tp.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "bench/nanovllm_bench_layouts.h"
#include "bench/nanovllm_bench_options.h"
#include "launcher/usage_error.h"

namespace nanovllm::bench {
namespace {

BenchParse parse(const std::string& device, int visible_gpus, std::vector<std::string> flags) {
  std::vector<std::string> args{"nanovllm-bench", std::filesystem::temp_directory_path().string(),
                                "--device",       device,
                                "--workloads",    "fixed"};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_bench_options(static_cast<int>(argv.size()), argv.data(), visible_gpus);
}

using Layouts = std::vector<BenchLayout>;

TEST(BenchLayouts, TpTimesDpInOrder) {
  const BenchParse dp = parse("cpu", 0, {"--dp", "1,2,4"});
  ASSERT_TRUE(dp.options) << dp.message;
  EXPECT_EQ(dp.options->layouts, (Layouts{{1, 1}, {1, 2}, {1, 4}}));
  const BenchParse tp = parse("cpu", 0, {"--tp", "1,2"});  // as before --dp
  ASSERT_TRUE(tp.options) << tp.message;
  EXPECT_EQ(tp.options->layouts, (Layouts{{1, 1}, {2, 1}}));
  const BenchParse both = parse("cpu", 0, {"--tp", "2,1", "--data-parallel-size", "1,2"});
  ASSERT_TRUE(both.options) << both.message;
  EXPECT_EQ(both.options->layouts, (Layouts{{2, 1}, {2, 2}, {1, 1}, {1, 2}}));
  const BenchParse vllm = parse("cpu", 0, {"-tp", "2", "-dp", "3"});
  ASSERT_TRUE(vllm.options) << vllm.message;
  EXPECT_EQ(vllm.options->layouts, (Layouts{{2, 3}}));
}

TEST(BenchLayouts, LayoutsRunExactlyAsListed) {
  // The 8B comparison: the same 4 GPUs three ways.
  const BenchParse p = parse("cuda", 4, {"--layouts", "dp4xtp1,tp2xdp2,dp1xtp4"});
  ASSERT_TRUE(p.options) << p.message;
  EXPECT_EQ(p.options->layouts, (Layouts{{1, 4}, {2, 2}, {4, 1}}));
  EXPECT_EQ(layout_name(p.options->layouts[1]), "tp2xdp2");
}

TEST(BenchLayouts, TooFewGpusIsRefusedNamingTheNumbers) {
  const BenchParse dp = parse("cuda", 2, {"--dp", "1,2,4"});
  EXPECT_FALSE(dp.options);
  EXPECT_EQ(dp.exit_code, 2);
  EXPECT_NE(dp.message.find("--tp 1 --dp 4 (tp1xdp4) on --device cuda needs 4 GPUs (1 rank x 4 "
                            "replicas); 2 visible"),
            std::string::npos)
      << dp.message;
  const BenchParse tp = parse("cuda", 1, {"--tp", "1,2"});
  EXPECT_EQ(tp.exit_code, 2);
  EXPECT_NE(tp.message.find("--tp 2 on --device cuda needs 2 GPUs (2 ranks x 1 replica); 1 "
                            "visible"),
            std::string::npos)
      << tp.message;
  EXPECT_EQ(parse("cuda", 3, {"--layouts", "tp2xdp2"}).exit_code, 2);
  // The CPU backend has no GPUs to run out of.
  EXPECT_TRUE(parse("cpu", 0, {"--dp", "4"}).options);
}

TEST(BenchLayouts, BadEntriesAndConflictsAreUsageErrors) {
  for (const char* bad : {"4x1", "tp1", "tp1xtp2", "dp0xtp1", "tp1xdp", "tp1xdp2x", "tpaxdp1"}) {
    const BenchParse p = parse("cpu", 0, {"--layouts", bad});
    EXPECT_EQ(p.exit_code, 2) << bad;
    EXPECT_NE(p.message.find("expected tp<N>xdp<N> or dp<N>xtp<N>"), std::string::npos)
        << bad << ": " << p.message;
  }
  const BenchParse both = parse("cpu", 0, {"--layouts", "tp1xdp2", "--dp", "2"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.message.find("without --tp and --dp"), std::string::npos) << both.message;
  EXPECT_EQ(parse("cpu", 0, {"--dp", "0"}).exit_code, 2);
  EXPECT_THROW(parse_layout("dp2xtp0"), UsageError);
  EXPECT_EQ(parse_layout("dp2xtp3"), (BenchLayout{3, 2}));
}

TEST(BenchLayouts, LaunchOptionsCarryTheReplicas) {
  BenchOptions o;
  const LaunchOptions l = launch_options(o, 2, 4);
  EXPECT_EQ(l.tensor_parallel_size, 2);
  EXPECT_EQ(l.data_parallel_size, 4);
  EXPECT_EQ(launch_options(o, 2).data_parallel_size, 1);
}

}  // namespace
}  // namespace nanovllm::bench
