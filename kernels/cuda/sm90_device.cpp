#include "kernels/cuda/sm90_device.h"

#include <cuda_runtime_api.h>

namespace nanovllm::kernels::cuda {
namespace {

struct DeviceFacts {
  bool sm90 = false;
  int smem_optin = 0;
};

const DeviceFacts& device_facts() {
  static const DeviceFacts facts = [] {
    DeviceFacts f;
    int device = 0, major = 0, minor = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&f.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
            cudaSuccess) {
      cudaGetLastError();  // no usable device: nothing supported, not an error here
      return DeviceFacts{};
    }
    f.sm90 = major == 9 && minor == 0;
    return f;
  }();
  return facts;
}

}  // namespace

bool sm90a_built() {
#if defined(NANOVLLM_SM90A)
  return true;
#else
  return false;
#endif
}

bool device_is_sm90() {
  return device_facts().sm90;
}

int shared_memory_optin() {
  return device_facts().smem_optin;
}

}  // namespace nanovllm::kernels::cuda
