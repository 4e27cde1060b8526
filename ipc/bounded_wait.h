// Every wait in ipc/ is bounded: it sleeps at most `poll` at a time, then checks that its
// peers are alive (which throws IpcError when one is not) and that the overall limit has not
// passed. Semaphores are waited with sem_clockwait on CLOCK_MONOTONIC, because Boost 1.74's
// timed_wait uses the wall clock (a clock step would stretch or cut the wait).
#pragma once

#include <semaphore.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "ipc/ipc_error.h"

namespace nanovllm {

struct WaitPolicy {
  std::chrono::milliseconds poll{50};    // longest sleep between two liveness checks
  std::chrono::milliseconds timeout{0};  // overall limit of one wait; 0 = none
};

// Waits on a process-shared semaphore for at most `d`. true: acquired. EINTR is retried.
bool sem_wait_for(sem_t* sem, std::chrono::nanoseconds d);

// Shared (not private) futex on a word other processes may wait on too. Returns when the word
// differs from `expected`, on a wake-up, or after `d`; the caller re-checks the word.
void futex_wait_for(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds d);
void futex_wake_all(std::atomic<uint32_t>* word);

// Calls try_once(poll) until it returns true. Between tries calls check_peers() (which throws
// on a dead peer) and throws IpcError naming `what` once policy.timeout has passed.
template <typename TryOnce, typename CheckPeers>
void wait_bounded(const WaitPolicy& policy, const char* what, TryOnce&& try_once,
                  CheckPeers&& check_peers) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  while (!try_once(std::chrono::nanoseconds(policy.poll))) {
    check_peers();
    if (policy.timeout.count() > 0 && Clock::now() - start >= policy.timeout)
      throw IpcError(std::string(what) + ": timed out after " +
                     std::to_string(policy.timeout.count()) + " ms");
  }
}

}  // namespace nanovllm
