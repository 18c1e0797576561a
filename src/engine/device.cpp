#include "engine/device.h"

#include <fmt/format.h>

#include "gpu/device.h"

namespace tmill {

Status check_engine_device(const std::string& device) {
  if (device == "cpu" || device == "auto") return {};
  if (device != "cuda") return Error{fmt::format("--device '{}': not one of cpu, auto, cuda", device)};
  auto gpus = gpu::gpu_devices();
  if (!gpus.ok()) return Error{"--device cuda: " + gpus.error() + "; use --device cpu"};
  std::string found;
  for (const gpu::GpuInfo& g : *gpus)
    found += fmt::format("{}GPU {} {} ({:.1f} GiB, compute {}.{})", found.empty() ? "" : ", ", g.index, g.name,
                         static_cast<double>(g.total_bytes) / (1ull << 30), g.sm_major, g.sm_minor);
  return Error{fmt::format("--device cuda: found {}, but the engine does not run on CUDA yet (only the GPU memory "
                           "plan and decode kernels are built; issue \"CUDA backend\"); use --device cpu",
                           found.empty() ? std::string("no GPU") : found)};
}

}  // namespace tmill
