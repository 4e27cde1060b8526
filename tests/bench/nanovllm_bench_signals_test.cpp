// nanovllm-bench and the stop signals (issue 30): the built binary on the tiny model on the CPU,
// signalled mid-run. A stop signal to the parent reaches its benchmark process (and, under
// --tp 2, that process's ranks), every one of them is gone when the parent exits with 128 +
// signal, and the lines on stderr name nanovllm-bench, never nanovllm-launch or results files.
// SIGKILL of the parent takes the benchmark process with it. Before, the parent died alone and
// the benchmark process ran on at full CPU, adopted by init.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "bench/nanovllm_bench_stop.h"
#include "engine/job/interrupt.h"
#include "tests/bench/bench_spawn.h"
#include "tests/launcher/launch_test_support.h"

namespace nanovllm::testing {
namespace {

using namespace std::chrono_literals;

struct Started {
  pid_t pid = -1;
  fs::path json, err;  // the json path is in every process's command line: our marker
  std::string prefix;
};

// Fixed n=4 (200 tokens each), 100 runs: longer than any test waits.
std::vector<std::string> endless_fixed_runs() {
  return {"--workloads", "fixed",        "--num-seqs", "4",      "--input-len",
          "16",          "--output-len", "200",        "--runs", "100"};
}

// Runs of fixed n=4 (200 tokens each) on and on: a signal lands mid-run. Returns once the
// first run has finished (the benchmark process is in its step loop).
Started start(const std::string& tag, int tp) {
  Started s;
  s.json = work_dir() / (tag + ".json");
  s.err = work_dir() / (tag + ".err");
  s.prefix = unique_prefix();
  BenchSpawn spawn;
  spawn.args = tiny_cpu_bench_args(NANOVLLM_BENCH_BIN, tiny_model().string(), s.json.string(),
                                   endless_fixed_runs());
  spawn.args.insert(spawn.args.end(), {"--tp", std::to_string(tp)});
  spawn.out = (work_dir() / (tag + ".out")).string();
  spawn.err = s.err.string();
  spawn.env = {{"NANOVLLM_SHM_PREFIX", s.prefix}};
  s.pid = spawn_bench(spawn);
  EXPECT_TRUE(wait_for_text(s.err, "fixed n=4 run 1/100:", 60s)) << read_text(s.err);
  return s;
}

// Polls until no live process has the marker; kills and names any left after `limit`.
std::vector<pid_t> survivors(const Started& s, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  std::vector<pid_t> left = processes_with(s.json.string());
  while (!left.empty() && Clock::now() < end) {
    std::this_thread::sleep_for(20ms);
    left = processes_with(s.json.string());
  }
  for (const pid_t pid : left) ::kill(pid, SIGKILL);  // leave nothing running at full CPU
  for (const std::string& name : segments(s.prefix)) fs::remove(fs::path("/dev/shm") / name);
  return left;
}

class BenchStopSignal : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(BenchStopSignal, ParentExitsWith128PlusSignalAndLeavesNoProcess) {
  REQUIRE_TOKENIZER();
  const auto [sig, tp] = GetParam();
  const Started s =
      start(std::string("stop-") + ::sigabbrev_np(sig) + "-tp" + std::to_string(tp), tp);
  ASSERT_EQ(::kill(s.pid, sig), 0);
  const std::optional<int> rc = wait_exit(s.pid, 20s);
  if (!rc) ::kill(s.pid, SIGKILL);
  ASSERT_TRUE(rc.has_value()) << "nanovllm-bench still running 20 s after the signal";
  EXPECT_EQ(*rc, 128 + sig) << read_text(s.err);
  EXPECT_TRUE(survivors(s, 5s).empty()) << "benchmark processes outlived the parent";
  EXPECT_FALSE(fs::exists(s.json));  // nothing measured to the end, nothing written

