// gpu/emu/emu.h's runtime API on the host: device memory (host memory, counted), copies, the one
// stream, launches (their limits checked, then run by gpu/emu/fibers.cpp or recorded while the stream
// is captured), graphs (the recordings), and the errors CUDA reports. Compiled into tm_gpu in every
// build; its names live in namespace cuemu, so a -DTM_CUDA=ON build links it beside the real runtime.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu/emu/emu.h"
#include "gpu/emu/fibers.h"

namespace cuemu {
namespace detail {
namespace {

// One launch at a time in the process: blocks share their kernel's static "shared memory" and the
// fibers' stacks.
std::recursive_mutex g_mu;

// ---- the runtime's state ----
struct Node {
  std::function<cudaError_t()> run;
};

struct Device {
  std::map<uintptr_t, size_t> allocs;
  size_t used = 0, total = 0;
  cudaError_t last = cudaSuccess;     // a launch's configuration error, until cudaGetLastError
  cudaError_t pending = cudaSuccess;  // a kernel's failure, until the next synchronize
  std::map<int, std::string> detail;  // what the last error of each code was about
  bool capturing = false, invalidated = false;
  std::thread::id capture_thread;
  std::vector<Node> captured;
};
Device& dev() {
  static Device* d = [] {
    auto* x = new Device;
    x->total = size_t{4} << 30;
    if (const char* e = std::getenv("TOKENMILL_CUDA_EMU_MEMORY"); e && *e) x->total = std::strtoull(e, nullptr, 10);
    return x;
  }();
  return *d;
}

cudaError_t set_error(cudaError_t e, const std::string& what) {
  dev().detail[e] = what;
  return e;
}

// The allocation holding [p, p + n), if any.
bool in_device_memory(const void* p, size_t n) {
  const auto& a = dev().allocs;
  const auto u = reinterpret_cast<uintptr_t>(p);
  auto it = a.upper_bound(u);
  if (it == a.begin()) return false;
  --it;
  return u >= it->first && u + n <= it->first + it->second;
}

bool capturing_here() { return dev().capturing && dev().capture_thread == std::this_thread::get_id(); }

// A call the capture does not allow: the capture is invalidated, as CUDA does.
cudaError_t refuse_in_capture(const char* what) {
  dev().invalidated = true;
  return set_error(cudaErrorStreamCaptureUnsupported, std::string(what) + " while the stream is being captured");
}

cudaError_t run_kernel(const char* name, dim3 grid, dim3 bd, const std::function<void()>& body) {
  std::string why;
  if (run_grid(grid, bd, body, &why)) return cudaSuccess;
  why = std::string("kernel ") + name + ", " + why;
  std::fprintf(stderr, "cuda-emu: %s\n", why.c_str());
  dev().pending = set_error(cudaErrorLaunchFailure, why);
  return cudaErrorLaunchFailure;
}

}  // namespace

void launch(const char* name, dim3 grid, dim3 bd, std::function<void()> body) {
  std::lock_guard lock(g_mu);
  Device& d = dev();
  const uint64_t threads = static_cast<uint64_t>(bd.x) * bd.y * bd.z;
  if (threads == 0 || threads > 1024 || bd.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
      grid.z > 65535 || grid.x > 0x7fffffffu) {
    d.last = set_error(cudaErrorInvalidConfiguration,
                       std::string("kernel ") + name + ": grid (" + std::to_string(grid.x) + "," + std::to_string(grid.y) + "," +
                           std::to_string(grid.z) + "), block (" + std::to_string(bd.x) + "," + std::to_string(bd.y) + "," +
                           std::to_string(bd.z) + ")");
    return;
  }
  if (capturing_here()) {
    d.captured.push_back(Node{[name, grid, bd, body]() { return run_kernel(name, grid, bd, body); }});
    return;
  }
  run_kernel(name, grid, bd, body);
}

}  // namespace detail

using detail::dev;
using detail::set_error;

cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (device != 0) return set_error(cudaErrorInvalidDevice, "the emulator has one device, 0");
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof p->name, "%s", "tokenmill CUDA emulator (CPU)");
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = 1;
  std::lock_guard lock(detail::g_mu);
  p->totalGlobalMem = dev().total;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : set_error(cudaErrorInvalidDevice, "the emulator has one device, 0");
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  std::lock_guard lock(detail::g_mu);
  *total_bytes = dev().total;
  *free_bytes = dev().total - dev().used;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  std::lock_guard lock(detail::g_mu);
  detail::Device& d = dev();
  *p = nullptr;
  if (detail::capturing_here()) return detail::refuse_in_capture("cudaMalloc");
  if (bytes > d.total - d.used) return set_error(cudaErrorMemoryAllocation, "the emulated device is full");
  // 256-byte aligned as cudaMalloc's, and exactly `bytes` long, so that AddressSanitizer catches a
  // kernel reading or writing past its buffer
  void* m = nullptr;
  if (posix_memalign(&m, 256, bytes == 0 ? 1 : bytes) != 0) return set_error(cudaErrorMemoryAllocation, "host memory");
  d.allocs[reinterpret_cast<uintptr_t>(m)] = bytes;
  d.used += bytes;
  *p = m;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  std::lock_guard lock(detail::g_mu);
  detail::Device& d = dev();
  if (detail::capturing_here()) return detail::refuse_in_capture("cudaFree");
  auto it = d.allocs.find(reinterpret_cast<uintptr_t>(p));
  if (it == d.allocs.end()) return set_error(cudaErrorInvalidValue, "cudaFree of a pointer cudaMalloc did not return");
  d.used -= it->second;
  d.allocs.erase(it);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
  std::lock_guard lock(detail::g_mu);
  if (bytes == 0) return cudaSuccess;
  const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if ((dst_dev && !detail::in_device_memory(dst, bytes)) || (src_dev && !detail::in_device_memory(src, bytes)))
    return set_error(cudaErrorInvalidValue, "a copy's device side is not (wholly) in device memory");
  if (detail::capturing_here()) {
    dev().captured.push_back(detail::Node{[dst, src, bytes]() {
      std::memmove(dst, src, bytes);
      return cudaSuccess;
    }});
    return cudaSuccess;
  }
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  static int the_stream;
  *s = reinterpret_cast<cudaStream_t>(&the_stream);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t) {
  std::lock_guard lock(detail::g_mu);
  if (detail::capturing_here()) return detail::refuse_in_capture("cudaStreamSynchronize");
  const cudaError_t e = dev().pending;
  dev().pending = cudaSuccess;
  return e;
}

