#include "bench/nanovllm_bench_worker.h"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "bench/nanovllm_bench_stop.h"
#include "engine/job/interrupt.h"

namespace nanovllm::bench {

namespace {

using Clock = std::chrono::steady_clock;

// `timeout` signals the command and then its whole process group, so one request can come
// twice within microseconds: a repeat this soon is the same request, not the user insisting.
constexpr std::chrono::milliseconds kSameRequest{300};

bool is_stop_signal(int sig) {
  for (const int stop : kStopSignals)
    if (sig == stop) return true;
  return false;
}

int exit_status(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

[[noreturn]] void exec_worker(std::vector<std::string> args, pid_t parent,
                              const sigset_t& old_mask) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);  // the parent died before prctl
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv("/proc/self/exe", argv.data());
  std::fprintf(stderr, "nanovllm-bench: cannot run the benchmark process: %s\n",
               std::strerror(errno));
  ::_exit(127);
}

}  // namespace

WorkerExit run_worker(const std::vector<std::string>& args, std::chrono::milliseconds grace) {
  const StopChannel channel = make_stop_channel();
  std::vector<std::string> full = args;
  full.insert(full.end(), {"--child-stop-fd", std::to_string(channel.worker_fd)});

  // Blocked before fork: a signal that comes at any time from here is taken below, never lost
  // and never the parent's default death.
  sigset_t watched, old_mask;
  ::sigemptyset(&watched);
  for (const int sig : kStopSignals) ::sigaddset(&watched, sig);
  ::sigaddset(&watched, SIGCHLD);
  ::pthread_sigmask(SIG_BLOCK, &watched, &old_mask);
  // Not ignored, or the kernel reaps the worker itself and its exit status is lost.
  struct sigaction dfl {
  }, old_chld{};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGCHLD, &dfl, &old_chld);

  std::fflush(nullptr);  // nothing buffered may be written twice
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) exec_worker(std::move(full), parent, old_mask);
  ::close(channel.worker_fd);
  if (pid < 0) {
    ::close(channel.parent_fd);
    ::sigaction(SIGCHLD, &old_chld, nullptr);
    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  }
  ::setpgid(pid, pid);  // also here: no race with the child's own call

  WorkerExit result;
  auto kill_at = Clock::time_point::max(), first_at = kill_at;
  int status = 0;
  for (;;) {
    const timespec tick{0, 20 * 1000 * 1000};
    const int sig = ::sigtimedwait(&watched, nullptr, &tick);
    if (is_stop_signal(sig)) {
      if (result.stop_signal == 0) {
        result.stop_signal = sig;
        spdlog::warn("received {}; the benchmark process stops after its current step",
                     describe_signal(sig));
        send_stop(channel.parent_fd, sig);
        first_at = Clock::now();
        kill_at = first_at + grace;
      } else if (Clock::now() - first_at >= kSameRequest) {
        ::kill(pid, SIGKILL);  // the user insists
      }
    }
    const pid_t reaped = ::waitpid(pid, &status, WNOHANG);
    if (reaped == pid || (reaped < 0 && errno == ECHILD)) break;
    if (Clock::now() >= kill_at) {
      spdlog::warn("the benchmark process did not stop within {} ms; killing it", grace.count());
      ::kill(pid, SIGKILL);
      kill_at = Clock::time_point::max();
    }
  }
  result.exit_code = exit_status(status);
  ::close(channel.parent_fd);
  // Stop signals that came after the worker went must not kill us on unblocking.
  const timespec zero{0, 0};
  for (int sig; (sig = ::sigtimedwait(&watched, nullptr, &zero)) > 0;)
    if (is_stop_signal(sig) && result.stop_signal == 0) result.stop_signal = sig;
  ::sigaction(SIGCHLD, &old_chld, nullptr);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  return result;
}

}  // namespace nanovllm::bench
