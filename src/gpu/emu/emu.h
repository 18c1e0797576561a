// The CUDA programming model on the CPU, for `--device cuda-emu`: the backend's .cu files compile as
// plain C++ against this header (it stands in for cuda_runtime.h, cuda_fp16.h, cuda_bf16.h and mma.h,
// the files beside it) and their kernels run on the host, every CUDA thread a fiber. A block's threads
// run one at a time on the launching thread and switch only where CUDA threads meet: __syncthreads
// (the block's live threads), __syncwarp, the shuffles and the WMMA calls (the warp's lanes). So the
// kernels' indexing, their barriers and shuffles, shared memory, the launch bounds (threads per block,
// grid limits) and CUDA graphs' capture rules are exercised without a GPU; timing, the memory model
// and the tensor cores' exact rounding are not. A lane that a shuffle or __syncwarp names but that has
// exited, or threads that wait at different barriers forever, fail the launch with what happened
// (cudaErrorLaunchFailure from the next synchronize, the message from cudaGetErrorString).
//
// Launches run synchronously, in order (one stream); while a stream is captured they are recorded
// with their arguments, as CUDA graphs do, and cudaGraphLaunch runs the recording. Device memory is
// host memory from cudaMalloc, counted against the emulated device's size (TOKENMILL_CUDA_EMU_MEMORY,
// bytes, default 4 GiB), and copies check that their device side lies in an allocation.
// Included only by the translation units of the emulated build (src/CMakeLists.txt) and the emulator's
// own tests; gpu/emu/fibers.cpp implements the device side, gpu/emu/runtime.cpp the runtime API.
#pragma once

#include <math.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/fp16.h"

namespace cuemu {

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};

// ---- the runtime API (the subset the backend uses) ----
enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevice = 101,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorLaunchFailure = 719,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureWrongThread = 908,
};
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1, cudaStreamCaptureModeRelaxed = 2 };
inline constexpr unsigned cudaStreamNonBlocking = 1;
struct CUstream_st;
struct CUgraph_st;
struct CUgraphExec_st;
using cudaStream_t = CUstream_st*;
using cudaGraph_t = CUgraph_st*;
using cudaGraphExec_t = CUgraphExec_st*;
struct cudaDeviceProp {
  char name[256] = {};
  int major = 0, minor = 0, multiProcessorCount = 0;
  size_t totalGlobalMem = 0;
};

cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
cudaError_t cudaMalloc(void** p, size_t bytes);
cudaError_t cudaFree(void* p);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s = nullptr);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorString(cudaError_t e);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t g, unsigned long long flags = 0);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);

// ---- device side ----
namespace detail {
struct Fiber;
struct Block {
  uint3 block_idx;
  dim3 block_dim, grid_dim;
};
extern thread_local Fiber* current;  // the emulated thread running now
extern thread_local Block block;     // its block
const uint3& thread_idx();
int lane();
void syncthreads();
void syncwarp(unsigned mask);
uint64_t exchange(unsigned mask, uint64_t value, int src_lane);  // a shuffle's word from src_lane
// Fails the running launch (what the hardware would fault or leave undefined), naming why.
[[noreturn]] void fail(const char* why);
// Runs (or, while the stream is captured, records) body once per thread of the grid.
void launch(const char* name, dim3 grid, dim3 block, std::function<void()> body);

template <class T>
T shuffle(unsigned mask, T v, int src) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move words of up to 8 bytes");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof v);
  b = exchange(mask, b, src);
  T r;
  std::memcpy(&r, &b, sizeof r);
  return r;
}
}  // namespace detail

// kernel<<<grid, block, shared, stream>>>(args...) is TM_LAUNCH(kernel, grid, block, shared, stream)(args...)
// (gpu/stream.cuh); here that is launcher(kernel, "kernel", grid, block)(args...): the arguments
// converted to the kernel's parameter types and kept by value, as a launch does.
template <class... P>
struct Launch {
  void (*fn)(P...);
  const char* name;
  dim3 grid, block;
  template <class... A>
  void operator()(A&&... a) const {
    std::tuple<std::decay_t<P>...> args(std::forward<A>(a)...);
    detail::launch(name, grid, block, [f = fn, args]() { std::apply(f, args); });
  }
};
template <class... P>
Launch<P...> launcher(void (*fn)(P...), const char* name, dim3 grid, dim3 block) {
  return Launch<P...>{fn, name, grid, block};
}

}  // namespace cuemu

