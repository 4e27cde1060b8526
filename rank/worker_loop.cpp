#include "rank/worker_loop.h"

#include <csignal>
#include <cstdint>
#include <vector>

#include "ipc/step_command_serialization.h"

namespace nanovllm {

void ignore_interrupts() { std::signal(SIGINT, SIG_IGN); }

int run_worker_loop(StepExecutor& executor, RingReader& ring) {
  std::vector<uint8_t> bytes;  // one encoded StepCommand
  for (;;) {
    ring.read(bytes);
    const StepCommand cmd = decode_step_command(bytes);
    if (cmd.kind == StepKind::EXIT) return 0;
    executor.execute(cmd);
  }
}

}  // namespace nanovllm
