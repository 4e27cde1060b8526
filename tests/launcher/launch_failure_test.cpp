// nanovllm-launch's failure handling with the real binary: kill -9 of a worker, of rank 0 and
// of the launcher, SIGINT, a stale segment, two concurrent runs; every process must be gone and
// nothing of ours left in /dev/shm within 10 s.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/launcher/launch_test_support.h"

namespace nanovllm::testing {
namespace {

using namespace std::chrono_literals;

void kill_rank_and_expect_teardown(int victim) {
  const Launch l = spawn(long_prompts("kill" + std::to_string(victim) + ".jsonl"),
                         "kill" + std::to_string(victim),
                         {"--tp", "2", "-o", (work_dir() / "kill.out").string()});
  std::map<int, pid_t> pids = wait_ranks_loaded(l, 2);
  ASSERT_EQ(pids.size(), 2u);
  const auto t0 = Clock::now();
  ASSERT_EQ(::kill(pids.at(victim), SIGKILL), 0);
  const auto rc = wait_exit(l.pid, 10s);
  ASSERT_TRUE(rc.has_value()) << "launcher still running 10 s after the kill";
  pids[-1] = l.pid;
  EXPECT_TRUE(all_gone_by(pids, l.prefix, t0 + 10s));
  EXPECT_EQ(*rc, 1);
  const std::string err = read_text(l.err);
  EXPECT_NE(err.find("rank " + std::to_string(victim) + " (pid " + std::to_string(pids.at(victim)) +
                     ") was killed by signal 9"),
            std::string::npos)
      << err;
  std::printf(
      "kill -9 rank %d: launcher exited after %lld ms\n", victim,
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()));
}

TEST(LaunchFailure, KillNineOfAWorkerTearsDownTheGroupNamingTheRank) {
  REQUIRE_TOKENIZER();
  kill_rank_and_expect_teardown(1);
}

TEST(LaunchFailure, KillNineOfRankZeroTearsDownTheGroupNamingTheRank) {
  REQUIRE_TOKENIZER();
  kill_rank_and_expect_teardown(0);
}

TEST(LaunchFailure, KillNineOfTheLauncherKillsRanksAndTheNextRunSweepsItsSegment) {
  REQUIRE_TOKENIZER();
  const std::string prefix = unique_prefix();
  const Launch l = spawn(long_prompts("killl.jsonl"), "killl",
                         {"--tp", "2", "-o", (work_dir() / "killl.out").string()}, prefix);
  const std::map<int, pid_t> pids = wait_ranks_loaded(l, 2);
  ASSERT_EQ(pids.size(), 2u);
  const auto t0 = Clock::now();
  ASSERT_EQ(::kill(l.pid, SIGKILL), 0);
  ASSERT_EQ(wait_exit(l.pid, 10s), 128 + SIGKILL);
  // The ranks die by PDEATHSIG; nobody removes the segment.
  EXPECT_TRUE(all_gone_by(pids, prefix, t0 + 10s, /*expect_segment_removed=*/false));
  std::printf(
      "kill -9 launcher: ranks gone after %lld ms\n",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()));
  const std::vector<std::string> stale = segments(prefix);
  ASSERT_EQ(stale.size(), 1u);
  // The next run with this prefix sweeps it, and runs normally.
  const fs::path prompts =
      write_file("after.jsonl", R"({"id": "a", "prompt": "Hi", "max_tokens": 3, "temperature": 0})"
                                "\n");
  const Launch next =
      spawn(prompts, "after", {"--tp", "2", "-o", (work_dir() / "after.out").string()}, prefix);
  EXPECT_EQ(finish(next), 0) << run_args(next);
  EXPECT_EQ(read_jsonl(work_dir() / "after.out").size(), 1u);
  EXPECT_FALSE(fs::exists("/dev/shm/" + stale[0]));
  EXPECT_TRUE(segments(prefix).empty());
}

TEST(LaunchFailure, SigintExits130KeepingFinishedResultsAsValidJsonl) {
  REQUIRE_TOKENIZER();
  const fs::path out = work_dir() / "sigint.out";
  const Launch l = spawn(long_prompts("sigint.jsonl"), "sigint",
                         {"--tp", "2", "--max-num-seqs", "1", "-o", out.string()});
  std::map<int, pid_t> pids = wait_ranks_loaded(l, 2);
  ASSERT_EQ(pids.size(), 2u);
  const auto end = Clock::now() + 30s;  // until the short request's line is written
  while (read_text(out).find('\n') == std::string::npos && Clock::now() < end)
    std::this_thread::sleep_for(5ms);
  ASSERT_EQ(::kill(l.pid, SIGINT), 0);
  const auto rc = wait_exit(l.pid, 10s);
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 130) << run_args(l);
  pids[-1] = l.pid;
  EXPECT_TRUE(all_gone_by(pids, l.prefix, Clock::now() + 5s));
  const auto lines = read_jsonl(out);  // throws on a partial line
  ASSERT_GE(lines.size(), 1u);
  EXPECT_LT(lines.size(), 5u);
  EXPECT_EQ(lines[0]["id"], "short");
  EXPECT_EQ(lines[0]["token_ids"].size(), 2u);
}

TEST(LaunchFailure, StaleSegmentOfADeadLauncherDoesNotDisturbANewRun) {
  REQUIRE_TOKENIZER();
  const std::string prefix = unique_prefix();
  const pid_t dead = ::fork();  // a pid that surely belongs to no live process
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const fs::path stale = "/dev/shm/" + prefix + "-" + std::to_string(dead) + "-0123456789abcdef";
  std::ofstream(stale) << std::string(4096, 'x');  // garbage where a ring would be
  const fs::path prompts =
      write_file("stale.jsonl", R"({"id": "a", "prompt": "Hi", "max_tokens": 3, "temperature": 0})"
                                "\n");
  const Launch l =
      spawn(prompts, "stale", {"--tp", "2", "-o", (work_dir() / "stale.out").string()}, prefix);
  EXPECT_EQ(finish(l), 0) << run_args(l);
  EXPECT_EQ(read_jsonl(work_dir() / "stale.out").size(), 1u);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(segments(prefix).empty());
}

}  // namespace
}  // namespace nanovllm::testing
