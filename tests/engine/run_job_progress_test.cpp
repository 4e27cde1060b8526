// run_job's progress reporting with a fake model: the start-up is logged on its own line and
// kept out of the generation time that every rate of the summary divides by (issue 30).
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "engine/job/run_job.h"
#include "tests/engine/tokenizer_test_support.h"

namespace nanovllm {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

constexpr milliseconds kLoadTime{500};
constexpr milliseconds kStepTime{20};

// Samples token 100 for every row after kStepTime; says how its start-up went.
class SlowFakeExecutor : public StepExecutor {
 public:
  StepResult execute(const StepCommand& cmd) override {
    if (cmd.kind == StepKind::kExit) return {};
    std::this_thread::sleep_for(kStepTime);
    StepResult r;
    r.sampled_token_ids.assign(cmd.logits_indices.size(), 100);
    return r;
  }
  int num_kv_blocks() const override { return 64; }
  std::optional<StartupTiming> startup_timing() const override {
    return StartupTiming{0.3, 0.2, 0.0};
  }
};

// spdlog's default logger writes into a string while it lives.
class CaptureLogs {
 public:
  CaptureLogs() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text_);
    sink->set_pattern("%v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~CaptureLogs() { spdlog::set_default_logger(previous_); }
  CaptureLogs(const CaptureLogs&) = delete;
  CaptureLogs& operator=(const CaptureLogs&) = delete;
  std::string text() const { return text_.str(); }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream text_;
};

double number(const std::smatch& m, size_t i) {
  return std::stod(m[i].str());
}

TEST(RunJob, StartUpIsLoggedApartAndTheSummaryRatesCountGenerationAlone) {
  std::string why;
  const std::optional<std::string> tokenizer = testing::qwen3_tokenizer_json(&why);
  NANOVLLM_REQUIRE_REF(tokenizer, why);
  const fs::path dir =
      fs::temp_directory_path() / ("nanovllm_run_job_progress_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(*tokenizer, dir / "tokenizer.json", fs::copy_options::overwrite_existing);
  {
    std::ofstream prompts(dir / "prompts.jsonl");
    for (int i = 0; i < 3; ++i)
      prompts << R"({"id": "r)" << i
              << R"(", "prompt_token_ids": [785, 6722, 315, 9625], "max_tokens": 10, )"
              << R"("ignore_eos": true, "temperature": 0})" << '\n';
  }
  JobSettings s;
  s.model_dir = dir;
  s.prompts = dir / "prompts.jsonl";
  s.output = dir / "out.jsonl";
  s.vocab_size = 151936;
  s.engine.max_model_len = 256;
  s.engine.kvcache_block_size = 16;
  s.engine.max_num_seqs = 8;
  s.engine.max_num_batched_tokens = 256;

  std::string logs;
  {
    const CaptureLogs capture;
    const int rc = run_job(s, [] {
      std::this_thread::sleep_for(kLoadTime);
      return std::make_unique<SlowFakeExecutor>();
    });
    EXPECT_EQ(rc, kExitOk);
    logs = capture.text();
  }
  fs::remove_all(dir);

  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      logs, m,
      std::regex(R"(start-up (\d+\.\d) s: load 0\.3 s, warm-up 0\.2 s, graph capture 0\.0 s)")))
      << logs;
  const double startup_line_s = number(m, 1);
  EXPECT_GE(startup_line_s, 0.5);
  // One prefill step and 9 decode steps of 20 ms: 30 output tokens in about 0.2 s.
  ASSERT_TRUE(std::regex_search(
      logs, m,
      std::regex(R"(done: requests: 3 ok, 0 failed \| tokens: 12 prefill, 27 decode, 30 output )"
                 R"(\| generation \d+:\d\d \((\d+\.\d) s\) \| throughput: (\d+) output tok/s, )"
                 R"(\d+\.\d req/s \| prefill steps \d+ tok/s, decode steps \d+ tok/s )"
                 R"(\| wall \d+:\d\d \((\d+\.\d) s\) incl\. start-up (\d+\.\d) s)")))
      << logs;
  const double generation_s = number(m, 1), output_rate = number(m, 2), wall_s = number(m, 3),
               startup_s = number(m, 4);
  EXPECT_EQ(startup_s, startup_line_s);
  EXPECT_LT(generation_s, startup_s) << "the load must not count as generation";
  EXPECT_GE(wall_s + 0.1, generation_s + startup_s);
  // Output tok/s over the generation time: about 150 here; over the wall time it would be
  // under 30 / 0.7 = 43.
  EXPECT_GT(output_rate, 30.0 / (wall_s + 0.05) * 1.5) << logs;
}

}  // namespace
}  // namespace nanovllm
