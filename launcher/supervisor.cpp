#include "launcher/supervisor.h"

#include <pthread.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include <spdlog/spdlog.h>

#include "kernels/check.h"

namespace nanovllm {
namespace {

using Clock = std::chrono::steady_clock;

std::string signal_text(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return std::to_string(sig) + " (" + (abbrev ? std::string("SIG") + abbrev : "?") + ": " +
         ::strsignal(sig) + ")";
}

[[noreturn]] void child_main(int rank, const std::function<int(int)>& entry, pid_t launcher,
                             sigset_t mask) {
  // Die with the launcher. The flag fires when the forking *thread* exits, so run() must be
  // called from the main thread; the getppid check closes the window before prctl.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(1);
  // Own process group: a terminal's Ctrl-C reaches the launcher only, which forwards it once.
  ::setpgid(0, 0);
  for (int sig : {SIGINT, SIGTERM, SIGCHLD}) {
    ::signal(sig, SIG_DFL);
    ::sigdelset(&mask, sig);
  }
  ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  set_check_rank(rank);
  int rc = 1;
  try {
    rc = entry(rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] fatal: %s\n", rank, e.what());
  } catch (...) {
    std::fprintf(stderr, "[rank %d] fatal: unknown exception\n", rank);
  }
  std::fflush(nullptr);
  ::_exit(rc);  // no atexit handlers or static destructors of the launcher's copy
}

RankExit exit_from_status(int rank, pid_t pid, int status) {
  RankExit e;
  e.rank = rank;
  e.pid = pid;
  if (WIFSIGNALED(status)) {
    e.signaled = true;
    e.signal = WTERMSIG(status);
  } else {
    e.exit_code = WEXITSTATUS(status);
  }
  return e;
}

}  // namespace

std::string RankExit::describe() const {
  const std::string who = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
  if (signaled) return who + " was killed by signal " + signal_text(signal);
  return who + " exited with code " + std::to_string(exit_code);
}

Supervisor::Supervisor(SupervisorOptions options)
    : options_(std::move(options)),
      segment_([&] {
        sweep_stale_segments(options_.segment_prefix);
        return ShmSegment::create(make_segment_name(options_.segment_prefix),
                                  options_.segment_bytes);
      }()) {
  spdlog::debug("shared-memory segment /dev/shm/{} ({} bytes)", segment_.name(), segment_.size());
}

Supervisor::~Supervisor() {
  if (!removed_) ShmSegment::remove(segment_.name());
}

SupervisorResult Supervisor::run(const std::vector<std::function<int(int rank)>>& ranks) {
  const int n = static_cast<int>(ranks.size());
  CHECK_GE(n, 1);
  SupervisorResult result;
  result.ranks.resize(n);

  // Signals are taken synchronously with sigtimedwait; SIGCHLD must not be ignored, or the
  // kernel reaps children itself and their exit status is lost.
  sigset_t watched, old_mask;
  ::sigemptyset(&watched);
  for (int sig : {SIGINT, SIGTERM, SIGCHLD}) ::sigaddset(&watched, sig);
  ::pthread_sigmask(SIG_BLOCK, &watched, &old_mask);
  struct sigaction dfl{}, old_chld{};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGCHLD, &dfl, &old_chld);

  const pid_t launcher = ::getpid();
  std::vector<pid_t> pids(n, 0);
  std::vector<bool> done(n, false);
  int live = 0;
  std::fflush(nullptr);
  for (int r = 0; r < n; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) child_main(r, ranks[r], launcher, old_mask);
    if (pid < 0) {
      result.failed_rank = r;
      result.message = "cannot fork rank " + std::to_string(r) + ": " + std::strerror(errno);
      break;
    }
    ::setpgid(pid, pid);  // also here: no race with the child's own call
    pids[r] = pid;
    ++live;
  }

  // Plain time points, not optionals (GCC 12 reports optional<time_point> as uninitialised).
  constexpr Clock::time_point kNever = Clock::time_point::max();
  Clock::time_point kill_at = kNever;     // SIGKILL whoever is left at this time
  Clock::time_point stop_began = kNever;  // first stop order
  auto signal_live = [&](int sig) {
    for (int r = 0; r < n; ++r)
      if (pids[r] > 0 && !done[r]) ::kill(pids[r], sig);
  };
  auto stop_all = [&](int sig, std::chrono::milliseconds grace) {
    signal_live(sig);
    if (stop_began == kNever) stop_began = Clock::now();
    kill_at = Clock::now() + grace;
  };
  if (result.failed_rank) stop_all(SIGKILL, std::chrono::milliseconds(0));

  while (live > 0) {
    const timespec tick{0, 20 * 1000 * 1000};
    const int sig = ::sigtimedwait(&watched, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      if (result.interrupted_by == 0 && !result.failed_rank) {
        result.interrupted_by = sig;
        spdlog::warn("received {}; forwarding it to the ranks", ::sigabbrev_np(sig));
        stop_all(sig, options_.interrupt_grace);
      } else {
        stop_all(SIGKILL, std::chrono::milliseconds(0));  // second signal: no more waiting
      }
    }
    for (int r = 0; r < n; ++r) {
      int status = 0;
      if (pids[r] <= 0 || done[r] || ::waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      done[r] = true;
      --live;
      result.ranks[r] = exit_from_status(r, pids[r], status);
      if (!result.ranks[r].ok() && !result.failed_rank && result.interrupted_by == 0) {
        result.failed_rank = r;
        result.message = result.ranks[r].describe();
        spdlog::error("{}; stopping the other ranks", result.message);
        stop_all(SIGTERM, options_.kill_grace);
      }
    }
    if (kill_at != kNever && Clock::now() >= kill_at && live > 0) {
      signal_live(SIGKILL);
      kill_at = kNever;
    }
  }
  if (stop_began != kNever)
    result.teardown = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - stop_began);

  ShmSegment::remove(segment_.name());
  removed_ = true;
  // A signal that arrived after the last child went must not kill us on unblocking.
  const timespec zero{0, 0};
  for (int sig; (sig = ::sigtimedwait(&watched, nullptr, &zero)) > 0;)
    if ((sig == SIGINT || sig == SIGTERM) && result.interrupted_by == 0) result.interrupted_by = sig;
  ::sigaction(SIGCHLD, &old_chld, nullptr);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);

  if (result.interrupted_by != 0) {
    result.exit_code = 128 + result.interrupted_by;
    result.message = std::string("interrupted by SIG") + ::sigabbrev_np(result.interrupted_by);
  } else if (result.failed_rank) {
    result.exit_code = 1;
  }
  return result;
}

}  // namespace nanovllm
