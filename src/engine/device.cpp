#include "engine/device.h"

#include <fmt/format.h>

#include "gpu/device.h"

namespace tmill {

bool is_gpu_device(const std::string& device) {
  return device == "cuda" || device == "cuda-emu" || device == "gpu-oracle";
}

Status check_engine_device(const std::string& device) {
  if (device == "cpu" || device == "auto" || device == "gpu-oracle" || device == "cuda-emu") return {};
  if (device != "cuda")
    return Error{fmt::format("--device '{}': not one of cpu, auto, cuda, cuda-emu, gpu-oracle", device)};
  auto gpus = gpu::gpu_devices();
  if (!gpus.ok()) return Error{"--device cuda: " + gpus.error() + "; use --device cpu"};
  return {};
}

}  // namespace tmill
