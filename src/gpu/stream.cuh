// What every .cu file of the backend shares: the one stream its kernels and copies run on, and the
// check after a launch. (CUDA types stay out of the C++ headers; this is included by .cu files only.)
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/result.h"
#include "gpu/abi.h"

// kernel<<<grid, block, shared_bytes, stream>>>(args...), written so that the emulated build (plain C++,
// gpu/emu/emu.h) can run it too.
#if defined(TM_CUDA_EMU)
#define TM_LAUNCH(kernel, grid, block, shared_bytes, st) ::cuemu::launcher(kernel, #kernel, grid, block)
#else
#define TM_LAUNCH(kernel, grid, block, shared_bytes, st) kernel<<<grid, block, shared_bytes, st>>>
#endif

namespace tmill::gpu::inline TM_GPU_ABI {

// The backend's stream (created on first use, non-blocking with respect to the legacy default
// stream): kernels, copies and synchronize() all go through it, in order, and it is the stream
// CUDA graphs capture (gpu/device.h begin_capture), which the legacy default stream cannot be.
cudaStream_t stream();

// A launch's error (bad configuration, no kernel image for this device) as a Status naming it.
inline Status launched(const char* what) {
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return Error{std::string("CUDA: launching ") + what + ": " + cudaGetErrorString(e)};
  return {};
}

}  // namespace tmill::gpu::inline TM_GPU_ABI
