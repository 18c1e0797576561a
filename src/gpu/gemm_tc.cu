// Prefill and large batches on tensor cores (gpu/kernels.h gemm_tc): y[t][r] = sum_k x[t][k] W[r][k]
// with WMMA 16x16x16 tiles and FP32 accumulation. The activations are rounded to F16 (BF16 for BF16
// weights) into the workspace, token chunks zero-padded to whole tiles; quantized weights are first
// dequantized to F16 into the workspace, a chunk of rows at a time (llama.cpp's CUDA backend does the
// same before its cuBLAS GEMM for large batches). CTAs of 64 (or 32) tokens x 128 rows stage their
// operands through shared memory (wmma_gemm_tiled), so each weight and activation element read from
// global memory serves 64 (32) tokens or 128 rows of products instead of 16.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <string>

#include "gpu/kernels.h"
#include "gpu/quant.cuh"
#include "gpu/stream.cuh"
#include "gpu/vec.cuh"

namespace tmill::gpu::inline TM_GPU_ABI {
namespace {

template <class H>
__device__ __forceinline__ H to_half(float v);
template <>
__device__ __forceinline__ __half to_half<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 to_half<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// xh[t][k] = x[t][k] for t < n, 0 for the padding tokens up to n_pad.
template <class H>
__global__ void round_activations(const float* x, int64_t n, int64_t n_pad, int64_t cols, H* xh) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_pad * cols) return;
  xh[i] = to_half<H>(i / cols < n ? x[i] : 0.0f);
}

// One thread per 32 elements of a row (a Q8_0/Q4_0 block, or a 32-element run of a K-quant
// super-block) of rows [0, n_rows) of W, written as F16 into wh (cols per row).
template <DType T>
__global__ void dequantize_rows(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t cols, __half* wh) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t per_row = cols / 32;
  if (i >= n_rows * per_row) return;
  const int64_t r = i / per_row, c = i % per_row;  // run c: elements 32c .. 32c + 31
  dequantize_run<T>(w + static_cast<size_t>(r) * row_bytes, c, wh + r * cols + 32 * c, 1.0f);
}

// A CTA computes a tile of BM tokens x kBN rows of y, walking k in steps of kBK through shared
// memory: each step's A (tokens) and B (weight rows) tiles are read from global memory with 16-byte
// loads, one step ahead into registers while the warps multiply the step before (two shared buffers,
// one barrier per step). Warps are (BM / 32) x 4, each owning 32 tokens x 32 rows = 2 x 2 WMMA
// accumulators; every operand fragment read from shared memory serves two products. BM is 64 for
// long token runs and 32 for short ones (more CTAs when there are few token tiles).
constexpr int kBN = 128, kBK = 32;

constexpr int kLd = kBK + 8;  // shared rows 80 bytes apart: 16-byte aligned for the loads, banks staggered