  const std::string err = read_text(s.err);
  const std::string why = describe_signal(sig);
  const size_t worker_line =
      err.find("nanovllm-bench: the --tp " + std::to_string(tp) + " benchmark process stopped (" +
               why + " from nanovllm-bench)");
  const size_t parent_line = err.find("nanovllm-bench: interrupted by " + why);
  EXPECT_NE(worker_line, std::string::npos) << err;
  EXPECT_NE(parent_line, std::string::npos) << err;
  EXPECT_LT(worker_line, parent_line) << err;  // the worker spoke before the parent was gone
  for (const char* wrong : {"nanovllm-launch", "results written", "fatal", "killed by signal"})
    EXPECT_EQ(err.find(wrong), std::string::npos) << wrong << " in\n" << err;
}

INSTANTIATE_TEST_SUITE_P(Signals, BenchStopSignal,
                         ::testing::Values(std::tuple{SIGINT, 1}, std::tuple{SIGTERM, 1},
                                           std::tuple{SIGHUP, 1}, std::tuple{SIGQUIT, 1},
                                           std::tuple{SIGUSR1, 1}, std::tuple{SIGUSR2, 1},
                                           std::tuple{SIGTERM, 2}, std::tuple{SIGINT, 2}),
                         [](const auto& info) {
                           return std::string(::sigabbrev_np(std::get<0>(info.param))) + "_tp" +
                                  std::to_string(std::get<1>(info.param));
                         });

// The issue's own case: `timeout -s INT` signals nanovllm-bench and then its process group.
TEST(BenchTimeout, TimeoutLeavesNoProcessAndNoLauncherLine) {
  REQUIRE_TOKENIZER();
  const fs::path json = work_dir() / "timeout.json", err = work_dir() / "timeout.err";
  BenchSpawn spawn;
  spawn.args = {"/usr/bin/timeout", "-s", "INT", "8"};
  const std::vector<std::string> bench = tiny_cpu_bench_args(
      NANOVLLM_BENCH_BIN, tiny_model().string(), json.string(), endless_fixed_runs());
  spawn.args.insert(spawn.args.end(), bench.begin(), bench.end());
  spawn.out = (work_dir() / "timeout.out").string();
  spawn.err = err.string();
  spawn.env = {{"NANOVLLM_SHM_PREFIX", unique_prefix()}};
  const pid_t pid = spawn_bench(spawn);
  const std::optional<int> rc = wait_exit(pid, 60s);
  if (!rc) ::kill(pid, SIGKILL);
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 124) << read_text(err);  // timeout's "timed out"
  Started s;
  s.json = json;
  EXPECT_TRUE(survivors(s, 5s).empty()) << "benchmark processes outlived timeout";
  const std::string text = read_text(err);
  EXPECT_NE(text.find("nanovllm-bench: interrupted by SIGINT (Interrupt)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("benchmark process stopped (SIGINT (Interrupt) from nanovllm-bench)"),
            std::string::npos)
      << text;
  for (const char* wrong : {"nanovllm-launch", "results written", "killing it"})
    EXPECT_EQ(text.find(wrong), std::string::npos) << wrong << " in\n" << text;
}

class BenchParentKilled : public ::testing::TestWithParam<int> {};

TEST_P(BenchParentKilled, BenchmarkProcessesDieWithIt) {
  REQUIRE_TOKENIZER();
  const int tp = GetParam();
  const Started s = start("kill9-tp" + std::to_string(tp), tp);
  ASSERT_EQ(processes_with(s.json.string()).size(), static_cast<size_t>(tp == 1 ? 2 : 4));
  ASSERT_EQ(::kill(s.pid, SIGKILL), 0);
  EXPECT_EQ(wait_exit(s.pid, 5s), 128 + SIGKILL);
  EXPECT_TRUE(survivors(s, 5s).empty()) << "benchmark processes outlived the killed parent";
}

INSTANTIATE_TEST_SUITE_P(Tp, BenchParentKilled, ::testing::Values(1, 2));

// The channel itself: the request is read without being consumed (rank 0 and the process that
// launched it both see it), and a parent that is gone reads as kParentGone.
TEST(BenchStopChannel, StopIsSeenByEveryReaderAndAClosedParentIsGone) {
  bench::StopChannel c = bench::make_stop_channel();
  bench::set_stop_fd(c.worker_fd);
  EXPECT_EQ(bench::stop_signal(), 0);
  EXPECT_NO_THROW(bench::throw_if_stopped());
  bench::send_stop(c.parent_fd, SIGUSR1);
  EXPECT_EQ(bench::stop_signal(), SIGUSR1);
  bench::set_stop_fd(c.worker_fd);  // another reader of the same end
  EXPECT_EQ(bench::stop_signal(), SIGUSR1);
  EXPECT_THROW(bench::throw_if_stopped(), bench::BenchStopped);
  ::close(c.parent_fd);
  ::close(c.worker_fd);

  c = bench::make_stop_channel();
  bench::set_stop_fd(c.worker_fd);
  ::close(c.parent_fd);
  EXPECT_EQ(bench::stop_signal(), bench::kParentGone);
  ::close(c.worker_fd);
  bench::set_stop_fd(-1);
  EXPECT_EQ(bench::stop_signal(), 0);
}

}  // namespace
}  // namespace nanovllm::testing
