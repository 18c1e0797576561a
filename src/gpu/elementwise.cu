// The GPU forward's small kernels (gpu/kernels.h): the step's embedding rows, residual and bias adds,
// RoPE from per-token cos/sin tables, and the store of a step's K/V into the paged tiles (F16, INT8 or
// Q4). Each is one thread per element (or element pair; the quantized stores one per scale's group);
// they move a few KiB per token and exist so that a step's activations never leave the device.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "gpu/kernels.h"
#include "gpu/kv_tile.cuh"
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

__global__ void add_kernel(float* y, const float* x, int64_t n, float scale) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] += scale == 1.0f ? x[i] : __fmul_rn(scale, x[i]);  // (multiply, then add: the CPU's axpy bits)
}

__global__ void scale_kernel(float* x, int64_t n, float s) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= s;
}

__global__ void attn_temperature_kernel(float* q, const int32_t* pos, int64_t total, int64_t width, float scale,
                                        float floor_len) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const float p = static_cast<float>(pos[i / width]);
  q[i] *= logf(floorf(p / floor_len) + 1.0f) * scale + 1.0f;
}

__global__ void add_rows_kernel(float* y, const float* b, int64_t total, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) y[i] += b[i % n];
}

__global__ void scatter_add_kernel(float* y, const float* u, const int32_t* rows, int64_t total, int64_t n,
                                   float scale) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) y[static_cast<int64_t>(rows[i / n]) * n + i % n] += scale * u[i];
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

// INT8 and FP8: scale = max |x| / the largest code (127, 448, 57344) per (token, head), codes rint(x *
// (1 / scale)) or the nearest FP8 code (core/fp8.h) -- paged_kv_store's operations in its order (no
// fused multiply-adds), so the bytes are the CPU's.
template <DType T>
__device__ float token_scale(const float* x, int64_t n, float* inv) {
  constexpr float top = T == DType::F8_E4M3 ? kFp8E4M3Max : T == DType::F8_E5M2 ? kFp8E5M2Max : 127.0f;
  float m = 0.0f;
  for (int64_t d = 0; d < n; ++d) m = fmaxf(m, fabsf(x[d]));
  const float s = __fdiv_rn(m, top);
  *inv = s > 0.0f ? __fdiv_rn(1.0f, s) : 0.0f;
  return s;
}
template <DType T>
__device__ uint8_t token_code(float x, float inv) {
  const float y = __fmul_rn(x, inv);
  if constexpr (T == DType::F8_E4M3) return fp32_to_fp8_e4m3(y);
  if constexpr (T == DType::F8_E5M2) return fp32_to_fp8_e5m2(y);
  return static_cast<uint8_t>(static_cast<int8_t>(__float2int_rn(y)));
}
// Q4 (kernels/attention.cpp quantize_q4_group): d = (the element of largest magnitude, the first of
// ties) / -8, codes min(15, int(x / d + 8.5)).
__device__ __half q4_scale(const float* x, int64_t n, float* inv) {
  float amax = 0.0f, mx = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    if (fabsf(x[i]) > amax) {
      amax = fabsf(x[i]);
      mx = x[i];
    }
  const float d = __fdiv_rn(mx, -8.0f);
  *inv = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  return __float2half_rn(d);
}
__device__ unsigned q4_code(float x, float inv) {
  const int q = __float2int_rz(__fadd_rn(__fmul_rn(x, inv), 8.5f));
  return static_cast<unsigned>(q < 15 ? q : 15);
}
// Sets the nibble of byte p (high: which & 1) to q with word atomics: the other nibble of a K byte is
// another position's, possibly another thread's of this launch.
__device__ void put_nibble(uint8_t* p, int64_t which, unsigned q) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  auto* word = reinterpret_cast<unsigned*>(addr & ~uintptr_t{3});
  const unsigned shift = static_cast<unsigned>(addr & 3) * 8 + ((which & 1) ? 4u : 0u);
  atomicAnd(word, ~(15u << shift));
  atomicOr(word, q << shift);
}

