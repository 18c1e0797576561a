#include "gpu/nvml.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace tmill::gpu {
namespace {

// The few NVML entry points used, with their C ABI (nvml.h: nvmlReturn_t is an int, 0 = success;
// nvmlUtilization_t {gpu, memory} percentages; nvmlMemory_t {total, free, used} bytes).
struct Utilization {
  unsigned int gpu, memory;
};
struct Memory {
  unsigned long long total, free, used;
};
using InitFn = int (*)();
using HandleFn = int (*)(unsigned int, void**);
using UtilFn = int (*)(void*, Utilization*);
using MemFn = int (*)(void*, Memory*);

struct Nvml {
  std::string error;  // empty when loaded
  HandleFn handle = nullptr;
  UtilFn util = nullptr;
  MemFn mem = nullptr;
};

const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      n.error = "NVML is not available (libnvidia-ml.so.1 comes with the NVIDIA driver)";
      return;
    }
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
    n.handle = reinterpret_cast<HandleFn>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    n.util = reinterpret_cast<UtilFn>(dlsym(lib, "nvmlDeviceGetUtilizationRates"));
    n.mem = reinterpret_cast<MemFn>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
    if (!init || !n.handle || !n.util || !n.mem) {
      n.error = "NVML: libnvidia-ml.so.1 lacks the functions used";
      return;
    }
    if (int rc = init(); rc != 0) n.error = "NVML: nvmlInit failed (" + std::to_string(rc) + ")";
  });
  return n;
}

}  // namespace

Result<NvmlUsage> nvml_usage(int index) {
  const Nvml& n = nvml();
  if (!n.error.empty()) return Error{n.error};
  void* dev = nullptr;
  if (int rc = n.handle(static_cast<unsigned int>(index), &dev); rc != 0)
    return Error{"NVML: no device " + std::to_string(index) + " (" + std::to_string(rc) + ")"};
  Utilization u{};
  Memory m{};
  if (int rc = n.util(dev, &u); rc != 0) return Error{"NVML: utilization (" + std::to_string(rc) + ")"};
  if (int rc = n.mem(dev, &m); rc != 0) return Error{"NVML: memory (" + std::to_string(rc) + ")"};
  return NvmlUsage{u.gpu / 100.0, m.used, m.total};
}

}  // namespace tmill::gpu
