#include "launcher/supervisor.h"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "engine/job/interrupt.h"
#include "kernels/check.h"

namespace nanovllm {
namespace {

using Clock = std::chrono::steady_clock;

std::string signal_text(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return std::to_string(sig) + " (" + (abbrev ? std::string("SIG") + abbrev : "?") + ": " +
         ::strsignal(sig) + ")";
}

[[noreturn]] void child_main(int rank, const std::string& name,
                             const std::function<int(int)>& entry, pid_t launcher, sigset_t mask) {
  // Die with the launcher. The flag fires when the forking *thread* exits, so run() must be
  // called from the main thread; the getppid check closes the window before prctl.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(1);
  // Own process group: a terminal's Ctrl-C reaches the launcher only, which forwards it once.
  ::setpgid(0, 0);
  std::vector<int> to_default(kStopSignals.begin(), kStopSignals.end());
  to_default.insert(to_default.end(), {SIGCHLD, SIGPIPE});
  for (int sig : to_default) {
    ::signal(sig, SIG_DFL);
    ::sigdelset(&mask, sig);
  }
  ::pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  set_check_rank(rank);
  int rc = 1;
  try {
    rc = entry(rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[%s] fatal: %s\n", name.c_str(), e.what());
  } catch (...) {
    std::fprintf(stderr, "[%s] fatal: unknown exception\n", name.c_str());
  }
  std::fflush(nullptr);
  ::_exit(rc);  // no atexit handlers or static destructors of the launcher's copy
}

RankExit exit_from_status(int rank, std::string name, pid_t pid, int status) {
  RankExit e;
  e.rank = rank;
  e.name = std::move(name);
  e.pid = pid;
  if (WIFSIGNALED(status)) {
    e.signaled = true;
    e.signal = WTERMSIG(status);
  } else {
    e.exit_code = WEXITSTATUS(status);
  }
  return e;
}

bool is_stop_signal(int sig) {
  for (int stop : kStopSignals)
    if (sig == stop) return true;
  return false;
}

// Signals the launcher takes synchronously (sigtimedwait) while it supervises, and what to
// restore afterwards.
struct WatchedSignals {
  sigset_t watched;   // the stop signals and SIGCHLD
  sigset_t old_mask;  // also the children's mask, minus the signals they get back
  struct sigaction old_chld;
};

WatchedSignals watch_signals() {
  WatchedSignals s{};
  ::sigemptyset(&s.watched);
  for (int sig : kStopSignals) ::sigaddset(&s.watched, sig);
  ::sigaddset(&s.watched, SIGCHLD);
  ::pthread_sigmask(SIG_BLOCK, &s.watched, &s.old_mask);
  // SIGCHLD must not be ignored, or the kernel reaps children itself and their exit status is
  // lost.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGCHLD, &dfl, &s.old_chld);
  return s;
}

// Takes the signals that arrived after the last child went (they must not kill us on
// unblocking), then restores the mask and SIGCHLD's disposition. Returns the first stop signal
// among them, 0 if none.
int unwatch_signals(const WatchedSignals& s) {
  int interrupt = 0;
  const timespec zero{0, 0};
  for (int sig; (sig = ::sigtimedwait(&s.watched, nullptr, &zero)) > 0;)
    if (is_stop_signal(sig) && interrupt == 0) interrupt = sig;
  ::sigaction(SIGCHLD, &s.old_chld, nullptr);
  ::pthread_sigmask(SIG_SETMASK, &s.old_mask, nullptr);
  return interrupt;
}

// The rank processes from fork to the last reap: who still runs, and the pending stop order.
// Records every exit, the first failure and an interrupt into `result`.
class RankGroup {
 public:
  RankGroup(const SupervisorOptions& options, const TickHook& on_tick, SupervisorResult& result)
      : options_(options),
        on_tick_(on_tick),
        result_(result),
        n_(static_cast<int>(result.ranks.size())),
        pids_(n_, 0),
        done_(n_, false) {}

  // One child per entry (rank = index). A failed fork is recorded as the failing rank and
  // the ranks already forked are killed at once.
  void fork_all(const std::vector<std::function<int(int rank)>>& ranks, const sigset_t& mask) {
    const pid_t launcher = ::getpid();
    std::fflush(nullptr);
    for (int r = 0; r < n_; ++r) {
      const pid_t pid = ::fork();
      if (pid == 0) child_main(r, name_of(r), ranks[r], launcher, mask);
      if (pid < 0) {
        result_.failed_rank = r;
        result_.message = "cannot fork " + name_of(r) + ": " + std::strerror(errno);
        break;
      }
      ::setpgid(pid, pid);  // also here: no race with the child's own call
      pids_[r] = pid;
      ++live_;
    }
    if (result_.failed_rank) stop_all(SIGKILL, std::chrono::milliseconds(0));
  }

  // Until every forked rank is reaped, on a 20 ms tick: forwards stop signals, reaps exits,
  // asks the tick hook, stops the rest after the first failure, SIGKILLs whoever outlives the
  // grace period.
  void supervise(const sigset_t& watched) {
    while (live_ > 0) {
      const timespec tick{0, 20 * 1000 * 1000};
      const int sig = ::sigtimedwait(&watched, nullptr, &tick);
      if (is_stop_signal(sig)) on_interrupt(sig);
      reap_exited();
      ask_tick_hook();
      kill_overdue();
    }
    if (stop_began_ != kNever)
      result_.teardown =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - stop_began_);
  }

 private:
  std::string name_of(int r) const {
    return options_.rank_name ? options_.rank_name(r) : "rank " + std::to_string(r);
  }

  // Plain time points, not optionals (GCC 12 reports optional<time_point> as uninitialised).
  static constexpr Clock::time_point kNever = Clock::time_point::max();

  // The first signal is forwarded and the ranks get interrupt_grace to finish; a second one
  // (or one after a failure) kills at once.
  void on_interrupt(int sig) {
    if (result_.interrupted_by == 0 && !result_.failed_rank) {
      result_.interrupted_by = sig;
      spdlog::warn("received {}; forwarding it to the ranks", describe_signal(sig));
      stop_all(sig, options_.interrupt_grace);
    } else {
      stop_all(SIGKILL, std::chrono::milliseconds(0));
    }
  }

  void reap_exited() {
    for (int r = 0; r < n_; ++r) {
      int status = 0;
      if (pids_[r] <= 0 || done_[r] || ::waitpid(pids_[r], &status, WNOHANG) != pids_[r]) continue;
      done_[r] = true;
      --live_;
      result_.ranks[r] = exit_from_status(r, name_of(r), pids_[r], status);
      if (!result_.ranks[r].ok() && !result_.failed_rank && result_.interrupted_by == 0) {
        result_.failed_rank = r;
        result_.message = result_.ranks[r].describe();
        spdlog::error("{}; stopping the other ranks", result_.message);
        stop_all(SIGTERM, options_.kill_grace);
      }
    }
  }

  // The hook watches a running group only: once a stop is under way, the grace periods rule.
  void ask_tick_hook() {
    if (!on_tick_ || stop_began_ != kNever || live_ == 0) return;
    std::vector<RankState> ranks(n_);
    for (int r = 0; r < n_; ++r) ranks[r] = RankState{r, pids_[r], pids_[r] > 0 && !done_[r]};
    const std::optional<TickFailure> failure = on_tick_(ranks);
    if (!failure) return;
    result_.failed_rank = failure->rank;
    result_.message = failure->message;
    spdlog::error("{}; stopping the ranks", result_.message);
    stop_all(SIGTERM, options_.kill_grace);
  }

  void kill_overdue() {
    if (kill_at_ != kNever && Clock::now() >= kill_at_ && live_ > 0) {
      signal_live(SIGKILL);
      kill_at_ = kNever;
    }
  }

  // Sends `sig` to every live rank now and SIGKILL to those still running after `grace`.
  void stop_all(int sig, std::chrono::milliseconds grace) {
    signal_live(sig);
    if (stop_began_ == kNever) stop_began_ = Clock::now();
    kill_at_ = Clock::now() + grace;
  }

  void signal_live(int sig) {
    for (int r = 0; r < n_; ++r)
      if (pids_[r] > 0 && !done_[r]) ::kill(pids_[r], sig);
  }

  const SupervisorOptions& options_;
  const TickHook& on_tick_;
  SupervisorResult& result_;
  const int n_;
  std::vector<pid_t> pids_;
  std::vector<bool> done_;
  int live_ = 0;
  Clock::time_point kill_at_ = kNever;     // SIGKILL whoever is left at this time
  Clock::time_point stop_began_ = kNever;  // first stop order
};

// The launcher's exit code and message: an interrupt wins over a rank failure.
void set_exit_status(SupervisorResult& result) {
  if (result.interrupted_by != 0) {
    result.exit_code = 128 + result.interrupted_by;
    result.message = interruption_summary(result.interrupted_by, std::nullopt);
  } else if (result.failed_rank) {
    result.exit_code = 1;
  }
}

}  // namespace

Supervisor::SigpipeIgnored::SigpipeIgnored() {
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ign, &old_);
}

