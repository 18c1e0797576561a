// Decode attention over the paged KV cache (gpu/kernels.h paged_attention_decode) and SwiGLU.
// A CTA per (token, KV head), a warp per query head of its GQA group. Positions go 32 at a time, one
// per lane: the lane's score q.k (K tiles are [head_dim][block_size], so the 32 lanes read 32
// consecutive positions of one dimension: coalesced), a warp max and sum for the online softmax,
// then the 32 weights broadcast by shuffles while each lane accumulates its head_dim / 32 dimensions
// of V (V rows are [block_size][head_dim]: coalesced again). Long contexts with few sequences split
// each (token, KV head)'s positions over several CTAs (flash-decoding) and merge their states. One
// instance per KV cache type (gpu/kv_tile.cuh reads an element as float, scales applied).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "gpu/attention.cuh"
#include "gpu/kernels.h"
#include "gpu/stream.cuh"

namespace tmill::gpu::inline TM_GPU_ABI {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxHeadDim = 256;

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// blockIdx.z is the split: with n_splits > 1 the CTA takes its share of the positions and writes the
// partial state (m, l, unnormalized acc) of each query head to a.partial; else the output.
template <DType T>
__global__ void attn_decode(GpuAttnArgs a, int n_splits) {
  const int64_t t = blockIdx.x, h = blockIdx.y, split = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t G = a.n_head / a.n_head_kv, hd = a.head_dim, bs = a.block_size;
  const int64_t n_ctx = a.n_ctx[t];
  const int32_t* table = a.block_tables + t * a.max_blocks;
  const size_t tile_bytes = KvTile<T>::bytes(hd, bs);
  __shared__ float qs[kWarps][kMaxHeadDim];
  constexpr int kPer = kMaxHeadDim / 32;  // dimensions per lane
  const int64_t first = a.window > 0 && n_ctx > a.window ? n_ctx - a.window : 0;
  // this split's positions: equal shares of the token's own context, whole 32-position chunks
  const int64_t share = ((n_ctx - first + n_splits - 1) / n_splits + 31) / 32 * 32;
  const int64_t begin = first + split * share;
  const int64_t end = begin + share < n_ctx ? begin + share : n_ctx;
  for (int64_t g = warp; g < G; g += kWarps) {
    const int64_t head = h * G + g;
    const float* q = a.q + (t * a.n_head + head) * hd;
    for (int64_t d = lane; d < hd; d += 32) qs[warp][d] = q[d];
    __syncwarp();
    float acc[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k) acc[k] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int64_t p0 = begin; p0 < end; p0 += 32) {
      const int64_t p = p0 + lane;
      float s = -INFINITY;
      if (p < end) {
        const int64_t tile = static_cast<int64_t>(table[p / bs]) * a.n_head_kv + h;
        const uint8_t* kt = a.k_tiles + tile * tile_bytes;
        float dot = 0.0f;
        for (int64_t d = 0; d < hd; ++d) dot += qs[warp][d] * KvTile<T>::k(kt, hd, bs, d, p % bs);
        s = dot * a.scale;
        if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
      }
      const float m_new = fmaxf(m, warp_max(s));
      const float corr = __expf(m - m_new);  // 0 on the first chunk (m = -inf)
      const float w = p < end ? __expf(s - m_new) : 0.0f;
      l = l * corr + warp_sum(w);
#pragma unroll
      for (int k = 0; k < kPer; ++k) acc[k] *= corr;
      m = m_new;
      const int64_t n = end - p0 < 32 ? end - p0 : 32;
      for (int j = 0; j < n; ++j) {
        const float wj = __shfl_sync(0xffffffffu, w, j);
        const int64_t pj = p0 + j;
        const int64_t tile = static_cast<int64_t>(table[pj / bs]) * a.n_head_kv + h;
        const uint8_t* vt = a.v_tiles + tile * tile_bytes;
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
          const int64_t d = lane + 32 * k;
          if (d < hd) acc[k] += wj * KvTile<T>::v(vt, hd, bs, pj % bs, d);
        }
      }
    }
    if (n_splits > 1) {  // partial state: [m, l, acc[hd]] per (token, head, split)
      float* part = a.partial + ((t * a.n_head + head) * n_splits + split) * (hd + 2);
      if (lane == 0) {
        part[0] = m;
        part[1] = l;
      }
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int64_t d = lane + 32 * k;
        if (d < hd) part[2 + d] = acc[k];
      }
    } else {
      float* out = a.out + (t * a.n_head + head) * hd;
      const float inv = a.sinks ? sink_norm(m, l, a.sinks[head])
                                : l > 0.0f ? 1.0f / l : 0.0f;  // an empty context attends to nothing
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const int64_t d = lane + 32 * k;
        if (d < hd) out[d] = acc[k] * inv;
      }
    }
    __syncwarp();
  }
}

