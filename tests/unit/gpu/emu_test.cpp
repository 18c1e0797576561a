// The CPU's emulator of CUDA (gpu/emu/emu.h), which runs the CUDA backend's kernels for
// `--device cuda-emu` and kernels_emu_test.cpp: CUDA's execution model where kernels depend on it
// (block barriers and shared memory, warp shuffles, launch limits, stream capture into graphs, device
// memory), and the misuse a GPU punishes (a shuffle with an exited lane, threads at different
// barriers, a synchronize inside a capture) failing with a message rather than passing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu/emu/emu.h"

namespace {

// Shared memory and __syncthreads: a tree sum over the block's 64 threads, one block per row.
__global__ void block_sum(const int* x, int* out) {
  __shared__ int s[64];
  s[threadIdx.x] = x[blockIdx.x * 64 + threadIdx.x];
  __syncthreads();
  for (unsigned k = 32; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

// A butterfly of xor shuffles (every lane gets the warp's sum) and a broadcast from lane 5.
__global__ void warp_ops(int* sums, int* bcast) {
  int v = static_cast<int>(threadIdx.x);
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  sums[threadIdx.x] = v;
  bcast[threadIdx.x] = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x % 32) * 10, 5);
}

// Lane 3 leaves before the others shuffle with the full mask.
__global__ void shuffle_after_exit(int* out) {
  if (threadIdx.x == 3) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
}

// The lower half-warp shuffles among itself but names lane 20, outside its mask.
__global__ void shuffle_outside_mask(int* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_sync(0x0000ffffu, static_cast<int>(threadIdx.x), 20);
}

// Half the warp at __syncwarp, the other half at __syncthreads: neither barrier can complete.
__global__ void split_barriers(int* out) {
  if (threadIdx.x < 16) __syncwarp();
  else __syncthreads();
  out[threadIdx.x] = 1;
}

// One 16x16x16 WMMA product: c = a b (a row-major, b column-major), as gemm_tc.cu uses them.
__global__ void wmma_tile(const __half* a, const __half* b, float* c, unsigned ldc) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(c, acc, ldc, wmma::mem_row_major);
}

__global__ void add_k(int* x, int k, int n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < static_cast<unsigned>(n)) x[i] += k;
}

