// Ranks 1..N-1: read a step command from the ring, run the same forward pass as rank 0,
// repeat. They know nothing of requests or scheduling.
#pragma once

#include "ipc/broadcast_ring.h"
#include "ipc/step_executor.h"

namespace nanovllm {

// ring read -> decode -> execute until an EXIT command (returns 0), which rank 0 sends when
// its job is done or stopped by a signal. A dead writer throws IpcError.
int run_worker_loop(StepExecutor& executor, RingReader& ring);

}  // namespace nanovllm