cudaError_t cudaGetLastError() {
  std::lock_guard lock(detail::g_mu);
  cudaError_t e = dev().last;
  dev().last = cudaSuccess;
  if (e == cudaSuccess) e = dev().pending;  // a kernel that failed shows at its launch's check too
  dev().pending = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() {
  std::lock_guard lock(detail::g_mu);
  return dev().last != cudaSuccess ? dev().last : dev().pending;
}

const char* cudaGetErrorString(cudaError_t e) {
  static thread_local std::string s;
  const char* name = "unknown error";
  switch (e) {
    case cudaSuccess: name = "no error"; break;
    case cudaErrorInvalidValue: name = "invalid argument"; break;
    case cudaErrorMemoryAllocation: name = "out of memory"; break;
    case cudaErrorInvalidConfiguration: name = "invalid configuration argument"; break;
    case cudaErrorInvalidDevice: name = "invalid device ordinal"; break;
    case cudaErrorNoDevice: name = "no CUDA-capable device is detected"; break;
    case cudaErrorInvalidResourceHandle: name = "invalid resource handle"; break;
    case cudaErrorIllegalState: name = "the operation cannot be performed in the present state"; break;
    case cudaErrorLaunchFailure: name = "unspecified launch failure"; break;
    case cudaErrorStreamCaptureUnsupported: name = "operation not permitted when stream is capturing"; break;
    case cudaErrorStreamCaptureInvalidated: name = "operation failed due to a previous error during capture"; break;
    case cudaErrorStreamCaptureWrongThread: name = "attempt to terminate a thread-local capture sequence from another thread"; break;
  }
  std::lock_guard lock(detail::g_mu);
  auto it = dev().detail.find(e);
  s = it == dev().detail.end() ? std::string(name) : std::string(name) + " (cuda-emu: " + it->second + ")";
  return s.c_str();
}

struct CUgraph_st {
  std::vector<detail::Node> nodes;
};
struct CUgraphExec_st {
  std::vector<detail::Node> nodes;
};

cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
  std::lock_guard lock(detail::g_mu);
  detail::Device& d = dev();
  if (d.capturing) return set_error(cudaErrorIllegalState, "the stream is already being captured");
  d.capturing = true;
  d.invalidated = false;
  d.capture_thread = std::this_thread::get_id();
  d.captured.clear();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* g) {
  std::lock_guard lock(detail::g_mu);
  detail::Device& d = dev();
  *g = nullptr;
  if (!d.capturing) return set_error(cudaErrorIllegalState, "cudaStreamEndCapture without a capture");
  if (d.capture_thread != std::this_thread::get_id())
    return set_error(cudaErrorStreamCaptureWrongThread, "the capture began on another thread");
  d.capturing = false;
  std::vector<detail::Node> nodes = std::move(d.captured);
  d.captured.clear();
  if (d.invalidated) {
    d.invalidated = false;
    return set_error(cudaErrorStreamCaptureInvalidated, "a call during the capture was not allowed");
  }
  *g = new CUgraph_st{std::move(nodes)};
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t g, unsigned long long) {
  if (!g) return set_error(cudaErrorInvalidValue, "cudaGraphInstantiate of a null graph");
  *exec = new CUgraphExec_st{g->nodes};
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  delete g;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t) {
  std::lock_guard lock(detail::g_mu);
  if (!exec) return set_error(cudaErrorInvalidResourceHandle, "cudaGraphLaunch of a null graph");
  if (detail::capturing_here()) return detail::refuse_in_capture("cudaGraphLaunch");
  for (const detail::Node& n : exec->nodes)
    if (n.run() != cudaSuccess) break;  // the failure is pending for the next synchronize
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

}  // namespace cuemu