// One warp per (token, query head): the splits' states merged, out = sum_s acc_s e^(m_s - M) /
// sum_s l_s e^(m_s - M) with M the largest m_s (empty splits have m = -inf and weigh nothing).
__global__ void attn_merge(GpuAttnArgs a, int n_splits) {
  const int64_t th = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (th >= a.n_tokens * a.n_head) return;
  const int lane = threadIdx.x % 32;
  const int64_t hd = a.head_dim;
  const float* part = a.partial + th * n_splits * (hd + 2);
  float M = -INFINITY;
  for (int s = 0; s < n_splits; ++s) M = fmaxf(M, part[s * (hd + 2)]);
  float L = 0.0f;
  float* out = a.out + th * hd;
  if (M == -INFINITY) {  // an empty context attends to nothing
    for (int64_t d = lane; d < hd; d += 32) out[d] = 0.0f;
    return;
  }
  for (int s = 0; s < n_splits; ++s) L += part[s * (hd + 2) + 1] * __expf(part[s * (hd + 2)] - M);
  const float inv = a.sinks ? sink_norm(M, L, a.sinks[th % a.n_head]) : L > 0.0f ? 1.0f / L : 0.0f;
  for (int64_t d = lane; d < hd; d += 32) {
    float v = 0.0f;
    for (int s = 0; s < n_splits; ++s) v += part[s * (hd + 2) + 2 + d] * __expf(part[s * (hd + 2)] - M);
    out[d] = v * inv;
  }
}

// Prefill (a.tiles): a CTA per (tile, KV head), kWarps warps; the tile's (token, query head) pairs go
// round-robin to the warps, each warp keeping up to kPairsPerWarp online-softmax states (m, l, its lanes'
// share of the output) in registers. Positions go 32 at a time: the CTA stages K (transposed,
// [dimension][position]) and V ([position][dimension]) of those 32 positions in shared memory once, then
// every pair scores them with one position per lane against its own limit (causal: its n_ctx; its
// window), as the decode kernel does, and accumulates V with the weights broadcast by shuffles.
constexpr int kPairsPerWarp = 8;

__global__ void attn_prefill_tiles(GpuAttnArgs a) {
  const int64_t tile = blockIdx.x, h = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t t0 = a.tiles[2 * tile], nt = a.tiles[2 * tile + 1];
  const int64_t G = a.n_head / a.n_head_kv, hd = a.head_dim, P = nt * G;
  const int32_t* table = a.block_tables + t0 * a.max_blocks;  // the tile's sequence
  constexpr int kPer = kMaxHeadDim / 32;
  __shared__ __half ks[kMaxHeadDim][32];
  __shared__ __half vs[32][kMaxHeadDim];
  float m[kPairsPerWarp], l[kPairsPerWarp], acc[kPairsPerWarp][kPer];
#pragma unroll
  for (int i = 0; i < kPairsPerWarp; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) acc[i][k] = 0.0f;
  }
  // the positions any token of the tile attends to: from the first token's window start to the last
  // token's context
  const int64_t first_ctx = a.n_ctx[t0], end = a.n_ctx[t0 + nt - 1];
  const int64_t begin = a.window > 0 && first_ctx > a.window ? first_ctx - a.window : 0;
  for (int64_t p0 = begin; p0 < end; p0 += 32) {
    __syncthreads();  // the previous chunk is read by every warp
    stage_chunk<kKeys>(a, table, h, p0, end, hd, &ks[0][0], 32);
    stage_chunk<kValues>(a, table, h, p0, end, hd, &vs[0][0], kMaxHeadDim);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kPairsPerWarp; ++i) {
      const int64_t pi = warp + static_cast<int64_t>(i) * kWarps;
      if (pi >= P) break;  // the same for the whole warp
      const int64_t t = t0 + pi / G, head = h * G + pi % G;
      const int64_t n_ctx = a.n_ctx[t];
      const int64_t first = a.window > 0 && n_ctx > a.window ? n_ctx - a.window : 0;
      const float* q = a.q + (t * a.n_head + head) * hd;
      const int64_t p = p0 + lane;
      const bool valid = p >= first && p < n_ctx;
      float s = -INFINITY;
      if (valid) {
        float dot = 0.0f;
        for (int64_t d = 0; d < hd; ++d) dot += q[d] * __half2float(ks[d][lane]);
        s = dot * a.scale;
        if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
      }
      const float m_new = fmaxf(m[i], warp_max(s));
      if (m_new == -INFINITY) continue;  // nothing of this pair's range here yet (the warp agrees)
      const float corr = __expf(m[i] - m_new);
      const float w = valid ? __expf(s - m_new) : 0.0f;
      l[i] = l[i] * corr + warp_sum(w);
#pragma unroll
      for (int k = 0; k < kPer; ++k) acc[i][k] *= corr;
      m[i] = m_new;
      for (int j = 0; j < 32; ++j) {
        const float wj = __shfl_sync(0xffffffffu, w, j);
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
          const int64_t d = lane + 32 * k;
          if (d < hd) acc[i][k] += wj * __half2float(vs[j][d]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kPairsPerWarp; ++i) {
    const int64_t pi = warp + static_cast<int64_t>(i) * kWarps;
    if (pi >= P) break;
    const int64_t t = t0 + pi / G, head = h * G + pi % G;
    float* out = a.out + (t * a.n_head + head) * hd;
    const float inv = a.sinks ? sink_norm(m[i], l[i], a.sinks[head]) : l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int64_t d = lane + 32 * k;
      if (d < hd) out[d] = acc[i][k] * inv;
    }
  }
}

