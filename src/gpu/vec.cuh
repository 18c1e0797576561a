// 16-byte moves between memory and registers for the kernels' vector loads. The emulator's host
// compiler gets memcpy (no type punning); nvcc the plain vector access. Included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstring>

namespace tmill::gpu::inline TM_GPU_ABI {

__device__ __forceinline__ uint4 load16(const void* p) {
#if defined(TM_CUDA_EMU)
  uint4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
#else
  return *static_cast<const uint4*>(p);
#endif
}

__device__ __forceinline__ void store16(void* p, uint4 v) {
#if defined(TM_CUDA_EMU)
  std::memcpy(p, &v, sizeof v);
#else
  *static_cast<uint4*>(p) = v;
#endif
}

// Four floats from a 16-byte aligned address.
__device__ __forceinline__ void load_floats4(const float* p, float (&v)[4]) {
  const uint4 u = load16(p);
  v[0] = __uint_as_float(u.x);
  v[1] = __uint_as_float(u.y);
  v[2] = __uint_as_float(u.z);
  v[3] = __uint_as_float(u.w);
}

}  // namespace tmill::gpu::inline TM_GPU_ABI
