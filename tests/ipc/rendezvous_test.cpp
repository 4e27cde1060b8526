// The rendezvous across forked processes: one publisher hands 128 bytes (an ncclUniqueId's
// size) to three waiters, who then see it exit through check_publisher_alive; an abandoned
// rendezvous lets the waiters leave cleanly; a publisher killed before publishing is an
// IpcError naming it, within the bound, not a hang.
#include "ipc/rendezvous.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "ipc/ipc_error.h"
#include "kernels/check.h"
#include "tests/ipc/child_processes.h"

namespace nanovllm {
namespace {

using namespace std::chrono_literals;
using testing::exited_ok;
using testing::fork_children;
using testing::wait_children;

constexpr int kWaiters = 3;

// Anonymous shared memory: inherited by forked children like the launcher's segment.
struct SharedRegion {
  SharedRegion() : bytes(rendezvous_region_bytes()) {
    data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    rendezvous_init(data, bytes);
  }
  ~SharedRegion() { ::munmap(data, bytes); }
  void* data;
  size_t bytes;
};

std::vector<uint8_t> payload_128() {
  std::vector<uint8_t> p(128);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(i * 37 + 11);
  return p;
}

TEST(Rendezvous, PublishedBytesReachEveryWaiter) {
  SharedRegion region;
  // Children 0..2 wait, child 3 publishes after they have started waiting.
  const auto pids = fork_children(kWaiters + 1, [&](int i) -> int {
    if (i == kWaiters) {
      RendezvousPublisher publisher(region.data, region.bytes);
      ::usleep(100 * 1000);
      publisher.publish(payload_128());
      return 0;
    }
    RendezvousWaiter waiter(region.data, region.bytes, WaitPolicy{.poll = 20ms, .timeout = 20s});
    const RendezvousResult got = waiter.wait();
    if (got.outcome != RendezvousOutcome::kPublished) return 1;
    if (got.payload != payload_128()) {
      std::fprintf(stderr, "waiter %d: payload of %zu bytes differs\n", i, got.payload.size());
      return 2;
    }
    if (waiter.wait().payload != payload_128()) return 3;  // a second wait sees it again
    // After the hand-off the publisher is watched through check_publisher_alive: it exits.
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < 10s) {
      try {
        waiter.check_publisher_alive();
      } catch (const IpcError& e) {
        const std::string pid = std::to_string(waiter.publisher_pid());
        return std::string(e.what()).find("rank 0 (pid " + pid + ") is gone") != std::string::npos
                   ? 0
                   : 4;
      }
      ::usleep(5 * 1000);
    }
    return 5;
  });
  const auto status = wait_children(pids, 30s);
  for (int i = 0; i <= kWaiters; ++i) EXPECT_TRUE(exited_ok(status[i])) << "child " << i;
}

TEST(Rendezvous, AbandonLetsTheWaitersLeaveCleanly) {
  SharedRegion region;
  const auto pids = fork_children(kWaiters + 1, [&](int i) -> int {
    if (i == kWaiters) {
      RendezvousPublisher publisher(region.data, region.bytes);
      ::usleep(50 * 1000);
      publisher.abandon();
      publisher.publish(payload_128());  // too late: a CHECK failure (exit code 99)
      return 0;
    }
    RendezvousWaiter waiter(region.data, region.bytes, WaitPolicy{.poll = 20ms, .timeout = 20s});
    const RendezvousResult got = waiter.wait();
    return got.outcome == RendezvousOutcome::kAbandoned && got.payload.empty() ? 0 : 1;
  });
  const auto status = wait_children(pids, 30s);
  for (int i = 0; i < kWaiters; ++i) EXPECT_TRUE(exited_ok(status[i])) << "waiter " << i;
  EXPECT_TRUE(WIFEXITED(status[kWaiters]) && WEXITSTATUS(status[kWaiters]) == 99)
      << "publishing after abandon must fail";
}

TEST(Rendezvous, PublisherLeavingWithoutPublishingAbandons) {
  SharedRegion region;
  const auto pids = fork_children(2, [&](int i) -> int {
    if (i == 1) {
      RendezvousPublisher publisher(region.data, region.bytes);
      throw std::runtime_error("request validation failed");  // the destructor abandons
    }
    RendezvousWaiter waiter(region.data, region.bytes, WaitPolicy{.poll = 20ms, .timeout = 20s});
    return waiter.wait().outcome == RendezvousOutcome::kAbandoned ? 0 : 1;
  });
  const auto status = wait_children(pids, 30s);
  EXPECT_TRUE(exited_ok(status[0]));
}

TEST(Rendezvous, KilledPublisherIsAnErrorNamingItWithinTheBound) {
  SharedRegion region;
  const auto publisher = fork_children(1, [&](int) -> int {
    RendezvousPublisher p(region.data, region.bytes);
    ::pause();  // registered, never publishes
    return 0;
  });
  const std::string pid = std::to_string(publisher[0]);
  const auto waiters = fork_children(kWaiters, [&](int i) -> int {
    RendezvousWaiter waiter(region.data, region.bytes, WaitPolicy{.poll = 20ms, .timeout = 10s});
    const auto t0 = std::chrono::steady_clock::now();
    try {
      waiter.wait();
    } catch (const IpcError& e) {
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (i == 0)
        std::printf("[ figures  ] dead publisher noticed after %.0f ms: %s\n", ms, e.what());
      const std::string what = e.what();
      return what.find("publisher") != std::string::npos && what.find(pid) != std::string::npos &&
                     ms < 5000
                 ? 0
                 : 3;
    }
    return 4;  // returned although nothing was published
  });
  ::usleep(200 * 1000);  // the waiters are inside wait()
  ::kill(publisher[0], SIGKILL);
  const auto status = wait_children(waiters, 20s);
  for (int i = 0; i < kWaiters; ++i) EXPECT_TRUE(exited_ok(status[i])) << "waiter " << i;
  wait_children(publisher, 5s);
}

TEST(Rendezvous, TimeoutAndAbortEndTheWait) {
  SharedRegion region;
  RendezvousWaiter waiter(region.data, region.bytes, WaitPolicy{.poll = 10ms, .timeout = 100ms});
  try {
    waiter.wait();
    FAIL() << "no timeout";
  } catch (const IpcError& e) {
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
  }
  rendezvous_abort(region.data);
  EXPECT_THROW(waiter.wait(), IpcError);
}

TEST(Rendezvous, OversizedPayloadOrSecondPublisherIsACheckFailure) {
  SharedRegion region;
  RendezvousPublisher publisher(region.data, region.bytes);
  EXPECT_THROW(publisher.publish(std::vector<uint8_t>(kRendezvousMaxPayload + 1)), CheckError);
  EXPECT_THROW(RendezvousPublisher(region.data, region.bytes), CheckError);
  publisher.publish(std::vector<uint8_t>(kRendezvousMaxPayload, 7));
  RendezvousWaiter waiter(region.data, region.bytes);
  EXPECT_EQ(waiter.wait().payload.size(), kRendezvousMaxPayload);
}

}  // namespace
}  // namespace nanovllm