// One thread per (token, KV head, scale group): INT8's and FP8's group is the head, Q4's kv_q4_group
// dimensions.
template <DType T>
__global__ void kv_store_quant_kernel(GpuKvStoreArgs a) {
  constexpr bool kTokenScaled = T != DType::Q4_0;
  const int64_t hd = a.head_dim, bs = a.block_size;
  const int64_t gs = kTokenScaled ? hd : kv_q4_group_dev(hd), ng = hd / gs;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.n_tokens * a.n_head_kv * ng) return;
  const int64_t t = i / (a.n_head_kv * ng), h = i / ng % a.n_head_kv, g = i % ng;
  const int64_t pos = a.pos[t], slot = pos % bs;
  const int64_t block = a.block_tables[t * a.max_blocks + pos / bs];
  const size_t off = static_cast<size_t>(block * a.n_head_kv + h) * KvTile<T>::bytes(hd, bs);
  uint8_t* kt = a.k_tiles + off;
  uint8_t* vt = a.v_tiles + off;
  const float* kx = a.k + (t * a.n_head_kv + h) * hd + g * gs;
  const float* vx = a.v + (t * a.n_head_kv + h) * hd + g * gs;
  if constexpr (kTokenScaled) {
    float ki, vi;
    const float ks = token_scale<T>(kx, hd, &ki), vs = token_scale<T>(vx, hd, &vi);
    for (int64_t d = 0; d < hd; ++d) {
      kt[d * bs + slot] = token_code<T>(kx[d], ki);
      vt[slot * hd + d] = token_code<T>(vx[d], vi);
    }
    memcpy(kt + hd * bs + slot * 4, &ks, 4);
    memcpy(vt + hd * bs + slot * 4, &vs, 4);
  } else {
    float ki, vi;
    const __half ks = q4_scale(kx, gs, &ki), vs = q4_scale(vx, gs, &vi);
    for (int64_t e = 0; e < gs; ++e) put_nibble(kt + (g * gs + e) * (bs / 2) + slot / 2, slot, q4_code(kx[e], ki));
    for (int64_t e = 0; e < gs; e += 2)  // a V byte is two dimensions of this group: this thread's alone
      vt[slot * (hd / 2) + (g * gs + e) / 2] =
          static_cast<uint8_t>(q4_code(vx[e], vi) | (q4_code(vx[e + 1], vi) << 4));
    memcpy(kt + hd * bs / 2 + (g * bs + slot) * 2, &ks, 2);
    memcpy(vt + hd * bs / 2 + (slot * ng + g) * 2, &vs, 2);
  }
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
      with_block_type(type, [&](auto t) {
        TM_LAUNCH(get_rows_blocks<decltype(t)::value>, blocks_for(runs), kThreads, 0, stream())(wb, row_bytes, cols, ids,
                                                                                                 n, out, scale);
      });
  }
  return launched("get_rows");
}

Status add(float* y, const float* x, int64_t n, float scale) {
  if (n <= 0) return {};
  TM_LAUNCH(add_kernel, blocks_for(n), kThreads, 0, stream())(y, x, n, scale);
  return launched("add");
}

Status scale(float* x, int64_t n, float s) {
  if (n <= 0) return {};
  TM_LAUNCH(scale_kernel, blocks_for(n), kThreads, 0, stream())(x, n, s);
  return launched("scale");
}

Status attn_temperature(float* q, const int32_t* pos, int64_t n_tokens, int64_t width, float scale, int64_t floor_len) {
  if (n_tokens <= 0 || width <= 0) return {};
  if (floor_len <= 0) return Error{"CUDA attn_temperature: the floor length must be positive"};
  TM_LAUNCH(attn_temperature_kernel, blocks_for(n_tokens * width), kThreads, 0, stream())(
      q, pos, n_tokens * width, width, scale, static_cast<float>(floor_len));
  return launched("attn_temperature");
}

Status add_rows(float* y, const float* b, int64_t n_rows, int64_t n) {
  if (n_rows <= 0 || n <= 0) return {};
  TM_LAUNCH(add_rows_kernel, blocks_for(n_rows * n), kThreads, 0, stream())(y, b, n_rows * n, n);
  return launched("add_rows");
}

Status scatter_add(float* y, const float* u, const int32_t* rows, int64_t n_rows, int64_t n, float scale) {
  if (n_rows <= 0 || n <= 0) return {};
  TM_LAUNCH(scatter_add_kernel, blocks_for(n_rows * n), kThreads, 0, stream())(y, u, rows, n_rows * n, n, scale);
  return launched("scatter_add");
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
  if (!kv_cache_supports(a.kv_dtype))
    return Error{std::string("CUDA kv_store: KV cache type ") + dtype_name(a.kv_dtype) + " is not supported"};
  if (a.kv_dtype == DType::Q4_0 && (a.block_size % 2 != 0 || a.head_dim % 2 != 0))
    return Error{"CUDA kv_store: a Q4 KV cache needs an even block size and head size"};
  if (a.n_tokens <= 0 || a.n_head_kv <= 0 || a.head_dim <= 0) return {};
  if (a.kv_dtype == DType::I8) {
    TM_LAUNCH(kv_store_quant_kernel<DType::I8>, blocks_for(a.n_tokens * a.n_head_kv), kThreads, 0, stream())(a);
  } else if (a.kv_dtype == DType::F8_E4M3) {
    TM_LAUNCH(kv_store_quant_kernel<DType::F8_E4M3>, blocks_for(a.n_tokens * a.n_head_kv), kThreads, 0, stream())(a);
  } else if (a.kv_dtype == DType::F8_E5M2) {
    TM_LAUNCH(kv_store_quant_kernel<DType::F8_E5M2>, blocks_for(a.n_tokens * a.n_head_kv), kThreads, 0, stream())(a);
  } else if (a.kv_dtype == DType::Q4_0) {
    const int64_t groups = a.head_dim / kv_q4_group_dev(a.head_dim);
    TM_LAUNCH(kv_store_quant_kernel<DType::Q4_0>, blocks_for(a.n_tokens * a.n_head_kv * groups), kThreads, 0,
              stream())(a);
  } else {
    TM_LAUNCH(kv_store_kernel, blocks_for(a.n_tokens * a.n_head_kv * a.head_dim), kThreads, 0, stream())(a);
  }
  return launched("kv_store");
}

}  // namespace tmill::gpu::inline TM_GPU_ABI
