// Ranks 1..N-1: read a step command from the ring, run the same forward pass as rank 0,
// repeat. They know nothing of requests or scheduling.
#pragma once

#include "ipc/broadcast_ring.h"
#include "ipc/step_executor.h"

namespace nanovllm {

// Workers ignore SIGINT: rank 0 ends their loop with an EXIT command once it stopped.
void ignore_interrupts();

// ring read -> decode -> execute until an EXIT command (returns 0). A dead writer throws
// IpcError.
int run_worker_loop(StepExecutor& executor, RingReader& ring);

}  // namespace nanovllm
