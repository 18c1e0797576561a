// Where the engine computes: EngineConfig::device (`--device`). The engine runs on the CPU; the CUDA
// backend (gpu/, issue "CUDA backend") has its memory plan and decode kernels but no engine on top yet,
// so `cuda` is refused with what this build and machine have, and what to use instead.
#pragma once

#include <string>

#include "core/result.h"

namespace tmill {

// OK for "cpu" and "auto" (the CPU: the only device the engine runs on); an error that says why for
// "cuda" (no CUDA backend in this build, no device found, or the engine not yet running on one) and
// for anything else.
Status check_engine_device(const std::string& device);

}  // namespace tmill
