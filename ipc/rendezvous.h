// One-shot hand-off of a few bytes from rank 0 to every other rank through the run's
// shared-memory segment: rank 0 publishes the NCCL unique id once, ranks >= 1 wait for it.
// Rank 0 may instead abandon the rendezvous (e.g. the requests failed validation and nothing
// will run): the waiters then return "abandoned" and exit cleanly. Waits are bounded like the
// ring's (ipc/bounded_wait.h): a dead publisher, a dead launcher, an abort or the timeout end
// them with IpcError. Protocol: ipc/README.md.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "ipc/bounded_wait.h"

namespace nanovllm {

inline constexpr size_t kRendezvousMaxPayload = 256;  // an ncclUniqueId is 128 bytes

// Bytes of the region (a multiple of 64).
size_t rendezvous_region_bytes();
// Lays the region out in zeroed shared memory; once, by the launcher, before fork. The
// caller's pid is recorded as the launcher that every waiter watches.
void rendezvous_init(void* region, size_t bytes);

// Rank 0's end. Construct it early (before loading weights): from then on waiters watch the
// publisher's pid, so its death ends their wait even before anything was published.
class RendezvousPublisher {
 public:
  RendezvousPublisher(void* region, size_t bytes);
  // Abandons the rendezvous when neither publish() nor abandon() was called (rank 0 is
  // leaving, e.g. by an exception), so that the waiters do not wait for a dead publisher.
  ~RendezvousPublisher();
  RendezvousPublisher(const RendezvousPublisher&) = delete;
  RendezvousPublisher& operator=(const RendezvousPublisher&) = delete;

  // payload: up to kRendezvousMaxPayload bytes, published once (a second call is a CHECK).
  void publish(std::span<const uint8_t> payload);
  // Tells every waiter that nothing will be published; a no-op after publish().
  void abandon();

 private:
  void* region_;
  bool done_ = false;
};

enum class RendezvousOutcome { kPublished, kAbandoned };

struct RendezvousResult {
  RendezvousOutcome outcome = RendezvousOutcome::kAbandoned;
  std::vector<uint8_t> payload;  // the published bytes; empty when abandoned
};

// The end of ranks >= 1 (any number of them; each reads the same bytes).
class RendezvousWaiter {
 public:
  RendezvousWaiter(void* region, size_t bytes, WaitPolicy policy = {});

  // Waits for publish() or abandon(). Between two sleeps (policy.poll) checks the publisher's
  // pid, the launcher, the abort flag and then calls `check_peers` (when set; it throws to
  // stop the wait, e.g. IpcError). Throws IpcError on a dead publisher (naming its pid) or
  // launcher, on abort, or once policy.timeout has passed.
  RendezvousResult wait(const std::function<void()>& check_peers = {});

  // After the hand-off: throws IpcError when rank 0 (the publisher) or the launcher is gone,
  // or the region was aborted. The NCCL workers' stop predicate (rank/collective_watchdog.h).
  void check_publisher_alive() const;
  pid_t publisher_pid() const;  // 0 until rank 0 registered

 private:
  void check_publisher() const;
  void* region_;
  WaitPolicy policy_;
};

// Makes every current and later wait on the region throw IpcError("rendezvous aborted").
void rendezvous_abort(void* region);

}  // namespace nanovllm
