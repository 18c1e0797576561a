// The GPU forward's small kernels (gpu/kernels.h): the step's embedding rows, residual and bias adds,
// RoPE from per-token cos/sin tables, and the store of a step's K/V into the paged F16 tiles. Each is one thread per
// element (or element pair); they move a few KiB per token and exist so that a step's activations
// never leave the device.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "gpu/kernels.h"
#include "gpu/quant.cuh"
#include "gpu/stream.cuh"

namespace tmill::gpu::inline TM_GPU_ABI {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// Block types: one thread per 32-element run of a selected row.
template <DType T>
__global__ void get_rows_blocks(const uint8_t* w, size_t row_bytes, int64_t cols, const int32_t* ids, int64_t n,
                                float* out, float scale) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, runs = cols / 32;
  if (i >= n * runs) return;
  const int64_t t = i / runs, c = i % runs;
  dequantize_run<T>(w + static_cast<size_t>(ids[t]) * row_bytes, c, out + t * cols + 32 * c, scale);
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// F32 / F16 / BF16: one thread per element.
template <class H>
__global__ void get_rows_floats(const uint8_t* w, size_t row_bytes, int64_t cols, const int32_t* ids, int64_t n,
                                float* out, float scale) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * cols) return;
  const H* row = reinterpret_cast<const H*>(w + static_cast<size_t>(ids[i / cols]) * row_bytes);
  out[i] = to_float(row[i % cols]) * scale;
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

__global__ void add_rows_kernel(float* y, const float* b, int64_t total, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) y[i] += b[i % n];
}

__global__ void add_rows_id_kernel(float* y, const float* b, const int32_t* ids, int64_t total, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) y[i] += b[static_cast<int64_t>(ids[i / n]) * n + i % n];
}

__global__ void swiglu_oai_kernel(float* g, const float* u, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = fminf(g[i], 7.0f);
  g[i] = x / (1.0f + __expf(-1.702f * x)) * (fminf(fmaxf(u[i], -7.0f), 7.0f) + 1.0f);
}

// One CTA of kArgmaxThreads per row: each thread the first maximum of its stride, then a tree in shared
// memory keeping the larger value, the smaller index on ties.
constexpr int kArgmaxThreads = 256;
__global__ void argmax_kernel(const float* x, int64_t n, int32_t* out) {
  const float* row = x + static_cast<int64_t>(blockIdx.x) * n;
  float best = -INFINITY;
  int64_t at = -1;
  for (int64_t i = threadIdx.x; i < n; i += kArgmaxThreads)
    if (row[i] > best || (at < 0 && row[i] == best)) best = row[i], at = i;
  __shared__ float v[kArgmaxThreads];
  __shared__ int64_t ix[kArgmaxThreads];
  v[threadIdx.x] = best;
  ix[threadIdx.x] = at;
  __syncthreads();
  for (unsigned s = kArgmaxThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float ov = v[threadIdx.x + s];
      const int64_t oi = ix[threadIdx.x + s];
      const bool take = oi >= 0 && (ix[threadIdx.x] < 0 || ov > v[threadIdx.x] || (ov == v[threadIdx.x] && oi < ix[threadIdx.x]));
      if (take) v[threadIdx.x] = ov, ix[threadIdx.x] = oi;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<int32_t>(ix[0] < 0 ? 0 : ix[0]);  // all NaN: 0, as the CPU's
}

// One thread per (token, head, pair): the same products and order as rope_pairs_scalar /
// rope_neox (v0 * c - v1 * s, v0 * s + v1 * c), without FMA contraction.
__global__ void rope_kernel(GpuRopeArgs a) {
  const int64_t half = a.n_rot / 2;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.n_tokens * a.n_heads * half) return;
  const int64_t p = i % half, th = i / half, t = th / a.n_heads;
  float* v = a.x + th * a.head_dim;
  const float c = a.cos[t * half + p], s = a.sin[t * half + p];
  const int64_t i0 = a.neox ? p : 2 * p, i1 = a.neox ? p + half : 2 * p + 1;
  const float v0 = v[i0], v1 = v[i1];
  v[i0] = __fsub_rn(__fmul_rn(v0, c), __fmul_rn(v1, s));
  v[i1] = __fadd_rn(__fmul_rn(v0, s), __fmul_rn(v1, c));
}

// One thread per (token, kv head, dimension): K goes to [head_dim][block_size] of its tile, V to
// [block_size][head_dim].
__global__ void kv_store_kernel(GpuKvStoreArgs a) {
  const int64_t kd = a.n_head_kv * a.head_dim;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.n_tokens * kd) return;
  const int64_t t = i / kd, hd = i % kd, h = hd / a.head_dim, d = hd % a.head_dim;
  const int64_t pos = a.pos[t], bs = a.block_size;
  const int64_t block = a.block_tables[t * a.max_blocks + pos / bs], slot = pos % bs;
  const size_t tile = static_cast<size_t>(block * a.n_head_kv + h) * static_cast<size_t>(a.head_dim * bs);  // halves
  reinterpret_cast<__half*>(a.k_tiles)[tile + d * bs + slot] = __float2half_rn(a.k[i]);
  reinterpret_cast<__half*>(a.v_tiles)[tile + slot * a.head_dim + d] = __float2half_rn(a.v[i]);
}


}  // namespace