Supervisor::SigpipeIgnored::~SigpipeIgnored() {
  ::sigaction(SIGPIPE, &old_, nullptr);
}

std::string RankExit::describe() const {
  const std::string who =
      (name.empty() ? "rank " + std::to_string(rank) : name) + " (pid " + std::to_string(pid) + ")";
  if (signaled) return who + " was killed by signal " + signal_text(signal);
  return who + " exited with code " + std::to_string(exit_code);
}

Supervisor::Supervisor(SupervisorOptions options)
    : options_(std::move(options)), segment_([&] {
        sweep_stale_segments(options_.segment_prefix);
        return ShmSegment::create(make_segment_name(options_.segment_prefix),
                                  options_.segment_bytes);
      }()) {
  spdlog::debug("shared-memory segment /dev/shm/{} ({} bytes)", segment_.name(), segment_.size());
}

Supervisor::~Supervisor() {
  remove_segment();
}

SupervisorResult Supervisor::run(const std::vector<std::function<int(int rank)>>& ranks,
                                 const TickHook& on_tick) {
  const int n = static_cast<int>(ranks.size());
  CHECK_GE(n, 1);
  SupervisorResult result;
  result.ranks.resize(n);
  const WatchedSignals signals = watch_signals();
  RankGroup group(options_, on_tick, result);
  group.fork_all(ranks, signals.old_mask);
  group.supervise(signals.watched);
  remove_segment();
  const int late_interrupt = unwatch_signals(signals);
  if (result.interrupted_by == 0) result.interrupted_by = late_interrupt;
  set_exit_status(result);
  return result;
}

void Supervisor::remove_segment() {
  if (removed_) return;
  ShmSegment::remove(segment_.name());
  removed_ = true;
}

}  // namespace nanovllm
