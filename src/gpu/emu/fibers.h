// Inside the emulator (gpu/emu/emu.h): the device side's entry for the runtime (gpu/emu/runtime.cpp).
#pragma once

#include <functional>
#include <string>

#include "gpu/emu/emu.h"

namespace cuemu::detail {

// Runs body once per thread of each block of the grid, block after block; false at the first block
// that fails (why: which block and what happened). The caller holds the emulator's lock.
bool run_grid(dim3 grid, dim3 block, const std::function<void()>& body, std::string* why);

}  // namespace cuemu::detail
