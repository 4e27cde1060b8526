// What the sm_90a kernels (the Hopper prefill attention, the Hopper decode GEMM, the fused
// decode MLP) ask before they run: whether this build holds their code, whether the device runs
// it, and how much shared memory a block may opt into. The device's answers are read once per
// process (every rank's GPU is the same kind); without a usable device they say no.
#pragma once

namespace nanovllm::kernels::cuda {

// Whether this build compiled the sm_90a kernels (CMAKE_CUDA_ARCHITECTURES lists 90a).
bool sm90a_built();
// Whether the current device is compute capability exactly 9.0, where sm_90a code runs.
bool device_is_sm90();
// The dynamic shared memory a block of the current device may opt into (0 without a device).
int shared_memory_optin();

}  // namespace nanovllm::kernels::cuda