template <class H, int BM>
__global__ void __launch_bounds__(BM * 4) wmma_gemm_tiled(const H* xh, const H* wh, int64_t ldw, int64_t rows,
                                                           int64_t cols, int64_t n, int64_t n_pad, float* y,
                                                           int64_t ldy, int64_t r_off) {
  using namespace nvcuda;
  constexpr int kThreads = BM * 4, kBLoads = kBN * kBK / 8 / kThreads;  // A: one 16-byte load per thread
  struct alignas(32) Tiles {  // (WMMA's 256-bit aligned fragment pointers)
    H a[2][BM * kLd], b[2][kBN * kLd];
  };
  __shared__ Tiles sm;
  auto& as = sm.a;
  auto& bs = sm.b;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int wm = warp / 4, wn = warp % 4;
  const int64_t t_base = static_cast<int64_t>(blockIdx.y) * BM, r_base = static_cast<int64_t>(blockIdx.x) * kBN;
  uint4 ra, rb[kBLoads];
  // step k0's tiles into registers: zeros past the tokens, rows or columns (cols is a multiple of 16,
  // so a 16-byte chunk of 8 is wholly inside or wholly outside)
  auto fetch = [&](int64_t k0) {
    const int64_t t = t_base + tid / 4, k = k0 + (tid % 4) * 8;
    ra = t < n_pad && k < cols ? load16(xh + t * cols + k) : uint4{0u, 0u, 0u, 0u};
    for (int i = 0; i < kBLoads; ++i) {
      const int c = tid + i * kThreads;
      const int64_t r = r_base + c / 4, kb = k0 + (c % 4) * 8;
      rb[i] = r < rows && kb < cols ? load16(wh + r * ldw + kb) : uint4{0u, 0u, 0u, 0u};
    }
  };
  auto stash = [&](int buf) {
    store16(&as[buf][(tid / 4) * kLd + (tid % 4) * 8], ra);
    for (int i = 0; i < kBLoads; ++i) {
      const int c = tid + i * kThreads;
      store16(&bs[buf][(c / 4) * kLd + (c % 4) * 8], rb[i]);
    }
  };
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (auto& row : acc)
    for (auto& f : row) wmma::fill_fragment(f, 0.0f);
  fetch(0);
  stash(0);
  __syncthreads();
  const int64_t steps = (cols + kBK - 1) / kBK;
  for (int64_t s = 0; s < steps; ++s) {
    const int buf = static_cast<int>(s & 1);
    if (s + 1 < steps) fetch((s + 1) * kBK);
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, H, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, H, wmma::col_major> b[2];  // W^T: W's rows are its columns
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &as[buf][(wm * 32 + i * 16) * kLd + kk], kLd);
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], &bs[buf][(wn * 32 + j * 16) * kLd + kk], kLd);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    if (s + 1 < steps) stash(buf ^ 1);  // (buf ^ 1 was last read before the previous barrier)
    __syncthreads();
  }
  // Whole 16 x 16 tiles of real tokens go straight to y; a tile with padding tokens goes through
  // shared memory (free after the last barrier), so only real rows of y are written.
  float* scratch = reinterpret_cast<float*>(&sm) + warp * 256;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      const int64_t t0 = t_base + wm * 32 + i * 16, r0 = r_base + wn * 32 + j * 16;
      if (t0 >= n || r0 >= rows) continue;  // (warp-uniform; rows is a multiple of 16)
      if (t0 + 16 <= n) {
        wmma::store_matrix_sync(y + t0 * ldy + r_off + r0, acc[i][j], static_cast<unsigned>(ldy), wmma::mem_row_major);
        continue;
      }
      wmma::store_matrix_sync(scratch, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32)
        if (t0 + e / 16 < n) y[(t0 + e / 16) * ldy + r_off + r0 + e % 16] = scratch[e];
      __syncwarp();
    }
}

// xh: n_pad x cols (ld cols), wh: rows x cols (ld ldw elements), y: n real tokens x ldy floats, this
// call's rows starting at column r_off.
template <class H>
Status run_tiles(const H* xh, const H* wh, int64_t ldw, int64_t rows, int64_t cols, int64_t n, int64_t n_pad, float* y,
                 int64_t ldy, int64_t r_off) {
  const auto row_tiles = static_cast<unsigned>((rows + kBN - 1) / kBN);
  if (n_pad >= kGemmTcLongTokens) {
    const dim3 grid(row_tiles, static_cast<unsigned>((n_pad + 63) / 64));
    const auto kernel = &wmma_gemm_tiled<H, 64>;
    TM_LAUNCH(kernel, grid, 256, 0, stream())(xh, wh, ldw, rows, cols, n, n_pad, y, ldy, r_off);
  } else {
    const dim3 grid(row_tiles, static_cast<unsigned>((n_pad + 31) / 32));
    const auto kernel = &wmma_gemm_tiled<H, 32>;
    TM_LAUNCH(kernel, grid, 128, 0, stream())(xh, wh, ldw, rows, cols, n, n_pad, y, ldy, r_off);
  }
  return launched("tensor-core gemm");
}

