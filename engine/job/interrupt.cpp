#include "engine/job/interrupt.h"

#include <csignal>

namespace nanovllm {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_interrupt(int) { g_interrupted = 1; }

}  // namespace

void install_interrupt_handler() {
  g_interrupted = 0;
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
}

bool interrupt_requested() { return g_interrupted != 0; }

}  // namespace nanovllm
