// How many GPUs this process could use, found without creating a CUDA context (the launcher
// must not touch CUDA before fork): NVML through dlopen, so there is no link-time dependency
// and a machine without the driver simply has 0.
#pragma once

#include <optional>
#include <string>

namespace nanovllm {

// Devices NVML reports (nvmlInit_v2 + nvmlDeviceGetCount_v2); 0 when libnvidia-ml.so.1 is
// missing or any call fails.
int nvml_device_count();

// Applies CUDA_VISIBLE_DEVICES (nullopt: unset) to NVML's count: unset -> all; empty or
// starting with "-1" -> 0; otherwise the number of comma-separated entries, at most `nvml`.
int visible_gpu_count(int nvml, const std::optional<std::string>& cuda_visible_devices);

// nvml_device_count() filtered by this process's CUDA_VISIBLE_DEVICES.
int visible_gpu_count();

// Data parallelism: the CUDA_VISIBLE_DEVICES value that gives replica `replica` of groups of
// `tp` GPUs the visible GPUs replica * tp ... replica * tp + tp - 1, by the entries of
// `cuda_visible_devices` (indexes or UUIDs, kept as written) or, unset, by index. Empty when
// fewer than that many are visible.
std::string replica_visible_devices(int visible,
                                    const std::optional<std::string>& cuda_visible_devices,
                                    int replica, int tp);

}  // namespace nanovllm
