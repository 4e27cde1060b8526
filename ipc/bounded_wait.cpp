#include "ipc/bounded_wait.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>

#include "kernels/check.h"

namespace nanovllm {
namespace {

timespec monotonic_deadline(std::chrono::nanoseconds d) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const int64_t ns = static_cast<int64_t>(now.tv_nsec) + d.count() % 1000000000;
  timespec t{};
  t.tv_sec = now.tv_sec + static_cast<time_t>(d.count() / 1000000000 + ns / 1000000000);
  t.tv_nsec = static_cast<long>(ns % 1000000000);
  return t;
}

}  // namespace

bool sem_wait_for(sem_t* sem, std::chrono::nanoseconds d) {
  const timespec deadline = monotonic_deadline(d);
  for (;;) {
    if (::sem_clockwait(sem, CLOCK_MONOTONIC, &deadline) == 0) return true;
    if (errno == ETIMEDOUT) return false;
    CHECK_MSG(errno == EINTR, "sem_clockwait failed: errno " << errno);
  }
}

void futex_wait_for(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds d) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  timespec rel{};  // FUTEX_WAIT takes a relative CLOCK_MONOTONIC timeout
  rel.tv_sec = static_cast<time_t>(d.count() / 1000000000);
  rel.tv_nsec = static_cast<long>(d.count() % 1000000000);
  // EAGAIN (word already changed), EINTR and ETIMEDOUT all mean "look again".
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &rel, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace nanovllm
