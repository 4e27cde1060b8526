// nanovllm-launch's stall watchdog (--stall-timeout) with the real binary under --tp 2: a
// worker stopped with SIGSTOP mid-decode is logged as behind, then the run ends with exit 1
// naming it, finished results kept, nothing left; a stop shorter than the timeout is survived;
// --stall-timeout 0 turns the watchdog off. Before the hardening pass such a run hung forever.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <map>
#include <string>
#include <thread>

#include "tests/launcher/launch_test_support.h"

namespace nanovllm::testing {
namespace {

using namespace std::chrono_literals;

struct StalledRun {
  Launch launch;
  fs::path out;
  std::map<int, pid_t> pids;
};

// --tp 2 on long prompts, batched; returns once the short request's result is written (the
// watchdog is armed and decoding goes on for seconds).
StalledRun start_decoding(const std::string& tag, const std::string& timeout_s,
                          const std::string& log_interval_s) {
  StalledRun run;
  run.out = work_dir() / (tag + ".out");
  run.launch = spawn(long_prompts(tag + ".jsonl"), tag,
                     {"--tp", "2", "--max-num-seqs", "8", "--stall-timeout", timeout_s,
                      "--stall-log-interval", log_interval_s, "-o", run.out.string()});
  run.pids = wait_ranks_loaded(run.launch, 2);
  EXPECT_TRUE(wait_for_text(run.out, "\n", 30s)) << run_args(run.launch);
  return run;
}

std::string rank1(const StalledRun& run) {
  return "rank 1 (pid " + std::to_string(run.pids.at(1)) + ", ";
}

TEST(LaunchStall, StoppedWorkerIsLoggedBehindThenTheRunEndsWithExitOneNamingIt) {
  REQUIRE_TOKENIZER();
  StalledRun run = start_decoding("stall-stop", "2", "0.5");
  ASSERT_EQ(run.pids.size(), 2u);
  const auto t0 = Clock::now();
  ASSERT_EQ(::kill(run.pids.at(1), SIGSTOP), 0);
  const auto rc = wait_exit(run.launch.pid, 15s);
  const auto waited = Clock::now() - t0;
  if (!rc) ::kill(run.pids.at(1), SIGCONT);  // let a broken watchdog's run finish
  ASSERT_TRUE(rc.has_value()) << "launcher still running 15 s after the stop; "
                              << run_args(run.launch);
  EXPECT_EQ(*rc, 1) << run_args(run.launch);
  EXPECT_GE(waited, 2s);  // not before the timeout
  std::printf("[ figures  ] SIGSTOP of rank 1 -> launcher exited after %lld ms (timeout 2 s)\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()));
  std::map<int, pid_t> all = run.pids;
  all[-1] = run.launch.pid;
  EXPECT_TRUE(all_gone_by(all, run.launch.prefix, Clock::now() + 5s));
  EXPECT_TRUE(segments(run.launch.prefix).empty());
  const std::string err = read_text(run.launch.err);
  const size_t behind = err.find("; behind: ");
  ASSERT_NE(behind, std::string::npos) << err;
  EXPECT_NE(err.find(rank1(run), behind), std::string::npos) << err;
  const size_t last = err.find("nanovllm-launch: stalled: " + rank1(run));
  EXPECT_NE(last, std::string::npos) << err;
  EXPECT_GT(last, behind) << err;
  EXPECT_NE(err.find("process stopped", last), std::string::npos) << err;
  expect_complete_long_prompt_results(run.out);
  EXPECT_GE(read_jsonl(run.out).size(), 1u);
}

TEST(LaunchStall, WorkerStoppedAndContinuedBeforeTheTimeoutRecoversAndTheRunCompletes) {
  REQUIRE_TOKENIZER();
  StalledRun run = start_decoding("stall-cont", "4", "0.3");
  ASSERT_EQ(run.pids.size(), 2u);
  ASSERT_EQ(::kill(run.pids.at(1), SIGSTOP), 0);
  std::this_thread::sleep_for(1s);
  ASSERT_EQ(::kill(run.pids.at(1), SIGCONT), 0);
  EXPECT_EQ(finish(run.launch), 0) << run_args(run.launch);
  const std::string err = read_text(run.launch.err);
  EXPECT_NE(err.find("; behind: "), std::string::npos) << err;  // it was seen
  EXPECT_NE(err.find("stall over"), std::string::npos) << err;
  EXPECT_EQ(err.find("stalled:"), std::string::npos) << err;
  expect_complete_long_prompt_results(run.out);
  EXPECT_EQ(read_jsonl(run.out).size(), 5u);
  EXPECT_TRUE(segments(run.launch.prefix).empty());
}

TEST(LaunchStall, ZeroTimeoutTurnsTheWatchdogOff) {
  REQUIRE_TOKENIZER();
  StalledRun run = start_decoding("stall-off", "0", "0.1");
  ASSERT_EQ(run.pids.size(), 2u);
  ASSERT_EQ(::kill(run.pids.at(1), SIGSTOP), 0);
  std::this_thread::sleep_for(500ms);  // five log intervals: an armed watchdog would log
  ASSERT_EQ(::kill(run.pids.at(1), SIGCONT), 0);
  EXPECT_EQ(finish(run.launch), 0) << run_args(run.launch);
  const std::string err = read_text(run.launch.err);
  EXPECT_EQ(err.find("behind"), std::string::npos) << err;
  EXPECT_EQ(read_jsonl(run.out).size(), 5u);
}

}  // namespace
}  // namespace nanovllm::testing
