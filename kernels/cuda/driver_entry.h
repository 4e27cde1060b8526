// A CUDA driver function reached through the runtime (cudaGetDriverEntryPointByVersion), so
// that nothing links libcuda: the test programs then start on machines without a driver (CI).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/check.h"

namespace nanovllm::kernels::cuda {

// The driver's `name` at ABI `version` (cudaTypedefs.h's PFN_<name>_v<version>) as Fn; fails a
// CHECK naming it where the driver lacks it.
template <typename Fn>
Fn driver_entry(const char* name, int version = 12000) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &found));
  CHECK_MSG(found == cudaDriverEntryPointSuccess && p != nullptr,
            "the CUDA driver has no " << name << " (ABI " << version << ")");
  return reinterpret_cast<Fn>(p);
}

}  // namespace nanovllm::kernels::cuda
