#include "bench/nanovllm_bench_stop.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "engine/job/interrupt.h"

namespace nanovllm::bench {

namespace {

std::atomic<int> g_fd{-1};
std::atomic<int> g_seen{0};  // sticky: once asked, always asked

}  // namespace

StopChannel make_stop_channel() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    throw std::runtime_error(std::string("socketpair failed: ") + std::strerror(errno));
  ::fcntl(fds[1], F_SETFD, 0);  // the worker's end stays open across its exec
  return StopChannel{fds[0], fds[1]};
}

void send_stop(int parent_fd, int sig) {
  const auto byte = static_cast<unsigned char>(sig);
  while (::send(parent_fd, &byte, 1, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

void set_stop_fd(int worker_fd) {
  g_fd = worker_fd;
  g_seen = 0;
}

int stop_signal() {
  if (const int seen = g_seen.load()) return seen;
  const int fd = g_fd.load();
  if (fd < 0) return 0;
  unsigned char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  int sig = 0;
  if (n == 1) {
    sig = byte;
  } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    sig = kParentGone;  // end-of-file: the parent's end closed
  }
  if (sig != 0) g_seen = sig;
  return sig;
}

std::string describe_stop(int sig) {
  if (sig == kParentGone) return "its parent nanovllm-bench is gone";
  return describe_signal(sig) + " from nanovllm-bench";
}

BenchStopped::BenchStopped(int sig)
    : std::runtime_error("stopped: " + describe_stop(sig)), signal(sig) {}

void throw_if_stopped() {
  if (const int sig = stop_signal()) throw BenchStopped(sig);
}

}  // namespace nanovllm::bench
