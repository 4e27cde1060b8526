// nanovllm-launch and the stop signals (engine/job/interrupt.h: SIGTERM, SIGHUP, SIGQUIT,
// SIGUSR1, SIGUSR2; SIGINT has its own case in launch_failure_test): with --tp 2 and --tp 1,
// mid-run and while loading, each ends the run with exit status 128 + signal and one line on
// stderr naming it; rank 0 stops after its current step and keeps every finished result as
// whole JSON lines; no process and no segment is left. Before the hardening pass, SIGHUP,
// SIGQUIT and SIGUSR1/2 killed the launcher silently and left the segment behind, and SIGTERM
// killed rank 0 in the middle of a step.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <regex>
#include <string>

#include "engine/job/interrupt.h"
#include "tests/launcher/launch_test_support.h"

namespace nanovllm::testing {
namespace {

using namespace std::chrono_literals;

std::string sig_tag(int sig) {
  return std::string("SIG") + ::sigabbrev_np(sig);
}

// The closing line for a job stopped mid-run: "nanovllm-launch: interrupted by SIGHUP
// (Hangup): 1 finished result kept, 4 requests unfinished", once.
void expect_one_mid_run_line(const std::string& err, int sig) {
  EXPECT_EQ(count_of(err, "nanovllm-launch: interrupted by"), 1u) << err;
  const std::string head = "nanovllm-launch: interrupted by " + describe_signal(sig) + ": ";
  const std::regex line(std::regex_replace(head, std::regex(R"([()])"), R"(\$&)") +
                        R"(\d+ finished results? kept, \d+ requests? unfinished\n)");
  EXPECT_TRUE(std::regex_search(err, line)) << "wanted '" << head << "N finished results kept, "
                                            << "M requests unfinished' in\n"
                                            << err;
}

class LaunchStopSignal : public ::testing::TestWithParam<int> {};

TEST_P(LaunchStopSignal, Tp2MidDecodeStopsAfterTheStepKeepsResultsAndLeavesNothing) {
  REQUIRE_TOKENIZER();
  const int sig = GetParam();
  const std::string tag = "stop-tp2-" + sig_tag(sig);
  const fs::path out = work_dir() / (tag + ".out");
  const Launch l = spawn(long_prompts(tag + ".jsonl"), tag,
                         {"--tp", "2", "--max-num-seqs", "1", "-o", out.string()});
  std::map<int, pid_t> pids = wait_ranks_loaded(l, 2);
  ASSERT_EQ(pids.size(), 2u);
  ASSERT_TRUE(wait_for_text(out, "\n", 30s)) << run_args(l);  // the short request is done
  ASSERT_EQ(::kill(l.pid, sig), 0);
  const auto rc = wait_exit(l.pid, 10s);
  ASSERT_TRUE(rc.has_value()) << "launcher still running 10 s after " << sig_tag(sig);
  EXPECT_EQ(*rc, 128 + sig) << run_args(l);
  pids[-1] = l.pid;
  EXPECT_TRUE(all_gone_by(pids, l.prefix, Clock::now() + 5s));
  EXPECT_TRUE(segments(l.prefix).empty());
  const std::string err = read_text(l.err);
  expect_one_mid_run_line(err, sig);
  // Rank 0 left its step loop and finished its job (the progress summary), not killed.
  EXPECT_NE(err.find("[rank 0] [info] done:"), std::string::npos) << err;
  EXPECT_EQ(err.find("killed by signal"), std::string::npos) << err;
  expect_complete_long_prompt_results(out);
  EXPECT_GE(read_jsonl(out).size(), 1u);
  EXPECT_LT(read_jsonl(out).size(), 5u);
}

TEST_P(LaunchStopSignal, Tp1MidRunStopsAfterTheStepAndKeepsResults) {
  REQUIRE_TOKENIZER();
  const int sig = GetParam();
  const std::string tag = "stop-tp1-" + sig_tag(sig);
  const fs::path out = work_dir() / (tag + ".out");
  const Launch l = spawn(long_prompts(tag + ".jsonl"), tag,
                         {"--tp", "1", "--max-num-seqs", "1", "-o", out.string()});
  ASSERT_TRUE(wait_for_text(out, "\n", 30s)) << run_args(l);
  ASSERT_EQ(::kill(l.pid, sig), 0);
  const auto rc = wait_exit(l.pid, 10s);
  ASSERT_TRUE(rc.has_value()) << "launcher still running 10 s after " << sig_tag(sig);
  EXPECT_EQ(*rc, 128 + sig) << run_args(l);
  const std::string err = read_text(l.err);
  expect_one_mid_run_line(err, sig);
  EXPECT_NE(err.find("[launcher] [info] done:"), std::string::npos) << err;
  expect_complete_long_prompt_results(out);
  EXPECT_GE(read_jsonl(out).size(), 1u);
  EXPECT_LT(read_jsonl(out).size(), 5u);
}

// Before the first step nothing can be lost: the process ends at once, with the line.
TEST_P(LaunchStopSignal, Tp1WhileLoadingExitsAtOnceWithTheLine) {
  REQUIRE_TOKENIZER();
  const int sig = GetParam();
  const std::string tag = "stop-load-tp1-" + sig_tag(sig);
  const Launch l = spawn(long_prompts(tag + ".jsonl"), tag,
                         {"--tp", "1", "-o", (work_dir() / (tag + ".out")).string()});
  ASSERT_TRUE(wait_for_text(l.err, "rank 0 started", 30s)) << run_args(l);  // handler installed
  const auto t0 = Clock::now();
  ASSERT_EQ(::kill(l.pid, sig), 0);
  const auto rc = wait_exit(l.pid, 5s);
  ASSERT_TRUE(rc.has_value()) << "launcher still running 5 s after " << sig_tag(sig);
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_EQ(*rc, 128 + sig) << run_args(l);
  const std::string err = read_text(l.err);
  EXPECT_EQ(count_of(err, "nanovllm-launch: interrupted by"), 1u) << err;
  EXPECT_NE(err.find("nanovllm-launch: interrupted by " + describe_signal(sig) +
                     " before the first step; results written so far are kept\n"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("model loaded"), std::string::npos) << err;
}

TEST_P(LaunchStopSignal, Tp2WhileLoadingExitsPromptlyWithTheLineAndNoSegment) {
  REQUIRE_TOKENIZER();
  const int sig = GetParam();
  const std::string tag = "stop-load-tp2-" + sig_tag(sig);
  const Launch l = spawn(long_prompts(tag + ".jsonl"), tag,
                         {"--tp", "2", "-o", (work_dir() / (tag + ".out")).string()});
  ASSERT_TRUE(wait_for_text(l.err, "rank 1 started", 30s)) << run_args(l);
  ASSERT_TRUE(wait_for_text(l.err, "rank 0 started", 30s)) << run_args(l);
  const auto t0 = Clock::now();
  ASSERT_EQ(::kill(l.pid, sig), 0);
  const auto rc = wait_exit(l.pid, 10s);
  ASSERT_TRUE(rc.has_value()) << "launcher still running 10 s after " << sig_tag(sig);
  EXPECT_LT(Clock::now() - t0, 3s);  // not the 8 s interrupt grace
  EXPECT_EQ(*rc, 128 + sig) << run_args(l);
  EXPECT_TRUE(segments(l.prefix).empty());
  const std::string err = read_text(l.err);
  EXPECT_EQ(count_of(err, "nanovllm-launch: interrupted by " + describe_signal(sig)), 1u) << err;
}

// A signal sent to rank 0 alone (not through the launcher) stops the job the same way; before,
// rank 0's exit code 130 read as a crash ("rank 0 exited with code 130", exit 1).
TEST(LaunchStopSignalToRankZero, StopsTheJobAfterTheStepAndTheLauncherSaysSo) {
  REQUIRE_TOKENIZER();
  const fs::path out = work_dir() / "stop-rank0.out";
  const Launch l = spawn(long_prompts("stop-rank0.jsonl"), "stop-rank0",
                         {"--tp", "2", "--max-num-seqs", "1", "-o", out.string()});
  std::map<int, pid_t> pids = wait_ranks_loaded(l, 2);
  ASSERT_EQ(pids.size(), 2u);
  ASSERT_TRUE(wait_for_text(out, "\n", 30s)) << run_args(l);
  ASSERT_EQ(::kill(pids.at(0), SIGHUP), 0);
  const auto rc = wait_exit(l.pid, 10s);
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 128 + SIGHUP) << run_args(l);
  pids[-1] = l.pid;
  EXPECT_TRUE(all_gone_by(pids, l.prefix, Clock::now() + 5s));
  expect_one_mid_run_line(read_text(l.err), SIGHUP);
  expect_complete_long_prompt_results(out);
}

INSTANTIATE_TEST_SUITE_P(Signals, LaunchStopSignal,
                         ::testing::Values(SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return sig_tag(info.param);
                         });

// Runs `body` in a child whose stderr goes to `err`; returns its exit code (128 + signal when
// a signal killed it).
int in_child(const fs::path& err, const std::function<void()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, STDERR_FILENO);
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

TEST(LaunchStopSignalHandler, BeforeTheStepLoopASignalEndsTheProcessAtOnceWithTheLine) {
  const fs::path err = work_dir() / "handler-before.err";
  EXPECT_EQ(in_child(err,
                     [] {
                       install_interrupt_handler("prog");
                       ::raise(SIGQUIT);
                       ::_exit(7);  // not reached
                     }),
            128 + SIGQUIT);
  EXPECT_EQ(read_text(err),
            "prog: interrupted by SIGQUIT (Quit) before the first step; results written so far "
            "are kept\n");
  // Silent where the launcher writes the line (rank 0 and the workers under --tp > 1).
  EXPECT_EQ(in_child(err,
                     [] {
                       install_interrupt_handler(nullptr);
                       ::raise(SIGHUP);
                     }),
            128 + SIGHUP);
  EXPECT_EQ(read_text(err), "");
}

TEST(LaunchStopSignalHandler, InTheStepLoopTheFirstSignalSetsTheFlagAndASecondEndsAtOnce) {
  const fs::path err = work_dir() / "handler-polled.err";
  EXPECT_EQ(in_child(err,
                     [] {
                       install_interrupt_handler("prog");
                       poll_interrupts_from_now();
                       ::raise(SIGUSR2);
                       if (!interrupt_requested() || interrupt_signal() != SIGUSR2) ::_exit(3);
                       ::raise(SIGTERM);
                       ::_exit(4);  // not reached
                     }),
            128 + SIGTERM);
  EXPECT_EQ(read_text(err),
            "prog: interrupted by SIGTERM (Terminated) again: stopping at once; results written "
            "so far are kept\n");
}

TEST(LaunchStopSignalHandler, WorkersIgnoreStopSignalsOnceLoaded) {
  const fs::path err = work_dir() / "handler-ignored.err";
  EXPECT_EQ(in_child(err,
                     [] {
                       install_interrupt_handler(nullptr);
                       ignore_stop_signals();
                       for (int sig : kStopSignals) ::raise(sig);
                       ::_exit(interrupt_requested() ? 5 : 0);
                     }),
            0);
}

TEST(LaunchStopSignalText, SummaryNamesTheSignalAndWhatWasKept) {
  EXPECT_EQ(describe_signal(SIGHUP), "SIGHUP (Hangup)");
  EXPECT_EQ(interruption_summary(SIGUSR1, InterruptedJob{3, 2}),
            "interrupted by SIGUSR1 (User defined signal 1): 3 finished results kept, 2 requests "
            "unfinished");
  EXPECT_EQ(interruption_summary(SIGTERM, InterruptedJob{1, 1}),
            "interrupted by SIGTERM (Terminated): 1 finished result kept, 1 request unfinished");
  EXPECT_EQ(interruption_summary(SIGQUIT, std::nullopt),
            "interrupted by SIGQUIT (Quit); results written so far are kept");
}

}  // namespace
}  // namespace nanovllm::testing
