// GPU utilization and memory from NVML (the driver's management library), for /metrics. Loaded at
// run time (dlopen of libnvidia-ml.so.1, which ships with the NVIDIA driver), so nothing links against
// it: a build or a machine without it gets an error that says so, never a failed start.
#pragma once

#include <cstdint>

#include "core/result.h"

namespace tmill::gpu {

struct NvmlUsage {
  double utilization = 0.0;  // share of the last sample period a kernel ran, 0..1
  uint64_t memory_used_bytes = 0, memory_total_bytes = 0;
};

// Device `index` (NVML's numbering, the same as CUDA's by default).
Result<NvmlUsage> nvml_usage(int index);

}  // namespace tmill::gpu
