#include "launcher/worker_group.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "engine/job/interrupt.h"
#include "ipc/broadcast_ring.h"
#include "ipc/rendezvous.h"
#include "launcher/group_segment.h"

extern char** environ;

namespace nanovllm {

namespace {

using namespace std::chrono_literals;

std::string segment_prefix() {
  const char* prefix = std::getenv("NANOVLLM_SHM_PREFIX");
  return prefix && *prefix ? prefix : "nanovllm-py";
}

std::string describe_status(int rank, pid_t pid, int status) {
  const std::string who = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = ::sigabbrev_np(sig);
    return who + " was killed by signal " + std::to_string(sig) + " (SIG" +
           (abbrev ? abbrev : "?") + ")";
  }
  return who + " exited with code " + std::to_string(WEXITSTATUS(status));
}

// Spawns one worker in its own process group with default signal dispositions.
pid_t spawn_worker(const std::vector<std::string>& args) {
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  ::sigemptyset(&none);
  ::sigemptyset(&defaults);
  for (int sig : kStopSignals) ::sigaddset(&defaults, sig);
  ::sigaddset(&defaults, SIGPIPE);
  ::sigaddset(&defaults, SIGCHLD);
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setsigdefault(&attr, &defaults);
  ::posix_spawnattr_setpgroup(&attr, 0);
  ::posix_spawnattr_setflags(
      &attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0], nullptr, &attr, argv.data(), environ);
  ::posix_spawnattr_destroy(&attr);
  if (rc != 0)
    throw std::runtime_error("cannot start the worker '" + args[0] + "': " + std::strerror(rc));
  return pid;
}

}  // namespace

WorkerGroup::WorkerGroup(const RunSettings& s, const std::filesystem::path& worker,
                         const std::string& options_json)
    : layout_(run_layout(s, 1)), segment_([&] {
        sweep_stale_segments(segment_prefix());
        return ShmSegment::create(make_segment_name(segment_prefix()), layout_.total);
      }()) {
  segment_map_ = init_run_segment(segment_.data(), layout_);
  init_group_regions(segment_map_, layout_, s);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(worker, ec)) {
    ShmSegment::remove(segment_.name());
    throw std::runtime_error("the worker binary '" + worker.string() +
                             "' does not exist (tensor_parallel_size > 1 needs nanovllm-worker)");
  }
  try {
    for (int rank = 1; rank < s.tp_size; ++rank) {
      pids_.push_back(spawn_worker({worker.string(), "--segment", segment_.name(), "--rank",
                                    std::to_string(rank), "--parent", std::to_string(::getpid()),
                                    "--options", options_json}));
      reaped_.push_back(false);
    }
  } catch (...) {
    stopping_ = true;
    for (pid_t pid : pids_) ::kill(pid, SIGKILL);
    for (pid_t pid : pids_) ::waitpid(pid, nullptr, 0);
    ShmSegment::remove(segment_.name());
    throw;
  }
  watcher_ = std::thread([this] { watch(); });
}

void WorkerGroup::on_death(std::function<void()> abort_waits) {
  std::lock_guard<std::mutex> lock(mutex_);
  abort_waits_ = std::move(abort_waits);
}

std::optional<std::string> WorkerGroup::dead_worker() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return death_;
}

void WorkerGroup::watch() {
  while (!stopping_) {
    for (size_t i = 0; i < pids_.size(); ++i) {
      int status = 0;
      if (reaped_[i] || ::waitpid(pids_[i], &status, WNOHANG) != pids_[i]) continue;
      reaped_[i] = true;
      if (stopping_) continue;
      std::function<void()> abort_waits;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!death_) death_ = describe_status(static_cast<int>(i) + 1, pids_[i], status);
        abort_waits = abort_waits_;
      }
      dead_ = true;
      if (abort_waits) abort_waits();
    }
    std::this_thread::sleep_for(20ms);
  }
}

WorkerGroup::~WorkerGroup() {
  stopping_ = true;
  if (watcher_.joinable()) watcher_.join();
  // After EXIT the workers leave on their own. Without it (rank 0 failed) they would wait on
  // the ring: after a second their waits are aborted; whoever is still there after five is
  // killed.
  const auto start = std::chrono::steady_clock::now();
  bool aborted = false;
  for (size_t i = 0; i < pids_.size(); ++i) {
    while (!reaped_[i]) {
      const auto waited = std::chrono::steady_clock::now() - start;
      if (::waitpid(pids_[i], nullptr, WNOHANG) == pids_[i]) {
        reaped_[i] = true;
      } else if (waited >= 5s) {
        ::kill(pids_[i], SIGKILL);
        ::waitpid(pids_[i], nullptr, 0);
        reaped_[i] = true;
      } else {
        if (waited >= 1s && !aborted) {
          ring_abort(region().ring);
          rendezvous_abort(region().rendezvous);
          aborted = true;
        }
        std::this_thread::sleep_for(10ms);
      }
    }
  }
  ShmSegment::remove(segment_.name());
}

}  // namespace nanovllm
