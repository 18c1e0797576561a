// Where the engine computes: EngineConfig::device (`--device`). cpu and auto run the CPU forward;
// cuda runs the GPU forward (model/gpu_forward.h) on the first CUDA device; cuda-emu the same with the
// CUDA backend's kernels run by the CPU's emulator of CUDA (gpu/emu/emu.h: slow; tests, debugging
// without a GPU); gpu-oracle the same GPU engine path on the host oracle backend (model/gpu_host_ops.h).
#pragma once

#include <string>

#include "core/result.h"

namespace tmill {

// OK for cpu, auto, cuda-emu and gpu-oracle, and for cuda when this build has the CUDA backend and a device is
// visible; otherwise an error that says why (no CUDA backend in this build, no device found) and
// what to use instead. Whether the model runs on the GPU is checked when it is loaded.
Status check_engine_device(const std::string& device);
// True for the devices that run the GPU forward (cuda, cuda-emu, gpu-oracle).
bool is_gpu_device(const std::string& device);

}  // namespace tmill
