#include "bench/nanovllm_bench_barrier.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>
#include <thread>

#include "bench/nanovllm_bench_stop.h"

namespace nanovllm::bench {

namespace {

using Clock = std::chrono::steady_clock;

// How long a waiting replica sleeps between looks: small against a run (seconds), so the
// replicas start within a fraction of a millisecond of each other, and cheap on the CPU
// backend, where the waiting processes share the cores with the ones still running.
constexpr std::chrono::microseconds kPoll{50};

std::string replica_list(const std::string& list, int replica) {
  return list.empty() ? std::to_string(replica) : list + ", " + std::to_string(replica);
}

}  // namespace

ReplicaBarrier::ReplicaBarrier(int replicas, std::chrono::milliseconds timeout)
    : replicas_(replicas), timeout_(timeout), owner_(::getpid()) {
  void* base = ::mmap(nullptr, sizeof(Slot) * static_cast<size_t>(replicas), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED)
    throw std::runtime_error(std::string("replica barrier: mmap failed: ") + std::strerror(errno));
  slots_ = static_cast<Slot*>(base);
  for (int d = 0; d < replicas; ++d) {
    new (&slots_[d].arrived) std::atomic<int64_t>(0);
    new (&slots_[d].left) std::atomic<int32_t>(0);
  }
}

ReplicaBarrier::~ReplicaBarrier() {
  ::munmap(slots_, sizeof(Slot) * static_cast<size_t>(replicas_));
}

double ReplicaBarrier::arrive_and_wait(int replica, const std::string& what) {
  const int64_t phase = next_++;
  slots_[replica].arrived.store(phase, std::memory_order_release);
  const auto start = Clock::now();
  const std::string me = "replica " + std::to_string(replica);
  for (;;) {
    std::string waiting, gone;  // replicas not there yet; those of them that left
    for (int d = 0; d < replicas_; ++d) {
      if (slots_[d].arrived.load(std::memory_order_acquire) >= phase) continue;
      waiting = replica_list(waiting, d);
      if (slots_[d].left.load(std::memory_order_acquire) != 0) gone = replica_list(gone, d);
    }
    if (waiting.empty()) return std::chrono::duration<double>(Clock::now() - start).count();
    if (!gone.empty())
      throw std::runtime_error(me + ": replica(s) " + gone + " ended before " + what +
                               "; the replicas must run it together");
    throw_if_stopped();  // nanovllm-bench asked to stop: BenchStopped, the body says so
    if (::getppid() != owner_)
      throw std::runtime_error(me + ": the benchmark process that started it is gone (while " +
                               "waiting before " + what + ")");
    if (Clock::now() - start > timeout_)
      throw std::runtime_error(
          fmt::format("{}: waited {:g} s before {} for replica(s) {}, which "
                      "never arrived",
                      me, std::chrono::duration<double>(timeout_).count(), what, waiting));
    std::this_thread::sleep_for(kPoll);
  }
}

void ReplicaBarrier::leave(int replica) {
  slots_[replica].left.store(1, std::memory_order_release);
}

}  // namespace nanovllm::bench