__global__ void silu_mul_kernel(float* g, const float* u, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) g[i] = g[i] / (1.0f + __expf(-g[i])) * u[i];
}

// GELU's tanh approximation, as kernels/ops.h gelu_mul: 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2)))
__global__ void gelu_mul_kernel(float* g, const float* u, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = g[i];
  g[i] = 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * x * (1.0f + 0.044715f * x * x))) * u[i];
}

__global__ void softcap_kernel(float* x, int64_t n, float cap) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = cap * tanhf(x[i] / cap);
}


}  // namespace

Status paged_attention_decode(const GpuAttnArgs& a) {
  if (a.n_head_kv <= 0 || a.n_head % a.n_head_kv != 0) return Error{"CUDA attention: n_head must be a multiple of n_head_kv"};
  if (a.head_dim <= 0 || a.head_dim > kMaxHeadDim) return Error{"CUDA attention: head_dim must be 1..256"};
  if (a.block_size <= 0) return Error{"CUDA attention: block_size must be positive"};
  if (!kv_cache_supports(a.kv_dtype))
    return Error{std::string("CUDA attention: KV cache type ") + dtype_name(a.kv_dtype) + " is not supported"};
  if (a.kv_dtype == DType::Q4_0 && (a.block_size % 2 != 0 || a.head_dim % 2 != 0))
    return Error{"CUDA attention: a Q4 KV cache needs an even block size and head size"};
  if (a.n_splits > 65535) return Error{"CUDA attention: at most 65535 splits"};
  if (a.n_tokens <= 0) return {};
  const int64_t G = a.n_head / a.n_head_kv;
  if (a.tiles && a.n_tiles > 0 && attention_prefill_on_tensor_cores(a.n_head, a.n_head_kv, a.head_dim))
    return paged_attention_prefill_tc(a);
  if (a.tiles && a.n_tiles > 0 && G * attention_tile_tokens(a.n_head, a.n_head_kv, a.head_dim) <= kPairsPerWarp * kWarps) {
    if (a.n_tiles > 0x7fffffff) return Error{"CUDA attention: too many prefill tiles"};
    const dim3 grid(static_cast<unsigned>(a.n_tiles), static_cast<unsigned>(a.n_head_kv));
    TM_LAUNCH(attn_prefill_tiles, grid, 32 * kWarps, 0, stream())(a);
    return launched("paged attention (prefill tiles)");
  }
  const int splits = static_cast<int>(attention_splits(a));
  const dim3 grid(static_cast<unsigned>(a.n_tokens), static_cast<unsigned>(a.n_head_kv), static_cast<unsigned>(splits));
  switch (a.kv_dtype) {
    case DType::I8: TM_LAUNCH(attn_decode<DType::I8>, grid, 32 * kWarps, 0, stream())(a, splits); break;
    case DType::F8_E4M3: TM_LAUNCH(attn_decode<DType::F8_E4M3>, grid, 32 * kWarps, 0, stream())(a, splits); break;
    case DType::F8_E5M2: TM_LAUNCH(attn_decode<DType::F8_E5M2>, grid, 32 * kWarps, 0, stream())(a, splits); break;
    case DType::Q4_0: TM_LAUNCH(attn_decode<DType::Q4_0>, grid, 32 * kWarps, 0, stream())(a, splits); break;
    default: TM_LAUNCH(attn_decode<DType::F16>, grid, 32 * kWarps, 0, stream())(a, splits); break;
  }
  TM_TRY(launched("paged attention"));
  if (splits == 1) return {};
  const int64_t heads = a.n_tokens * a.n_head;
  TM_LAUNCH(attn_merge, static_cast<unsigned>((heads + kWarps - 1) / kWarps), 32 * kWarps, 0, stream())(a, splits);
  return launched("paged attention merge");
}

Status silu_mul(float* g, const float* u, int64_t n) {
  if (n <= 0) return {};
  TM_LAUNCH(silu_mul_kernel, static_cast<unsigned>((n + 255) / 256), 256, 0, stream())(g, u, n);
  return launched("silu_mul");
}

Status gelu_mul(float* g, const float* u, int64_t n) {
  if (n <= 0) return {};
  TM_LAUNCH(gelu_mul_kernel, static_cast<unsigned>((n + 255) / 256), 256, 0, stream())(g, u, n);
  return launched("gelu_mul");
}

Status softcap(float* x, int64_t n, float cap) {
  if (n <= 0) return {};
  if (!(cap > 0.0f)) return Error{"CUDA softcap: the cap must be positive"};
  TM_LAUNCH(softcap_kernel, static_cast<unsigned>((n + 255) / 256), 256, 0, stream())(x, n, cap);
  return launched("softcap");
}

}  // namespace tmill::gpu::inline TM_GPU_ABI
