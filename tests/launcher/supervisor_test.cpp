// Supervisor: a failing rank takes the run down within 10 s naming the rank; SIGINT and every
// other stop signal is forwarded and gives 128 + signal; a tick hook's failure tears the run
// down; a closed stderr does not kill the launcher; a launcher killed with SIGKILL takes its
// ranks with it and its segment is swept by the next run; two runs side by side do not
// interfere.
#include "launcher/supervisor.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "ipc/broadcast_ring.h"
#include "ipc/liveness.h"
#include "launcher/logging.h"

namespace nanovllm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

bool exists_in_dev_shm(const std::string& name) {
  struct stat st {};
  return ::stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A rank that just waits to be stopped (bounded, so a broken supervisor cannot hang ctest).
int sleep_until_stopped(int) {
  for (int i = 0; i < 600; ++i) ::usleep(50 * 1000);
  return 7;
}

SupervisorOptions test_options() {
  SupervisorOptions o;
  o.segment_prefix = "nvtest-sup";
  o.kill_grace = 1000ms;
  o.interrupt_grace = 3000ms;
  return o;
}

TEST(Supervisor, RankExitingNonZeroStopsTheOthersRemovesSegmentAndNamesTheRank) {
  Supervisor sup(test_options());
  const std::string name = sup.segment().name();
  ASSERT_TRUE(exists_in_dev_shm(name));
  const auto t0 = Clock::now();
  const SupervisorResult r = sup.run({sleep_until_stopped,
                                      [](int) {
                                        ::usleep(100 * 1000);
                                        return 3;
                                      },
                                      sleep_until_stopped});
  const double ms = ms_since(t0);
  std::printf("[ figures  ] rank 1 exit 3 -> launcher returned after %.0f ms (teardown %lld ms)\n",
              ms, static_cast<long long>(r.teardown.count()));
  EXPECT_EQ(r.exit_code, 1);
  ASSERT_TRUE(r.failed_rank.has_value());
  EXPECT_EQ(*r.failed_rank, 1);
  EXPECT_NE(r.message.find("rank 1"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("exited with code 3"), std::string::npos) << r.message;
  EXPECT_TRUE(r.ranks[0].signaled && r.ranks[0].signal == SIGTERM);
  EXPECT_TRUE(r.ranks[2].signaled && r.ranks[2].signal == SIGTERM);
  EXPECT_FALSE(exists_in_dev_shm(name));
  EXPECT_LT(ms, 10000.0);
}

TEST(Supervisor, RankKilledBySigkillIsNamedWithItsSignal) {
  Supervisor sup(test_options());
  const std::string name = sup.segment().name();
  const auto t0 = Clock::now();
  const SupervisorResult r = sup.run({[](int) {
                                        ::usleep(100 * 1000);
                                        ::raise(SIGKILL);
                                        return 0;
                                      },
                                      sleep_until_stopped});
  const double ms = ms_since(t0);
  std::printf("[ figures  ] rank 0 SIGKILL -> launcher returned after %.0f ms (teardown %lld ms)\n",
              ms, static_cast<long long>(r.teardown.count()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.failed_rank, std::optional<int>(0));
  EXPECT_NE(r.message.find("rank 0"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("killed by signal 9"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("SIGKILL"), std::string::npos) << r.message;
  EXPECT_TRUE(r.ranks[1].signaled);
  EXPECT_FALSE(exists_in_dev_shm(name));
  EXPECT_LT(ms, 10000.0);
}

// Data parallelism names a process by replica and rank ("replica 1 rank 0").
TEST(Supervisor, RankNameOptionNamesTheFailedProcess) {
  SupervisorOptions o = test_options();
  o.rank_name = [](int i) {
    return "replica " + std::to_string(i / 2) + " rank " + std::to_string(i % 2);
  };
  Supervisor sup(o);
  const SupervisorResult r = sup.run({sleep_until_stopped, sleep_until_stopped,
                                      [](int) {
                                        ::usleep(100 * 1000);
                                        return 3;
                                      },
                                      sleep_until_stopped});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.failed_rank, std::optional<int>(2));
  EXPECT_NE(r.message.find("replica 1 rank 0 (pid"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("exited with code 3"), std::string::npos) << r.message;
  EXPECT_EQ(r.ranks[2].name, "replica 1 rank 0");
}

TEST(Supervisor, RankIgnoringSigtermIsKilledAfterTheGrace) {
  SupervisorOptions o = test_options();
  o.kill_grace = 300ms;
  Supervisor sup(o);
  const auto t0 = Clock::now();
  const SupervisorResult r = sup.run({[](int rank) {
                                        ::signal(SIGTERM, SIG_IGN);
                                        return sleep_until_stopped(rank);
                                      },
                                      [](int) {
                                        ::usleep(100 * 1000);
                                        return 2;
                                      }});
  EXPECT_EQ(r.failed_rank, std::optional<int>(1));
  EXPECT_TRUE(r.ranks[0].signaled && r.ranks[0].signal == SIGKILL);
  EXPECT_GE(r.teardown, 300ms);
  EXPECT_LT(ms_since(t0), 10000.0);
}

TEST(Supervisor, AllRanksSucceedingGivesZeroAndAnExceptionBecomesExitCodeOne) {
  Supervisor ok_sup(test_options());
  const SupervisorResult ok = ok_sup.run({[](int) { return 0; }, [](int) { return 0; }});
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_TRUE(ok.message.empty());
  EXPECT_FALSE(ok.failed_rank.has_value());

  Supervisor bad_sup(test_options());
  const SupervisorResult bad =
      bad_sup.run({[](int) -> int { throw std::runtime_error("boom"); }, [](int) { return 0; }});
  EXPECT_EQ(bad.failed_rank, std::optional<int>(0));
  EXPECT_NE(bad.message.find("exited with code 1"), std::string::npos) << bad.message;
}

// Runs `body` in a forked "launcher" process; returns its pid.
pid_t fork_launcher(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 99;
    try {
      rc = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
    }
    std::fflush(nullptr);
    ::_exit(rc);
  }
  return pid;
}

bool read_exact(int fd, void* buf, size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t got = ::read(fd, p, n);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

std::atomic<int> g_sigint_seen{0};

TEST(Supervisor, SigintIsForwardedRanksFinishAndTheLauncherExits130) {
  int ready[2], report[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(report), 0);
  const pid_t launcher = fork_launcher([&] {
    Supervisor sup(test_options());
    auto rank_main = [&](int rank) -> int {
      ::signal(SIGINT, [](int) { g_sigint_seen = 1; });
      const char c = 'r';
      ::write(ready[1], &c, 1);
      for (int i = 0; i < 400 && g_sigint_seen == 0; ++i) ::usleep(10 * 1000);
      if (g_sigint_seen == 0) return 5;
      const char got = static_cast<char>('0' + rank);  // "finished": rank 0 would flush results
      ::write(report[1], &got, 1);
      return 0;
    };
    return sup.run({rank_main, rank_main}).exit_code;
  });
  char buf[2];
  ASSERT_TRUE(read_exact(ready[0], buf, 2));
  const auto t0 = Clock::now();
  ::kill(launcher, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  std::printf("[ figures  ] SIGINT -> launcher exited after %.0f ms\n", ms_since(t0));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  ASSERT_TRUE(read_exact(report[0], buf, 2));  // both ranks saw SIGINT and finished
  std::sort(buf, buf + 2);
  EXPECT_EQ(std::string(buf, 2), "01");
  for (int fd : {ready[0], ready[1], report[0], report[1]}) ::close(fd);
}

std::atomic<int> g_stop_seen{0};

// Every stop signal takes SIGINT's path (before: SIGHUP, SIGQUIT and SIGUSR1/2 killed the
// launcher, which left the segment and the ranks to PDEATHSIG).
TEST(Supervisor, EveryStopSignalIsForwardedRanksFinishAndTheLauncherExits128PlusIt) {
  for (int sig : {SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) {
    SCOPED_TRACE(::sigabbrev_np(sig));
    int ready[2], report[2], name_pipe[2];
    ASSERT_EQ(::pipe(ready), 0);
    ASSERT_EQ(::pipe(report), 0);
    ASSERT_EQ(::pipe(name_pipe), 0);
    const pid_t launcher = fork_launcher([&] {
      Supervisor sup(test_options());
      char name[128] = {};
      std::snprintf(name, sizeof(name), "%s", sup.segment().name().c_str());
      ::write(name_pipe[1], name, sizeof(name));
      auto rank_main = [&](int rank) -> int {
        ::signal(sig, [](int got) { g_stop_seen = got; });
        const char c = 'r';
        ::write(ready[1], &c, 1);
        for (int i = 0; i < 400 && g_stop_seen == 0; ++i) ::usleep(10 * 1000);
        if (g_stop_seen == 0) return 5;
        const char got = static_cast<char>('0' + rank);  // "finished": rank 0 would flush results
        ::write(report[1], &got, 1);
        return 0;
      };
      return sup.run({rank_main, rank_main}).exit_code;
    });
    // Only the children write: a read ends (false) once they are all gone.
    for (int fd : {ready[1], report[1], name_pipe[1]}) ::close(fd);
    char name[128];
    char buf[2];
    ASSERT_TRUE(read_exact(name_pipe[0], name, sizeof(name)));
    ASSERT_TRUE(read_exact(ready[0], buf, 2));
    ::kill(launcher, sig);
    int status = 0;
    ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
    ASSERT_TRUE(WIFEXITED(status)) << "killed by " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig);
    ASSERT_TRUE(read_exact(report[0], buf, 2));  // both ranks got it and finished
    std::sort(buf, buf + 2);
    EXPECT_EQ(std::string(buf, 2), "01");
    EXPECT_FALSE(exists_in_dev_shm(name));
    for (int fd : {ready[0], report[0], name_pipe[0]}) ::close(fd);
  }
}

TEST(Supervisor, TickHookFailureStopsTheRanksRemovesTheSegmentAndNamesTheRank) {
  Supervisor sup(test_options());
  const std::string name = sup.segment().name();
  int ticks = 0, ticks_after_failure = 0;
  bool failed = false;
  std::vector<RankState> seen;
  const TickHook hook = [&](const std::vector<RankState>& ranks) -> std::optional<TickFailure> {
    if (failed) ++ticks_after_failure;
    seen = ranks;
    if (++ticks < 10) return std::nullopt;
    failed = true;
    return TickFailure{1, "rank 1 is stuck"};
  };
  const auto t0 = Clock::now();
  const SupervisorResult r = sup.run({sleep_until_stopped, sleep_until_stopped}, hook);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.failed_rank, std::optional<int>(1));
  EXPECT_EQ(r.message, "rank 1 is stuck");
  EXPECT_TRUE(r.ranks[0].signaled && r.ranks[0].signal == SIGTERM);
  EXPECT_TRUE(r.ranks[1].signaled && r.ranks[1].signal == SIGTERM);
  EXPECT_EQ(ticks_after_failure, 0);  // a stop under way: the hook is not asked again
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].rank, 1);
  EXPECT_EQ(seen[1].pid, r.ranks[1].pid);
  EXPECT_TRUE(seen[0].running && seen[1].running);
  EXPECT_FALSE(exists_in_dev_shm(name));
  EXPECT_LT(ms_since(t0), 5000.0);
}

// `nanovllm-launch ... 2>&1 | head`: once the reader is gone, the launcher's next log line
// must not kill it with SIGPIPE, which would leave the segment behind (before: it did).
TEST(Supervisor, ClosedStderrDoesNotKillTheLauncherWhichStillRemovesTheSegment) {
  int name_pipe[2];
  ASSERT_EQ(::pipe(name_pipe), 0);
  const pid_t launcher = fork_launcher([&] {
    int broken[2];
    if (::pipe(broken) != 0) return 98;
    ::close(broken[0]);
    ::dup2(broken[1], STDERR_FILENO);
    configure_logging(spdlog::level::info, "launcher");
    Supervisor sup(test_options());
    char name[128] = {};
    std::snprintf(name, sizeof(name), "%s", sup.segment().name().c_str());
    ::write(name_pipe[1], name, sizeof(name));
    spdlog::info("segment {} created", name);  // as the launcher logs it, before the ranks
    // The failure is logged (to the closed stderr) before the teardown.
    return sup
        .run({sleep_until_stopped,
              [](int) {
                ::usleep(100 * 1000);
                return 3;
              }})
        .exit_code;
  });
  ::close(name_pipe[1]);
  char name[128];
  ASSERT_TRUE(read_exact(name_pipe[0], name, sizeof(name)));
  ::close(name_pipe[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_FALSE(exists_in_dev_shm(name));
}

TEST(Supervisor, LauncherKilledBySigkillTakesItsRanksAndTheNextRunSweepsTheSegment) {
  int pipe_fd[2];
  ASSERT_EQ(::pipe(pipe_fd), 0);
  // Its own prefix: a concurrently running test's sweep must not take the segment first.
  SupervisorOptions options = test_options();
  options.segment_prefix = "nvtest-supkill";
  const pid_t launcher = fork_launcher([&] {
    Supervisor sup(options);
    char name[128] = {};
    std::snprintf(name, sizeof(name), "%s", sup.segment().name().c_str());
    ::write(pipe_fd[1], name, sizeof(name));
    auto rank_main = [&](int rank) {
      const pid_t me = ::getpid();
      ::write(pipe_fd[1], &me, sizeof(me));
      return sleep_until_stopped(rank);
    };
    return sup.run({rank_main, rank_main}).exit_code;
  });
  char name[128];
  pid_t ranks[2];
  ASSERT_TRUE(read_exact(pipe_fd[0], name, sizeof(name)));
  ASSERT_TRUE(read_exact(pipe_fd[0], &ranks[0], sizeof(pid_t)));
  ASSERT_TRUE(read_exact(pipe_fd[0], &ranks[1], sizeof(pid_t)));
  ::kill(launcher, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  const auto t0 = Clock::now();
  while ((process_alive(ranks[0]) || process_alive(ranks[1])) && ms_since(t0) < 5000)
    std::this_thread::sleep_for(5ms);
  std::printf("[ figures  ] launcher SIGKILL -> ranks gone after %.0f ms\n", ms_since(t0));
  EXPECT_FALSE(process_alive(ranks[0]));
  EXPECT_FALSE(process_alive(ranks[1]));
  // Nobody removed the segment; the next run's sweep does, and runs normally.
  EXPECT_TRUE(exists_in_dev_shm(name));
  Supervisor next(options);
  EXPECT_FALSE(exists_in_dev_shm(name));
  EXPECT_EQ(next.run({[](int) { return 0; }}).exit_code, 0);
  ::close(pipe_fd[0]);
  ::close(pipe_fd[1]);
}

// A launcher whose rank 0 streams `messages` tagged with `tag` to rank 1, which checks them;
// `fail_after` >= 0 makes rank 1 exit 5 after that many messages.
int ring_run(uint8_t tag, int messages, int fail_after) {
  const RingConfig config{.num_readers = 1, .slot_count = 4, .slot_bytes = 64};
  SupervisorOptions o = test_options();
  o.segment_bytes = ring_region_bytes(config);
  Supervisor sup(o);
  void* region = sup.segment().data();
  ring_init(region, o.segment_bytes, config);
  const size_t bytes = o.segment_bytes;
  auto writer = [&](int) -> int {
    RingWriter w(region, bytes, config.payload_schema);
    for (int i = 0; i < messages; ++i) {
      std::vector<uint8_t> m(1 + i % 60, tag);
      m[0] = static_cast<uint8_t>(i);
      w.write(m);
    }
    return 0;
  };
  auto reader = [&](int) -> int {
    RingReader rd(region, bytes, config.payload_schema, 0);
    std::vector<uint8_t> m;
    for (int i = 0; i < messages; ++i) {
      rd.read(m);
      if (i == fail_after) return 5;
      if (m.size() != size_t(1 + i % 60) || m[0] != uint8_t(i)) return 6;
      for (size_t k = 1; k < m.size(); ++k)
        if (m[k] != tag) return 6;
    }
    return 0;
  };
  return sup.run({writer, reader}).exit_code;
}

TEST(Supervisor, TwoConcurrentRunsDoNotInterfere) {
  const pid_t a = fork_launcher([] { return ring_run('A', 20000, -1); });
  const pid_t b = fork_launcher([] { return ring_run('B', 20000, 3000); });  // fails midway
  const pid_t c = fork_launcher([] { return ring_run('C', 20000, -1); });
  int sa = 0, sb = 0, sc = 0;
  ASSERT_EQ(::waitpid(a, &sa, 0), a);
  ASSERT_EQ(::waitpid(b, &sb, 0), b);
  ASSERT_EQ(::waitpid(c, &sc, 0), c);
  EXPECT_TRUE(WIFEXITED(sa) && WEXITSTATUS(sa) == 0) << sa;
  EXPECT_TRUE(WIFEXITED(sb) && WEXITSTATUS(sb) == 1) << sb;
  EXPECT_TRUE(WIFEXITED(sc) && WEXITSTATUS(sc) == 0) << sc;
}

}  // namespace
}  // namespace nanovllm
