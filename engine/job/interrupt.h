// SIGINT on rank 0: a flag the job's step loop polls, so the current step completes, finished
// results stay written and the workers are told to exit.
#pragma once

namespace nanovllm {

void install_interrupt_handler();
bool interrupt_requested();

}  // namespace nanovllm
