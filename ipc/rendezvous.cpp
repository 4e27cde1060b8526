#include "ipc/rendezvous.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <new>
#include <string>

#include "ipc/ipc_error.h"
#include "ipc/liveness.h"
#include "kernels/check.h"

namespace nanovllm {
namespace {

constexpr uint32_t kRendezvousMagic = 0x5652564e;  // "NVRV" little-endian
constexpr uint32_t kRendezvousVersion = 1;

// The futex word's values. It only ever moves away from kPending, once.
constexpr uint32_t kPending = 0;
constexpr uint32_t kPublished = 1;
constexpr uint32_t kAbandoned = 2;

// Region layout: one control line, then the payload (kRendezvousMaxPayload bytes).
struct alignas(64) RendezvousRegion {
  uint32_t magic;
  uint32_t version;
  int32_t launcher_pid;
  std::atomic<int32_t> publisher_pid;  // 0 until rank 0 constructs its RendezvousPublisher
  std::atomic<uint32_t> state;         // kPending -> kPublished | kAbandoned (futex word)
  std::atomic<uint32_t> aborted;       // rendezvous_abort() was called
  uint32_t length;                     // payload bytes, valid once state == kPublished
  alignas(64) uint8_t payload[kRendezvousMaxPayload];
};
static_assert(sizeof(RendezvousRegion) % 64 == 0);
static_assert(std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<int32_t>::is_always_lock_free,
              "atomics in shared memory must be lock-free (address-free)");

RendezvousRegion* checked_region(void* region, size_t bytes) {
  CHECK(region != nullptr);
  CHECK_GE(bytes, sizeof(RendezvousRegion));
  auto* r = static_cast<RendezvousRegion*>(region);
  CHECK_MSG(r->magic == kRendezvousMagic && r->version == kRendezvousVersion,
            "shared memory holds no initialised rendezvous (magic " << std::hex << r->magic << ")");
  return r;
}

// Moves the state from kPending to `to` once and wakes every waiter. false: it had moved.
bool settle(RendezvousRegion* r, uint32_t to) {
  uint32_t expected = kPending;
  if (!r->state.compare_exchange_strong(expected, to, std::memory_order_acq_rel)) return false;
  futex_wake_all(&r->state);
  return true;
}

}  // namespace

size_t rendezvous_region_bytes() {
  return sizeof(RendezvousRegion);
}

void rendezvous_init(void* region, size_t bytes) {
  CHECK(region != nullptr);
  CHECK_MSG(reinterpret_cast<uintptr_t>(region) % 64 == 0,
            "rendezvous region must be 64-byte aligned");
  CHECK_LE(rendezvous_region_bytes(), bytes);
  auto* r = new (region) RendezvousRegion{};
  r->launcher_pid = static_cast<int32_t>(::getpid());
  // Published last: a process that sees the magic sees a complete layout.
  std::atomic_thread_fence(std::memory_order_release);
  r->version = kRendezvousVersion;
  r->magic = kRendezvousMagic;
}

void rendezvous_abort(void* region) {
  auto* r = static_cast<RendezvousRegion*>(region);
  r->aborted.store(1, std::memory_order_release);
  futex_wake_all(&r->state);
}

// ---------------------------------------------------------------------------------------------

RendezvousPublisher::RendezvousPublisher(void* region, size_t bytes) : region_(region) {
  RendezvousRegion* r = checked_region(region, bytes);
  int32_t expected = 0;
  CHECK_MSG(r->publisher_pid.compare_exchange_strong(expected, ::getpid()),
            "the rendezvous already has a publisher (pid " << expected << ")");
}

RendezvousPublisher::~RendezvousPublisher() {
  if (!done_) abandon();
}

void RendezvousPublisher::publish(std::span<const uint8_t> payload) {
  auto* r = static_cast<RendezvousRegion*>(region_);
  CHECK_MSG(payload.size() <= kRendezvousMaxPayload, "rendezvous payload of "
                                                         << payload.size() << " bytes exceeds "
                                                         << kRendezvousMaxPayload);
  CHECK_MSG(r->state.load(std::memory_order_acquire) == kPending,
            "rendezvous published or abandoned twice");
  if (!payload.empty()) std::memcpy(r->payload, payload.data(), payload.size());
  r->length = static_cast<uint32_t>(payload.size());
  // The release in settle() orders the payload before the state a waiter acquires.
  CHECK(settle(r, kPublished));
  done_ = true;
}

void RendezvousPublisher::abandon() {
  settle(static_cast<RendezvousRegion*>(region_), kAbandoned);
  done_ = true;
}

// ---------------------------------------------------------------------------------------------

RendezvousWaiter::RendezvousWaiter(void* region, size_t bytes, WaitPolicy policy)
    : region_(region), policy_(policy) {
  checked_region(region, bytes);
}

void RendezvousWaiter::check_publisher() const {
  const auto* r = static_cast<const RendezvousRegion*>(region_);
  if (r->aborted.load(std::memory_order_acquire) != 0)
    throw IpcError("rendezvous aborted: another rank failed");
  const pid_t publisher = r->publisher_pid.load(std::memory_order_acquire);
  // A publisher that settled and then exited is no error: the state is read again first.
  if (publisher != 0 && !process_alive(publisher) &&
      r->state.load(std::memory_order_acquire) == kPending)
    throw IpcError("rendezvous publisher (rank 0, pid " + std::to_string(publisher) +
                   ") died before publishing; pid " + std::to_string(::getpid()) +
                   " stops waiting for it");
  check_launcher_alive(r->launcher_pid);
}

pid_t RendezvousWaiter::publisher_pid() const {
  return static_cast<const RendezvousRegion*>(region_)->publisher_pid.load(
      std::memory_order_acquire);
}

void RendezvousWaiter::check_publisher_alive() const {
  const auto* r = static_cast<const RendezvousRegion*>(region_);
  if (r->aborted.load(std::memory_order_acquire) != 0)
    throw IpcError("rendezvous aborted: another rank failed");
  const pid_t publisher = publisher_pid();
  if (publisher != 0 && !process_alive(publisher))
    throw IpcError("rank 0 (pid " + std::to_string(publisher) + ") is gone");
  check_launcher_alive(r->launcher_pid);
}

RendezvousResult RendezvousWaiter::wait(const std::function<void()>& check_peers) {
  auto* r = static_cast<RendezvousRegion*>(region_);
  wait_bounded(
      policy_, "rendezvous waiting for rank 0",
      [&](std::chrono::nanoseconds d) {
        if (r->state.load(std::memory_order_acquire) != kPending) return true;
        if (r->aborted.load(std::memory_order_acquire) != 0) return false;  // check_publisher
        futex_wait_for(&r->state, kPending, d);
        return r->state.load(std::memory_order_acquire) != kPending;
      },
      [&] {
        check_publisher();
        if (check_peers) check_peers();
      });
  RendezvousResult result;
  if (r->state.load(std::memory_order_acquire) == kAbandoned) return result;
  result.outcome = RendezvousOutcome::kPublished;
  result.payload.assign(r->payload, r->payload + r->length);
  return result;
}

}  // namespace nanovllm