using namespace cuemu;  // as the CUDA runtime's names are global

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __constant__
#define __launch_bounds__(...)  // (a register budget for nvcc; launches are checked against kMaxThreads here)
// Shared memory: one instance per kernel, which the block's fibers share; blocks run one at a time.
#define __shared__ static
#define threadIdx (::cuemu::detail::thread_idx())
#define blockIdx (::cuemu::detail::block.block_idx)
#define blockDim (::cuemu::detail::block.block_dim)
#define gridDim (::cuemu::detail::block.grid_dim)

inline void __syncthreads() { cuemu::detail::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { cuemu::detail::syncwarp(mask); }
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return cuemu::detail::shuffle(mask, v, cuemu::detail::lane() ^ lane_mask);
}
template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return cuemu::detail::shuffle(mask, v, src & 31);
}
// Fibers switch only at barriers, so a read-modify-write is atomic here.
template <class T>
T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
inline unsigned atomicAnd(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p = old & v;
  return old;
}
inline unsigned atomicOr(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p = old | v;
  return old;
}

inline float __expf(float x) { return expf(x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
// (the emulated build compiles with -ffp-contract=off: a * b + c is never fused, as these promise)
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }  // (round-to-nearest-even mode)
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }

// ---- cuda_fp16.h / cuda_bf16.h ----
struct __half {
  uint16_t bits;
};
struct __nv_bfloat16 {
  uint16_t bits;
};
inline float __half2float(__half h) { return tmill::fp16_to_fp32(h.bits); }
inline __half __float2half_rn(float v) { return __half{tmill::fp32_to_fp16(v)}; }
inline __half __ushort_as_half(unsigned short u) { return __half{u}; }
inline float __bfloat162float(__nv_bfloat16 h) { return tmill::bf16_to_fp32(h.bits); }
inline __nv_bfloat16 __float2bfloat16_rn(float v) { return __nv_bfloat16{tmill::fp32_to_bf16(v)}; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16{u}; }

// ---- mma.h: WMMA 16x16x16, F16/BF16 in, FP32 accumulation ----
// A fragment holds the whole tile in every lane; lane l computes and stores rows l % 16 (lanes l and
// l + 16 agree), so a lane that skips a call leaves its rows out, as on the hardware, and the warp
// meets at each call. Products are exact in FP32 and summed in k's order (the tensor cores' internal
// order and rounding differ; tests compare with a tolerance).
namespace nvcuda::wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  float v[16][16];
};
namespace detail {
inline float to_f(__half h) { return __half2float(h); }
inline float to_f(__nv_bfloat16 h) { return __bfloat162float(h); }
// The CUDA C++ Programming Guide's conditions on load/store_matrix_sync: a 256-bit aligned pointer and
// a leading dimension that is a multiple of 16 bytes (8 half elements, 4 floats).
template <class T>
void check_tile(const T* p, unsigned ldm) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0) cuemu::detail::fail("a WMMA load or store at a pointer not 256-bit aligned");
  if ((static_cast<size_t>(ldm) * sizeof(T)) % 16 != 0) cuemu::detail::fail("a WMMA leading dimension not a multiple of 16 bytes");
}
}  // namespace detail
template <class Use, class T, class Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm) {
  cuemu::detail::syncwarp(0xffffffffu);
  detail::check_tile(p, ldm);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      const size_t at = std::is_same_v<Layout, row_major> ? static_cast<size_t>(i) * ldm + j : static_cast<size_t>(j) * ldm + i;
      f.v[i][j] = detail::to_f(p[at]);
    }
}
template <class T>
void fill_fragment(fragment<accumulator, 16, 16, 16, T>& f, float v) {
  for (auto& row : f.v)
    for (float& x : row) x = v;
}
template <class T, class LA, class LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, T, LA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  cuemu::detail::syncwarp(0xffffffffu);
  const int i = cuemu::detail::lane() % 16;
  float out[16];
  for (int j = 0; j < 16; ++j) {
    float s = c.v[i][j];
    for (int k = 0; k < 16; ++k) s += a.v[i][k] * b.v[k][j];
    out[j] = s;
  }
  for (int j = 0; j < 16; ++j) d.v[i][j] = out[j];
}
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm, layout_t layout) {
  cuemu::detail::syncwarp(0xffffffffu);
  detail::check_tile(p, ldm);
  const int i = cuemu::detail::lane() % 16;
  for (int j = 0; j < 16; ++j)
    p[layout == mem_row_major ? static_cast<size_t>(i) * ldm + j : static_cast<size_t>(j) * ldm + i] = f.v[i][j];
}
}  // namespace nvcuda::wmma
