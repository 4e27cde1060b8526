// bench/nanovllm_bench_barrier.h across forked processes, as the replicas' rank 0s use it:
// nobody passes barrier k before every replica arrived at it (whatever the order and delays);
// a replica that left makes the others give up naming it; a replica that never comes makes
// them give up after the timeout, naming it.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/nanovllm_bench_barrier.h"

namespace nanovllm::bench {
namespace {

using Clock = std::chrono::steady_clock;

double now_s() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// Runs `body(d)` in `n` forked processes; returns their exit codes (0 when body returned
// normally, 3 when it threw; what it threw goes to stderr).
std::vector<int> fork_replicas(int n, const std::function<void(int)>& body) {
  std::vector<pid_t> pids;
  for (int d = 0; d < n; ++d) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int rc = 0;
      try {
        body(d);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        rc = 3;
      }
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (const pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  return codes;
}

// Shared between the forked processes: when each replica arrived at and passed each barrier.
constexpr int kReplicas = 3, kPhases = 6;
struct Times {
  double arrived[kReplicas][kPhases];
  double passed[kReplicas][kPhases];
};

TEST(ReplicaBarrier, NobodyPassesBeforeEveryReplicaArrived) {
  void* mem =
      ::mmap(nullptr, sizeof(Times), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* times = static_cast<Times*>(mem);
  ReplicaBarrier barrier(kReplicas, std::chrono::seconds(30));
  const std::vector<int> codes = fork_replicas(kReplicas, [&](int d) {
    for (int k = 0; k < kPhases; ++k) {
      // A different replica is late at each barrier.
      if (k % kReplicas == d) std::this_thread::sleep_for(std::chrono::milliseconds(30));
      times->arrived[d][k] = now_s();
      barrier.arrive_and_wait(d, "phase " + std::to_string(k));
      times->passed[d][k] = now_s();
    }
    barrier.leave(d);
  });
  EXPECT_EQ(codes, std::vector<int>(kReplicas, 0));
  for (int k = 0; k < kPhases; ++k)
    for (int d = 0; d < kReplicas; ++d)
      for (int e = 0; e < kReplicas; ++e)
        EXPECT_GE(times->passed[d][k], times->arrived[e][k])
            << "replica " << d << " passed barrier " << k << " before replica " << e << " arrived";
  ::munmap(mem, sizeof(Times));
}

TEST(ReplicaBarrier, AReplicaThatLeftIsNamedByTheOthers) {
  ReplicaBarrier barrier(3, std::chrono::seconds(30));
  testing::internal::CaptureStderr();
  const std::vector<int> codes = fork_replicas(3, [&](int d) {
    barrier.arrive_and_wait(d, "run 1");
    if (d == 2) {
      barrier.leave(d);  // fails after run 1: never reaches run 2
      return;
    }
    barrier.arrive_and_wait(d, "run 2");
  });
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(codes, (std::vector<int>{3, 3, 0}));
  EXPECT_NE(err.find("replica 0: replica(s) 2 ended before run 2"), std::string::npos) << err;
  EXPECT_NE(err.find("replica 1: replica(s) 2 ended before run 2"), std::string::npos) << err;
}

TEST(ReplicaBarrier, AReplicaThatNeverComesTimesOutNamingIt) {
  ReplicaBarrier barrier(2, std::chrono::milliseconds(200));
  testing::internal::CaptureStderr();
  const auto start = Clock::now();
  // Replica 1 is busy elsewhere (it does not leave): replica 0 gives up after the timeout.
  const std::vector<int> codes = fork_replicas(2, [&](int d) {
    if (d == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      return;
    }
    barrier.arrive_and_wait(d, "nanovllm run 1/3");
  });
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(codes, (std::vector<int>{3, 0}));
  EXPECT_NE(err.find("replica 0: waited 0.2 s before nanovllm run 1/3 for replica(s) 1, which "
                     "never arrived"),
            std::string::npos)
      << err;
  EXPECT_GE(waited, 0.2);
}

}  // namespace
}  // namespace nanovllm::bench