Status dequantize(DType type, const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t cols, __half* wh) {
  const int64_t runs = n_rows * (cols / 32);
  const unsigned blocks = static_cast<unsigned>((runs + 255) / 256);
  const bool known = with_block_type(type, [&](auto t) {
    TM_LAUNCH(dequantize_rows<decltype(t)::value>, blocks, 256, 0, stream())(w, row_bytes, n_rows, cols, wh);
  });
  if (!known) return Error{std::string("CUDA gemm_tc: weight type ") + dtype_name(type) + " is not decoded"};
  return launched("dequantize for the tensor-core gemm");
}

}  // namespace

Status gemm_tc(DType type, const void* w, int64_t rows, int64_t cols, size_t row_bytes, const float* x, int64_t n_tokens,
               float* y, void* workspace, size_t workspace_bytes) {
  if (!gemm_tc_supports(type, rows, cols, row_bytes))
    return gemm(type, w, rows, cols, row_bytes, x, n_tokens, y);
  if (n_tokens <= 0) return {};
  const bool quantized = type != DType::F16 && type != DType::BF16;
  // workspace: activations of a token chunk, then (quantized) a chunk of dequantized rows; both whole
  // 16-wide tiles, split evenly when both are needed
  const size_t x_bytes = quantized ? workspace_bytes / 2 / 256 * 256 : workspace_bytes;
  const int64_t tok_chunk = static_cast<int64_t>(x_bytes / (static_cast<size_t>(cols) * 2)) / 16 * 16;
  const int64_t row_chunk =
      quantized ? std::min<int64_t>(rows, static_cast<int64_t>((workspace_bytes - x_bytes) / (static_cast<size_t>(cols) * 2)) / 16 * 16)
                : rows;
  if (!workspace || tok_chunk < 16 || row_chunk < 16) return gemm(type, w, rows, cols, row_bytes, x, n_tokens, y);
  const auto* wb = static_cast<const uint8_t*>(w);
  for (int64_t t = 0; t < n_tokens; t += tok_chunk) {
    const int64_t n = std::min(tok_chunk, n_tokens - t), n_pad = (n + 15) / 16 * 16;
    const unsigned blocks = static_cast<unsigned>((n_pad * cols + 255) / 256);
    if (type == DType::BF16) {
      auto* xh = static_cast<__nv_bfloat16*>(workspace);
      TM_LAUNCH(round_activations<__nv_bfloat16>, blocks, 256, 0, stream())(x + t * cols, n, n_pad, cols, xh);
      TM_TRY(launched("rounding activations"));
      TM_TRY(run_tiles(xh, reinterpret_cast<const __nv_bfloat16*>(wb), static_cast<int64_t>(row_bytes / 2), rows, cols, n,
                       n_pad, y + t * rows, rows, 0));
      continue;
    }
    auto* xh = static_cast<__half*>(workspace);
    TM_LAUNCH(round_activations<__half>, blocks, 256, 0, stream())(x + t * cols, n, n_pad, cols, xh);
    TM_TRY(launched("rounding activations"));
    if (!quantized) {
      TM_TRY(run_tiles(xh, reinterpret_cast<const __half*>(wb), static_cast<int64_t>(row_bytes / 2), rows, cols, n, n_pad,
                       y + t * rows, rows, 0));
      continue;
    }
    auto* wh = reinterpret_cast<__half*>(static_cast<uint8_t*>(workspace) + x_bytes);
    for (int64_t r = 0; r < rows; r += row_chunk) {
      const int64_t nr = std::min(row_chunk, rows - r);
      TM_TRY(dequantize(type, wb + static_cast<size_t>(r) * row_bytes, row_bytes, nr, cols, wh));
      TM_TRY(run_tiles(xh, static_cast<const __half*>(wh), cols, nr, cols, n, n_pad, y + t * rows, rows, r));
    }
  }
  return {};
}

}  // namespace tmill::gpu::inline TM_GPU_ABI
