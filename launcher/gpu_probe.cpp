#include "launcher/gpu_probe.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace nanovllm {

int nvml_device_count() {
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return 0;
  // NVML's C API: int return codes (0 = NVML_SUCCESS), opaque handles we never need.
  using InitFn = int (*)();
  using CountFn = int (*)(unsigned int*);
  using ShutdownFn = int (*)();
  auto init = reinterpret_cast<InitFn>(::dlsym(lib, "nvmlInit_v2"));
  auto count = reinterpret_cast<CountFn>(::dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto shutdown = reinterpret_cast<ShutdownFn>(::dlsym(lib, "nvmlShutdown"));
  int result = 0;
  if (init != nullptr && count != nullptr && init() == 0) {
    unsigned int n = 0;
    if (count(&n) == 0) result = static_cast<int>(n);
    if (shutdown != nullptr) shutdown();
  }
  ::dlclose(lib);
  return result;
}

int visible_gpu_count(int nvml, const std::optional<std::string>& cuda_visible_devices) {
  if (!cuda_visible_devices) return nvml;
  const std::string& v = *cuda_visible_devices;
  if (v.empty() || v.rfind("-1", 0) == 0) return 0;
  const int entries = 1 + static_cast<int>(std::count(v.begin(), v.end(), ','));
  return std::min(nvml, entries);
}

std::string replica_visible_devices(int visible,
                                    const std::optional<std::string>& cuda_visible_devices,
                                    int replica, int tp) {
  std::vector<std::string> ids;
  if (cuda_visible_devices) {
    std::stringstream entries(*cuda_visible_devices);
    for (std::string id; std::getline(entries, id, ',');) ids.push_back(id);
  } else {
    for (int i = 0; i < visible; ++i) ids.push_back(std::to_string(i));
  }
  const size_t first = static_cast<size_t>(replica) * static_cast<size_t>(tp);
  if (visible < (replica + 1) * tp || ids.size() < first + static_cast<size_t>(tp)) return {};
  std::string out;
  for (size_t i = first; i < first + static_cast<size_t>(tp); ++i)
    out += (out.empty() ? "" : ",") + ids[i];
  return out;
}

int visible_gpu_count() {
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  return visible_gpu_count(nvml_device_count(),
                           env ? std::optional<std::string>(env) : std::nullopt);
}

}  // namespace nanovllm