template <class T>
T* device_array(const std::vector<T>& host) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return static_cast<T*>(p);
}
template <class T>
std::vector<T> host_copy(const T* p, size_t n) {
  std::vector<T> v(n);
  EXPECT_EQ(cudaMemcpyAsync(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

TEST(CudaEmu, SharedMemoryAndBlockBarriersGiveEachBlocksSum) {
  std::vector<int> x(3 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int>(i);
  int* dx = device_array(x);
  int* dout = device_array(std::vector<int>(3, -1));
  cuemu::launcher(block_sum, "block_sum", 3, 64)(dx, dout);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  const auto got = host_copy(dout, 3);
  for (int b = 0; b < 3; ++b) EXPECT_EQ(got[static_cast<size_t>(b)], 64 * 64 * b + 63 * 64 / 2) << b;
  cudaFree(dx);
  cudaFree(dout);
}

TEST(CudaEmu, ShufflesExchangeValuesAcrossTheWarp) {
  int* sums = device_array(std::vector<int>(64, 0));
  int* bcast = device_array(std::vector<int>(64, 0));
  cuemu::launcher(warp_ops, "warp_ops", 1, 64)(sums, bcast);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  const auto s = host_copy(sums, 64), b = host_copy(bcast, 64);
  for (int t = 0; t < 64; ++t) {
    const int warp = t / 32;
    EXPECT_EQ(s[static_cast<size_t>(t)], 32 * 32 * warp + 31 * 32 / 2) << t;  // each warp's own lanes
    EXPECT_EQ(b[static_cast<size_t>(t)], 50) << t;
  }
  cudaFree(sums);
  cudaFree(bcast);
}

TEST(CudaEmu, AShuffleWithAnExitedLaneFailsTheLaunch) {
  int* out = device_array(std::vector<int>(32, 0));
  cuemu::launcher(shuffle_after_exit, "shuffle_after_exit", 1, 32)(out);
  const cudaError_t e = cudaStreamSynchronize(nullptr);
  ASSERT_EQ(e, cudaErrorLaunchFailure);
  const std::string why = cudaGetErrorString(e);
  EXPECT_NE(why.find("shuffle_after_exit"), std::string::npos) << why;
  EXPECT_NE(why.find("lane 3"), std::string::npos) << why;
  EXPECT_NE(why.find("exited"), std::string::npos) << why;
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);  // reported once
  cudaFree(out);
}

TEST(CudaEmu, AShuffleFromALaneOutsideItsMaskFailsTheLaunch) {
  int* out = device_array(std::vector<int>(32, 0));
  cuemu::launcher(shuffle_outside_mask, "shuffle_outside_mask", 1, 32)(out);
  const cudaError_t e = cudaStreamSynchronize(nullptr);
  ASSERT_EQ(e, cudaErrorLaunchFailure);
  const std::string why = cudaGetErrorString(e);
  EXPECT_NE(why.find("shuffles from lane 20, which does not take part"), std::string::npos) << why;
  cudaFree(out);
}

TEST(CudaEmu, ThreadsWaitingAtDifferentBarriersAreADeadlock) {
  int* out = device_array(std::vector<int>(64, 0));
  cuemu::launcher(split_barriers, "split_barriers", 1, 64)(out);
  const cudaError_t e = cudaGetLastError();
  ASSERT_EQ(e, cudaErrorLaunchFailure);
  const std::string why = cudaGetErrorString(e);
  EXPECT_NE(why.find("deadlock"), std::string::npos) << why;
  cudaFree(out);
}

TEST(CudaEmu, WmmaMultipliesTilesAndRefusesMisalignedOnes) {
  std::vector<__half> a(256), b(256);
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 16; ++k) {
      a[static_cast<size_t>(i * 16 + k)] = __float2half_rn(static_cast<float>(i - k) / 8.0f);
      b[static_cast<size_t>(i * 16 + k)] = __float2half_rn(static_cast<float>((i * k) % 7) / 4.0f);  // column i
    }
  __half* da = device_array(a);
  __half* db = device_array(b);
  float* dc = device_array(std::vector<float>(16 * 24 + 8, 0.0f));
  cuemu::launcher(wmma_tile, "wmma_tile", 1, 32)(da, db, dc, 24u);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  const auto c = host_copy(dc, 16 * 24);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float want = 0.0f;
      for (int k = 0; k < 16; ++k)
        want += __half2float(a[static_cast<size_t>(i * 16 + k)]) * __half2float(b[static_cast<size_t>(j * 16 + k)]);
      EXPECT_FLOAT_EQ(c[static_cast<size_t>(i * 24 + j)], want) << i << "," << j;
    }
  // the hardware's conditions: 256-bit aligned tiles, leading dimensions in multiples of 16 bytes
  cuemu::launcher(wmma_tile, "wmma_tile", 1, 32)(da, db, dc + 4, 24u);
  cudaError_t e = cudaStreamSynchronize(nullptr);
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  EXPECT_NE(std::string(cudaGetErrorString(e)).find("256-bit"), std::string::npos);
  cuemu::launcher(wmma_tile, "wmma_tile", 1, 32)(da, db, dc, 18u);
  e = cudaStreamSynchronize(nullptr);
  EXPECT_EQ(e, cudaErrorLaunchFailure);
  EXPECT_NE(std::string(cudaGetErrorString(e)).find("leading dimension"), std::string::npos);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
}

TEST(CudaEmu, LaunchLimitsAreTheDevicesLimits) {
  int* x = device_array(std::vector<int>(4, 0));
  cuemu::launcher(add_k, "add_k", 1, 1025)(x, 1, 4);  // more than 1024 threads per block
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  cuemu::launcher(add_k, "add_k", cuemu::dim3(1, 65536), 32)(x, 1, 4);  // grid.y past 65535
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  cuemu::launcher(add_k, "add_k", 0, 32)(x, 1, 4);  // an empty grid
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // read once
  EXPECT_EQ(host_copy(x, 4), std::vector<int>(4, 0));  // nothing ran
  cudaFree(x);
}

TEST(CudaEmu, AGraphReplaysTheCapturedLaunchesWithTheirArguments) {
  int* x = device_array(std::vector<int>(100, 1));
  int* y = device_array(std::vector<int>(100, 0));
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  int k = 5;
  cuemu::launcher(add_k, "add_k", 4, 32)(x, k, 100);
  k = 7;  // the launch keeps 5
  ASSERT_EQ(cudaMemcpyAsync(y, x, 100 * sizeof(int), cudaMemcpyDeviceToDevice, s), cudaSuccess);
  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  EXPECT_EQ(host_copy(x, 100), std::vector<int>(100, 1));  // recorded, not run
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  cudaGraphDestroy(g);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(host_copy(x, 100), std::vector<int>(100, 11));
  EXPECT_EQ(host_copy(y, 100), std::vector<int>(100, 11));
  cudaGraphExecDestroy(exec);
  cudaFree(x);
  cudaFree(y);
}

TEST(CudaEmu, WhatACaptureForbidsInvalidatesIt) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t g = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(g, nullptr);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported);  // the forward must allocate before
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);  // an empty capture is fine
  cudaGraphDestroy(g);
}

TEST(CudaEmu, DeviceMemoryIsCountedAndCopiesMustTouchIt) {
  size_t free0 = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
  EXPECT_GT(total, 0u);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1 << 20), cudaSuccess);
  size_t free1 = 0;
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  EXPECT_EQ(free0 - free1, size_t{1} << 20);
  void* q = nullptr;
  EXPECT_EQ(cudaMalloc(&q, total), cudaErrorMemoryAllocation);  // more than is left
  std::vector<char> host(16);
  EXPECT_EQ(cudaMemcpyAsync(host.data(), host.data(), 16, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyAsync(static_cast<char*>(p) + (1 << 20) - 8, host.data(), 16, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);  // past the allocation's end
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  EXPECT_EQ(free1, free0);
}

}  // namespace
