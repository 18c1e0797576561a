// gpu/device.h on the CUDA runtime (-DTM_CUDA=ON).
#include <cuda_runtime.h>
#include <string>

#include <utility>

#include "gpu/device.h"
#include "gpu/kernels.h"
#include "gpu/stream.cuh"

namespace tmill::gpu::inline TM_GPU_ABI {
namespace {
Error cuda_error(const char* what, cudaError_t e) {
  // (no fmt in .cu files: nvcc's front end rejects its compile-time format checks)
  return Error{std::string("CUDA: ") + what + ": " + cudaGetErrorString(e) + " (" + std::to_string(static_cast<int>(e)) + ")"};
}
}  // namespace

cudaStream_t stream() {
  static cudaStream_t s = [] {
    cudaStream_t created = nullptr;
    if (cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking) != cudaSuccess) created = nullptr;
    return created;  // null (the legacy stream) only if the device is unusable; the next call reports it
  }();
  return s;
}

bool built_with_cuda() { return true; }

Result<std::vector<GpuInfo>> gpu_devices() {
  int n = 0;
  if (cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) return cuda_error("no usable device", e);
  if (n == 0) return Error{"CUDA: the driver reports no device"};
  std::vector<GpuInfo> out;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaError_t e = cudaGetDeviceProperties(&p, i); e != cudaSuccess) return cuda_error("device properties", e);
    GpuInfo g;
    g.index = i;
    g.name = p.name;
    g.sm_major = p.major;
    g.sm_minor = p.minor;
    g.multiprocessors = p.multiProcessorCount;
    size_t free_b = 0, total_b = 0;
    if (cudaError_t e = cudaSetDevice(i); e != cudaSuccess) return cuda_error("set device", e);
    if (cudaError_t e = cudaMemGetInfo(&free_b, &total_b); e != cudaSuccess) return cuda_error("memory info", e);
    g.free_bytes = free_b;
    g.total_bytes = total_b;
    out.push_back(std::move(g));
  }
  if (cudaError_t e = cudaSetDevice(0); e != cudaSuccess) return cuda_error("set device", e);
  return out;
}

Result<void*> device_alloc(size_t bytes) {
  void* p = nullptr;
  if (bytes == 0) return p;
  if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess)
    return cuda_error(("allocating " + std::to_string(bytes) + " bytes").c_str(), e);
  return p;
}

void device_free(void* p) {
  if (p) cudaFree(p);
}

Status copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return {};
  if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()); e != cudaSuccess)
    return cuda_error("upload", e);
  if (cudaError_t e = cudaStreamSynchronize(stream()); e != cudaSuccess) return cuda_error("upload", e);
  return {};
}

Status copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return {};
  if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()); e != cudaSuccess)
    return cuda_error("download", e);
  if (cudaError_t e = cudaStreamSynchronize(stream()); e != cudaSuccess) return cuda_error("download", e);
  return {};
}

Status copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return {};
  if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()); e != cudaSuccess)
    return cuda_error("device copy", e);
  return {};
}

DeviceBuffer::~DeviceBuffer() {
  if (p_) cudaFree(p_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(p_, o.p_);
  std::swap(bytes_, o.bytes_);
  return *this;
}

Result<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  DeviceBuffer b;
  if (bytes == 0) return Result<DeviceBuffer>(std::move(b));
  if (cudaError_t e = cudaMalloc(&b.p_, bytes); e != cudaSuccess)
    return cuda_error(("allocating " + std::to_string(bytes) + " bytes").c_str(), e);
  b.bytes_ = bytes;
  return Result<DeviceBuffer>(std::move(b));
}

Status DeviceBuffer::upload(const void* src, size_t bytes, size_t offset) {
  if (offset + bytes > bytes_) return Error{"DeviceBuffer::upload past the end"};
  return copy_to_device(static_cast<char*>(p_) + offset, src, bytes);
}

Status DeviceBuffer::download(void* dst, size_t bytes, size_t offset) const {
  if (offset + bytes > bytes_) return Error{"DeviceBuffer::download past the end"};
  return copy_to_host(dst, static_cast<const char*>(p_) + offset, bytes);
}

Status synchronize() {
  if (cudaError_t e = cudaStreamSynchronize(stream()); e != cudaSuccess)
    return Error{std::string("CUDA: a kernel failed: ") + cudaGetErrorString(e)};
  return {};
}

Status begin_capture() {
  if (cudaError_t e = cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal); e != cudaSuccess)
    return cuda_error("beginning a graph capture", e);
  return {};
}

Result<void*> end_capture() {
  cudaGraph_t graph = nullptr;
  if (cudaError_t e = cudaStreamEndCapture(stream(), &graph); e != cudaSuccess) return cuda_error("ending a graph capture", e);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) return cuda_error("instantiating a graph", e);
  return static_cast<void*>(exec);
}

Status launch_graph(void* graph) {
  if (cudaError_t e = cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), stream()); e != cudaSuccess)
    return cuda_error("launching a graph", e);
  return {};
}

void destroy_graph(void* graph) {
  if (graph) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
}

}  // namespace tmill::gpu::inline TM_GPU_ABI