Status get_rows(DType type, const void* w, size_t row_bytes, int64_t cols, const int32_t* ids, int64_t n, float* out,
                float scale) {
  if (!get_rows_supports(type)) return Error{std::string("CUDA get_rows: weight type ") + dtype_name(type) + " is not read"};
  if (n <= 0) return {};
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t total = n * cols, runs = n * (cols / 32);
  switch (type) {
    case DType::F32: TM_LAUNCH(get_rows_floats<float>, blocks_for(total), kThreads, 0, stream())(wb, row_bytes, cols, ids, n, out, scale); break;
    case DType::F16: TM_LAUNCH(get_rows_floats<__half>, blocks_for(total), kThreads, 0, stream())(wb, row_bytes, cols, ids, n, out, scale); break;
    case DType::BF16: TM_LAUNCH(get_rows_floats<__nv_bfloat16>, blocks_for(total), kThreads, 0, stream())(wb, row_bytes, cols, ids, n, out, scale); break;
    default:
      if (cols % dtype_info(type).block_size != 0) return Error{"CUDA get_rows: rows of whole blocks only"};
      switch (type) {
        case DType::Q8_0: TM_LAUNCH(get_rows_blocks<DType::Q8_0>, blocks_for(runs), kThreads, 0, stream())(wb, row_bytes, cols, ids, n, out, scale); break;
        case DType::Q4_0: TM_LAUNCH(get_rows_blocks<DType::Q4_0>, blocks_for(runs), kThreads, 0, stream())(wb, row_bytes, cols, ids, n, out, scale); break;
        case DType::IQ4_NL: TM_LAUNCH(get_rows_blocks<DType::IQ4_NL>, blocks_for(runs), kThreads, 0, stream())(wb, row_bytes, cols, ids, n, out, scale); break;
        case DType::MXFP4: TM_LAUNCH(get_rows_blocks<DType::MXFP4>, blocks_for(runs), kThreads, 0, stream())(wb, row_bytes, cols, ids, n, out, scale); break;
        case DType::Q4_K: TM_LAUNCH(get_rows_blocks<DType::Q4_K>, blocks_for(runs), kThreads, 0, stream())(wb, row_bytes, cols, ids, n, out, scale); break;
        case DType::Q5_K: TM_LAUNCH(get_rows_blocks<DType::Q5_K>, blocks_for(runs), kThreads, 0, stream())(wb, row_bytes, cols, ids, n, out, scale); break;
        case DType::IQ4_XS: TM_LAUNCH(get_rows_blocks<DType::IQ4_XS>, blocks_for(runs), kThreads, 0, stream())(wb, row_bytes, cols, ids, n, out, scale); break;
        default: TM_LAUNCH(get_rows_blocks<DType::Q6_K>, blocks_for(runs), kThreads, 0, stream())(wb, row_bytes, cols, ids, n, out, scale); break;
      }
  }
  return launched("get_rows");
}

Status add(float* y, const float* x, int64_t n) {
  if (n <= 0) return {};
  TM_LAUNCH(add_kernel, blocks_for(n), kThreads, 0, stream())(y, x, n);
  return launched("add");
}

Status add_rows(float* y, const float* b, int64_t n_rows, int64_t n) {
  if (n_rows <= 0 || n <= 0) return {};
  TM_LAUNCH(add_rows_kernel, blocks_for(n_rows * n), kThreads, 0, stream())(y, b, n_rows * n, n);
  return launched("add_rows");
}

Status add_rows_id(float* y, const float* b, const int32_t* ids, int64_t n_rows, int64_t n) {
  if (n_rows <= 0 || n <= 0) return {};
  TM_LAUNCH(add_rows_id_kernel, blocks_for(n_rows * n), kThreads, 0, stream())(y, b, ids, n_rows * n, n);
  return launched("add_rows_id");
}

Status swiglu_oai(float* g, const float* u, int64_t n) {
  if (n <= 0) return {};
  TM_LAUNCH(swiglu_oai_kernel, blocks_for(n), kThreads, 0, stream())(g, u, n);
  return launched("swiglu_oai");
}

Status argmax_rows(const float* x, int64_t n_rows, int64_t n, int32_t* out) {
  if (n_rows <= 0 || n <= 0) return {};
  TM_LAUNCH(argmax_kernel, static_cast<unsigned>(n_rows), kArgmaxThreads, 0, stream())(x, n, out);
  return launched("argmax_rows");
}

Status rope(const GpuRopeArgs& a) {
  if (a.n_rot <= 0 || a.n_rot > a.head_dim || a.n_rot % 2 != 0) return Error{"CUDA rope: n_rot must be even and <= head_dim"};
  const int64_t n = a.n_tokens * a.n_heads * (a.n_rot / 2);
  if (n <= 0) return {};
  TM_LAUNCH(rope_kernel, blocks_for(n), kThreads, 0, stream())(a);
  return launched("rope");
}

Status kv_store(const GpuKvStoreArgs& a) {
  if (a.block_size <= 0 || a.max_blocks <= 0) return Error{"CUDA kv_store: block_size and max_blocks must be positive"};
  const int64_t n = a.n_tokens * a.n_head_kv * a.head_dim;
  if (n <= 0) return {};
  TM_LAUNCH(kv_store_kernel, blocks_for(n), kThreads, 0, stream())(a);
  return launched("kv_store");
}

}  // namespace tmill::gpu::inline TM_GPU_ABI
