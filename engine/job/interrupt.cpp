#include "engine/job/interrupt.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace nanovllm {

namespace {

constexpr size_t kNumSignals = kStopSignals.size();

// A line the handler writes as it is: composed at install time, since formatting is not
// async-signal-safe.
struct Line {
  char text[256] = {};
  size_t size = 0;
};

// Lock-free atomics are async-signal-safe and, unlike volatile sig_atomic_t, visible to the
// main thread when the handler runs on another one (the CPU backend's worker threads).
std::atomic<int> g_signal{0};
std::atomic<bool> g_polled{false};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);
bool g_announce = false;
Line g_before_first_step[kNumSignals];  // by index in kStopSignals
Line g_again[kNumSignals];
std::optional<InterruptedJob> g_job;

int index_of(int sig) {
  for (size_t i = 0; i < kNumSignals; ++i)
    if (kStopSignals[i] == sig) return static_cast<int>(i);
  return -1;
}

void compose(Line& line, const char* program, int sig, const char* what) {
  const int n = std::snprintf(line.text, sizeof(line.text), "%s: interrupted by %s%s\n", program,
                              describe_signal(sig).c_str(), what);
  line.size = n < 0 ? 0 : std::min(static_cast<size_t>(n), sizeof(line.text) - 1);
}

void write_all(const Line& line) {
  for (size_t done = 0; done < line.size;) {
    const ssize_t n = ::write(STDERR_FILENO, line.text + done, line.size - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      return;  // stderr gone: nobody to tell
    }
  }
}

extern "C" void on_stop_signal(int sig) {
  if (g_polled.load()) {
    int none = 0;
    if (g_signal.compare_exchange_strong(none, sig)) return;  // the step loop stops after its step
  }
  // Nothing runs that could lose a result (before the first step), or the user insists.
  const int i = index_of(sig);
  if (g_announce && i >= 0) write_all(g_polled.load() ? g_again[i] : g_before_first_step[i]);
  ::_exit(128 + sig);
}

void set_disposition(void (*handler)(int)) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  ::sigemptyset(&sa.sa_mask);
  for (int sig : kStopSignals) ::sigaddset(&sa.sa_mask, sig);  // one handler at a time
  // Restart interrupted system calls: an EINTR inside the result writer's write would fail
  // the line that the flag means to keep.
  sa.sa_flags = SA_RESTART;
  for (int sig : kStopSignals) ::sigaction(sig, &sa, nullptr);
}

std::string plural(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

std::string describe_signal(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  const char* text = ::strsignal(sig);
  return (abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig)) + " (" +
         (text ? text : "?") + ")";
}

void install_interrupt_handler(const char* program) {
  g_signal = 0;
  g_polled = false;
  g_job.reset();
  g_announce = program != nullptr;
  if (g_announce)
    for (size_t i = 0; i < kNumSignals; ++i) {
      compose(g_before_first_step[i], program, kStopSignals[i],
              " before the first step; results written so far are kept");
      compose(g_again[i], program, kStopSignals[i],
              " again: stopping at once; results written so far are kept");
    }
  set_disposition(on_stop_signal);
}

void poll_interrupts_from_now() {
  g_polled = true;
}

void ignore_stop_signals() {
  set_disposition(SIG_IGN);
}

bool interrupt_requested() {
  return g_signal.load() != 0;
}

int interrupt_signal() {
  return g_signal.load();
}

void record_interrupted_job(const InterruptedJob& job) {
  g_job = job;
}

std::optional<InterruptedJob> interrupted_job() {
  return g_job;
}

std::string interruption_summary(int sig, const std::optional<InterruptedJob>& job) {
  const std::string head = "interrupted by " + describe_signal(sig);
  if (!job) return head + "; results written so far are kept";
  return head + ": " + plural(job->finished_results, "finished result", "finished results") +
         " kept, " + plural(job->unfinished_requests, "request", "requests") + " unfinished";
}

}  // namespace nanovllm
