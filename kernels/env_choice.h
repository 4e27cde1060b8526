// The comparison switches a kernel family reads from the environment once per process
// (NANOVLLM_DECODE_ATTENTION, NANOVLLM_DECODE_WALK, NANOVLLM_PREFILL_ATTENTION,
// NANOVLLM_DECODE_GEMM, NANOVLLM_FUSED_MLP, NANOVLLM_FUSED_OUT_PROJ, NANOVLLM_SKINNY_NEXT_LAUNCH;
// README lists them): one rule for all of them, so a mistyped value always stops the run naming
// the variable.
#pragma once

#include <initializer_list>
#include <string>

namespace nanovllm::kernels {

// The value of environment variable `name`: "auto" when unset, else one of `allowed` ("auto"
// among them). Any other value fails a CHECK naming the variable, its value and the values it
// takes.
std::string env_choice(const char* name, std::initializer_list<const char*> allowed);

}  // namespace nanovllm::kernels
