// The CUDA devices this process can use, and device memory for the kernels (gpu/kernels.h). Built
// without CUDA (-DTM_CUDA=OFF, the default) every call returns an error that says so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "gpu/abi.h"

namespace tmill::gpu {

struct GpuInfo {
  int index = 0;
  std::string name;
  uint64_t total_bytes = 0, free_bytes = 0;
  int sm_major = 0, sm_minor = 0;  // compute capability
  int multiprocessors = 0;
};

}  // namespace tmill::gpu

namespace tmill::gpu::inline TM_GPU_ABI {

// True when this build of the backend runs its kernels: CUDA (-DTM_CUDA=ON) or the emulator.
bool built_with_cuda();
// Every visible device; an error when built without CUDA or when the driver reports none.
Result<std::vector<GpuInfo>> gpu_devices();

// Raw device memory for callers that manage it themselves (gpu/ops.h): device_free(nullptr) is a no-op;
// copies run in order with the kernels on the backend's stream; to and from the host they return
// when done, device to device they are queued.
Result<void*> device_alloc(size_t bytes);
void device_free(void* p);
Status copy_to_device(void* dst, const void* src, size_t bytes);
Status copy_to_host(void* dst, const void* src, size_t bytes);
Status copy_on_device(void* dst, const void* src, size_t bytes);

// CUDA graphs on the backend's stream: between begin_capture and end_capture the kernels and device
// copies queued are recorded instead of run (no host copies or synchronize in between); end_capture
// returns the executable graph, launch_graph queues it (the same kernels with the same arguments:
// what changes between launches is the data behind the pointers), destroy_graph frees it.
Status begin_capture();
Result<void*> end_capture();
Status launch_graph(void* graph);
void destroy_graph(void* graph);

// Device memory (on the current device), freed by DeviceBuffer's destructor.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr, o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  static Result<DeviceBuffer> allocate(size_t bytes);
  Status upload(const void* src, size_t bytes, size_t offset = 0);
  Status download(void* dst, size_t bytes, size_t offset = 0) const;
  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace tmill::gpu::inline TM_GPU_ABI
