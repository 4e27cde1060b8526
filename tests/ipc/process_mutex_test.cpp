// The process-shared mutex the replicas of a data-parallel run append result lines under:
// it excludes processes (a read-modify-write that is not atomic loses no update), and a
// holder killed while holding it does not leave the others hanging.
#include "ipc/process_mutex.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <new>
#include <thread>

#include "tests/ipc/child_processes.h"

namespace nanovllm {
namespace {

using namespace std::chrono_literals;

struct Shared {
  ProcessMutex mutex;
  volatile int64_t counter;  // plain: only the mutex keeps increments whole
  volatile int held;         // the dying child has the lock
};

Shared* map_shared() {
  void* p =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(p, MAP_FAILED);
  auto* s = new (p) Shared{};
  process_mutex_init(&s->mutex);
  return s;
}

TEST(ProcessMutex, ExcludesProcessesSoNoIncrementIsLost) {
  Shared* s = map_shared();
  constexpr int kChildren = 4, kIncrements = 20000;
  const auto pids = testing::fork_children(kChildren, [s](int) {
    for (int i = 0; i < kIncrements; ++i) {
      const ProcessLock lock(s->mutex);
      const int64_t v = s->counter;
      if (i % 1000 == 0) std::this_thread::yield();  // widen the window a lost update needs
      s->counter = v + 1;
    }
    return 0;
  });
  for (int st : testing::wait_children(pids, 60s)) EXPECT_TRUE(testing::exited_ok(st));
  EXPECT_EQ(s->counter, int64_t{kChildren} * kIncrements);
  ::munmap(s, sizeof(Shared));
}

TEST(ProcessMutex, AHolderKilledWhileHoldingItDoesNotBlockTheOthers) {
  Shared* s = map_shared();
  const auto holder = testing::fork_children(1, [s](int) {
    const ProcessLock lock(s->mutex);
    s->held = 1;
    for (;;) ::pause();  // killed here, the lock held
    return 0;
  });
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (s->held == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(s->held, 1);
  ::kill(holder[0], SIGKILL);
  testing::wait_children(holder, 10s);
  // The next locker (another process, as in a run) gets the lock and can keep using it.
  const auto next = testing::fork_children(1, [s](int) {
    for (int i = 0; i < 3; ++i) {
      const ProcessLock lock(s->mutex);
      s->counter = s->counter + 1;
    }
    return 0;
  });
  for (int st : testing::wait_children(next, 10s)) EXPECT_TRUE(testing::exited_ok(st));
  EXPECT_EQ(s->counter, 3);
  ::munmap(s, sizeof(Shared));
}

}  // namespace
}  // namespace nanovllm
