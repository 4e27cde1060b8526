#include "rank/worker_loop.h"

#include <cstdint>
#include <vector>

#include "ipc/step_command_serialization.h"

namespace nanovllm {

int run_worker_loop(StepExecutor& executor, RingReader& ring) {
  std::vector<uint8_t> bytes;  // one encoded StepCommand
  for (;;) {
    ring.read(bytes);
    const StepCommand cmd = decode_step_command(bytes);
    if (cmd.kind == StepKind::kExit) return 0;
    executor.execute(cmd);
  }
}

}  // namespace nanovllm
