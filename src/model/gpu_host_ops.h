// The host oracle of the GPU backend table (gpu/ops.h): "device" memory is RAM and every call is the
// CPU's reference math on the same layouts (matmul_reference, the scalar attention kernel over the
// same tiles, paged_kv_store); a graph is the recorded calls, replayed with the arguments they were
// recorded with, as a CUDA graph is. It lets the GPU forward (model/gpu_forward.h) run, and be tested
// against the CPU forward, on machines without a GPU; the CUDA kernels are tested against the same
// oracles on a device.
#pragma once

#include "gpu/ops.h"

namespace tmill {

// One shared instance (stateless). Every weight type the CPU reads is supported.
gpu::Ops& gpu_host_ops();

}  // namespace tmill
