// Decode-time kernels of the CUDA backend (gpu/kernels.h): matrix-vector products that dequantize the
// weights in registers (F32, F16, BF16, Q8_0, Q4_0, MXFP4, IQ4_NL, Q4_K, Q5_K, Q6_K, IQ4_XS in their GGUF
// file layouts), and RMSNorm.
// One warp per output row: the 32 lanes stride over the row's blocks (or elements), each lane keeps a
// float partial sum, and a butterfly of shuffles adds them. Rows are independent and each block is
// read once, so the weights stream from HBM: block types 32 blocks at a time through shared memory
// with 16-byte loads (stage_bytes), half-precision rows with 16-byte loads straight to registers. (No fmt in .cu files: nvcc's front end
// rejects its compile-time format checks.)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <string>

#include "gpu/kernels.h"
#include "gpu/quant.cuh"
#include "gpu/stream.cuh"
#include "gpu/vec.cuh"

namespace tmill::gpu::inline TM_GPU_ABI {
namespace {

constexpr int kWarpsPerBlock = 4;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// GGUF Q8_0 block: f16 d | int8 q[32]; Q4_0: f16 d | uint8 qs[16] (element j: low nibble of qs[j],
// element j + 16: high nibble; value (q - 8) * d).
// MXFP4 (gpt-oss's experts): u8 e (E8M0) | qs[16] E2M1 codes; IQ4_NL: f16 d | qs[16] level indices; both
// in Q4_0's nibble order (element j the low nibble of qs[j], j + 16 the high one).
template <DType T>
__device__ __forceinline__ float block_dot(const uint8_t* blk, const float* x) {
  if constexpr (T == DType::IQ4_NL || T == DType::MXFP4) {  // a 16-level table, Q4_0's nibble order
    const float d = T == DType::MXFP4 ? mxfp4_scale(blk[0]) : f16_at(blk);
    const uint8_t* q = blk + (T == DType::MXFP4 ? 1 : 2);
    const int8_t* levels = T == DType::MXFP4 ? kMxfp4 : kIq4nl;
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      s += static_cast<float>(levels[q[j] & 15]) * x[j];
      s += static_cast<float>(levels[q[j] >> 4]) * x[j + 16];
    }
    return d * s;
  }
  const float d = f16_at(blk);
  float s = 0.0f;
  if constexpr (T == DType::Q8_0) {
    const int8_t* q = reinterpret_cast<const int8_t*>(blk + 2);
#pragma unroll
    for (int j = 0; j < 32; ++j) s += static_cast<float>(q[j]) * x[j];
  } else {
    const uint8_t* q = blk + 2;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      s += static_cast<float>(static_cast<int>(q[j] & 15) - 8) * x[j];
      s += static_cast<float>(static_cast<int>(q[j] >> 4) - 8) * x[j + 16];
    }
  }
  return d * s;
}

// K-quants, 256-element super-blocks (ggml's block_q4_K: f16 d, f16 dmin, 12 bytes of 6-bit scales
// and mins, 128 bytes of nibbles; block_q6_K: 128 bytes of low nibbles, 64 of high bit pairs, 16 int8
// scales, f16 d).

template <DType T>
__device__ __forceinline__ float superblock_dot(const uint8_t* blk, const float* x) {
  if constexpr (T == DType::IQ4_XS) {  // 8 sub-blocks of 32, each its own 6-bit scale
    const uint8_t* qs = blk + 8;
    float s = 0.0f;
    for (int j = 0; j < 8; ++j) {
      float sj = 0.0f;
      for (int l = 0; l < 16; ++l) {
        sj += static_cast<float>(kIq4nl[qs[16 * j + l] & 15]) * x[32 * j + l];
        sj += static_cast<float>(kIq4nl[qs[16 * j + l] >> 4]) * x[32 * j + l + 16];
      }
      s += iq4xs_scale(blk, j) * sj;
    }
    return s;
  } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {  // Q5_K: a fifth bit, qh[e % 32] bit e / 32
    const float d = f16_at(blk), dmin = f16_at(blk + 2);
    const uint8_t* scales = blk + 4;
    const uint8_t* qh = blk + 16;
    const uint8_t* qs = blk + (T == DType::Q5_K ? 48 : 16);
    float s = 0.0f;
    for (int c = 0; c < 4; ++c) {  // 64 elements: sub-blocks 2c (low nibbles) and 2c + 1 (high)
      int sc0, m0, sc1, m1;
      q4k_scale_min(2 * c, scales, &sc0, &m0);
      q4k_scale_min(2 * c + 1, scales, &sc1, &m1);
      float dot0 = 0.0f, dot1 = 0.0f, sum0 = 0.0f, sum1 = 0.0f;
      for (int l = 0; l < 32; ++l) {
        const float x0 = x[64 * c + l], x1 = x[64 * c + 32 + l];
        int q0 = qs[32 * c + l] & 15, q1 = qs[32 * c + l] >> 4;
        if constexpr (T == DType::Q5_K) {
          q0 |= ((qh[l] >> (2 * c)) & 1) << 4;
          q1 |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
        }
        dot0 += static_cast<float>(q0) * x0;
        dot1 += static_cast<float>(q1) * x1;
        sum0 += x0;
        sum1 += x1;
      }
      s += d * (sc0 * dot0 + sc1 * dot1) - dmin * (m0 * sum0 + m1 * sum1);
    }
    return s;
  } else {  // Q6_K
    const uint8_t* ql = blk;
    const uint8_t* qh = blk + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
    const float d = f16_at(blk + 208);
    float s = 0.0f;
    for (int n = 0; n < 2; ++n) {  // 128 elements each
      const uint8_t* l0 = ql + 64 * n;
      const uint8_t* h0 = qh + 32 * n;
      const int8_t* s0 = sc + 8 * n;
      const float* xn = x + 128 * n;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((l0[l] & 0xF) | (((h0[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((l0[l + 32] & 0xF) | (((h0[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((l0[l] >> 4) | (((h0[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((l0[l + 32] >> 4) | (((h0[l] >> 6) & 3) << 4)) - 32;
        s += d * (s0[is] * q1 * xn[l] + s0[is + 2] * q2 * xn[l + 32] + s0[is + 4] * q3 * xn[l + 64] +
                  s0[is + 6] * q4 * xn[l + 96]);
      }
    }
    return s;
  }
}

// Bytes and elements of one quantization block (K-quants: 256-element super-blocks).
template <DType T>
constexpr int kBlockBytes = T == DType::Q8_0 ? 34
                            : T == DType::Q4_0 || T == DType::IQ4_NL ? 18
                            : T == DType::MXFP4 ? 17
                            : T == DType::Q4_K ? 144
                            : T == DType::Q5_K ? 176
                            : T == DType::IQ4_XS ? 136
                            : 210;
template <DType T>
constexpr int kBlockElems = T == DType::Q4_K || T == DType::Q5_K || T == DType::Q6_K || T == DType::IQ4_XS ? 256 : 32;

// Grid: x over groups of kWarpsPerBlock rows, y over tiles of kTokTile tokens (x and y advance by
// cols and rows per token). A warp reads its row's blocks once per tile and dots each with every
// token of the tile (the block's bytes are in L1 after the first token), so a batch of n tokens
// streams the weights ceil(n / kTokTile) times instead of n times.
constexpr int kTokTile = 8;

// Expert selection of gemm_id (ids null: a plain gemm): grid.y is then the pair, the tile one token.
struct IdMap {
  const int32_t* ids = nullptr;
  size_t expert_bytes = 0;
  int64_t x_div = 1;
  const int32_t* order = nullptr;  // launch order of the pairs (grouped by expert), or null
};

// A warp's row and token tile: false past the last row; else x and y moved to the tile's first token
// and row to the weights' row (of the pair's expert under an IdMap).
struct RowTile {
  int64_t r;
  int nt, lane;
  const uint8_t* row;
};
__device__ __forceinline__ bool row_tile(const uint8_t* w, int64_t rows, int64_t cols, size_t row_bytes,
                                         int64_t n_tokens, const IdMap& id, const float** x, float** y, RowTile* o) {
  o->r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (o->r >= rows) return false;
  o->lane = threadIdx.x % 32;
  if (id.ids) {
    const int64_t p = id.order ? id.order[blockIdx.y] : blockIdx.y;
    o->nt = 1;
    *x += (p / id.x_div) * cols;
    *y += p * rows;
    o->row = w + static_cast<size_t>(id.ids[p]) * id.expert_bytes + static_cast<size_t>(o->r) * row_bytes;
    return true;
  }
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokTile;
  o->nt = n_tokens - t0 < kTokTile ? static_cast<int>(n_tokens - t0) : kTokTile;
  *x += t0 * cols;
  *y += t0 * rows;
  o->row = w + static_cast<size_t>(o->r) * row_bytes;
  return true;
}
// Each token's sum over the warp, written by lane 0 (the tile's real tokens only: nt is the same for
// the whole warp, so the lanes skip the padding's shuffles together -- 7 of 8 butterflies in decode).
__device__ __forceinline__ void store_tile(float (&s)[kTokTile], const RowTile& rt, float* y, int64_t rows) {
#pragma unroll
  for (int t = 0; t < kTokTile; ++t) {
    if (t >= rt.nt) break;
    const float v = warp_sum(s[t]);
    if (rt.lane == 0) y[t * rows + rt.r] = v;
  }
}

// Bytes [src, src + n) of a row into the warp's shared buffer `dst` (16-byte aligned, n + 16 bytes):
// 16-byte loads from the aligned address at or before src, so the warp reads 512 contiguous bytes per
// load instruction; the last partial vector byte by byte, never past src + n (the bytes before src are
// in the same allocation: weights start 16-byte aligned). Returns where src's first byte landed.
__device__ __forceinline__ const uint8_t* stage_bytes(const uint8_t* src, int64_t n, uint4* dst, int lane) {
  const auto a = reinterpret_cast<uintptr_t>(src);
  const auto* a0 = reinterpret_cast<const uint8_t*>(a & ~uintptr_t{15});
  const int64_t lead = static_cast<int64_t>(a & 15), end = lead + n, vecs = (end + 15) / 16;
  for (int64_t v = lane; v < vecs; v += 32) {
    if (16 * (v + 1) <= end) {
      store16(dst + v, load16(a0 + 16 * v));
    } else {
      auto* d = reinterpret_cast<uint8_t*>(dst + v);
      for (int64_t i = 16 * v; i < end; ++i) d[i - 16 * v] = a0[i];
    }
  }
  __syncwarp();
  return reinterpret_cast<const uint8_t*>(dst) + lead;
}

// A warp walks its row 32 blocks at a time: the blocks are first copied to shared memory with
// coalesced 16-byte loads (stage_bytes), then each lane dots its block from there with every token of
// the tile. (Read straight from global memory, the lanes' byte loads 34 to 210 bytes apart touched up
// to 32 cache lines per instruction: bound by the L1, not by HBM.)
template <DType T>
__global__ void gemv_blocks(const uint8_t* w, int64_t rows, int64_t cols, size_t row_bytes, const float* x, float* y,
                            int64_t n_tokens, IdMap id) {
  constexpr int kVecs = (32 * kBlockBytes<T> + 15) / 16 + 1;  // 32 blocks and a lead of up to 15 bytes
  __shared__ uint4 stage[kWarpsPerBlock][kVecs];
  RowTile rt;
  if (!row_tile(w, rows, cols, row_bytes, n_tokens, id, &x, &y, &rt)) return;
  const int nt = rt.nt, lane = rt.lane;
  const uint8_t* row = rt.row;
  uint4* buf = stage[threadIdx.x / 32];
  float s[kTokTile] = {};
  const int64_t nb = cols / kBlockElems<T>;
  for (int64_t b0 = 0; b0 < nb; b0 += 32) {
    const int64_t cnt = nb - b0 < 32 ? nb - b0 : 32;
    const uint8_t* staged = stage_bytes(row + b0 * kBlockBytes<T>, cnt * kBlockBytes<T>, buf, lane);
    if (lane < cnt) {
      const uint8_t* blk = staged + lane * kBlockBytes<T>;
      const int64_t b = b0 + lane;
#pragma unroll
      for (int t = 0; t < kTokTile; ++t) {
        if (t < nt) {
          const float* xb = x + t * cols + b * kBlockElems<T>;
          if constexpr (kBlockElems<T> == 256) s[t] += superblock_dot<T>(blk, xb);
          else s[t] += block_dot<T>(blk, xb);
        }
      }
    }
    __syncwarp();  // every lane is done with the buffer before the next blocks land in it
  }
  store_tile(s, rt, y, rows);
}

template <DType T>
__device__ __forceinline__ float elem(const uint8_t* row, int64_t i) {
  if constexpr (T == DType::F32) return reinterpret_cast<const float*>(row)[i];
  else if constexpr (T == DType::F16) return __half2float(reinterpret_cast<const __half*>(row)[i]);
  else return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(row)[i]);
}

template <DType T>
__global__ void gemv_float(const uint8_t* w, int64_t rows, int64_t cols, size_t row_bytes, const float* x, float* y,
                           int64_t n_tokens, IdMap id) {
  RowTile rt;
  if (!row_tile(w, rows, cols, row_bytes, n_tokens, id, &x, &y, &rt)) return;
  const int nt = rt.nt, lane = rt.lane;
  const uint8_t* row = rt.row;
  float s[kTokTile] = {};
  for (int64_t i = lane; i < cols; i += 32) {
    const float wi = elem<T>(row, i);
#pragma unroll
    for (int t = 0; t < kTokTile; ++t)
      if (t < nt) s[t] += wi * x[t * cols + i];
  }
  store_tile(s, rt, y, rows);
}

// F16 / BF16 rows whose length is a multiple of 256 and whose bytes are 16-byte aligned: each lane
// loads 8 elements (16 bytes) at a time, so a warp reads 512 contiguous bytes per load instead of 64
// (decode of half-precision weights is a pure stream of them).
template <DType T>
__global__ void gemv_half_vec(const uint8_t* w, int64_t rows, int64_t cols, size_t row_bytes, const float* x,
                              float* y, int64_t n_tokens, IdMap id) {
  RowTile rt;
  if (!row_tile(w, rows, cols, row_bytes, n_tokens, id, &x, &y, &rt)) return;
  const int nt = rt.nt, lane = rt.lane;
  const uint8_t* row = rt.row;
  float s[kTokTile] = {};
  for (int64_t i = static_cast<int64_t>(lane) * 8; i < cols; i += 256) {
    const uint4 raw = load16(row + i * 2);
    uint16_t h[8];
    memcpy(h, &raw, 16);
    float wf[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if constexpr (T == DType::F16) wf[k] = __half2float(__ushort_as_half(h[k]));
      else wf[k] = __bfloat162float(__ushort_as_bfloat16(h[k]));
    }
#pragma unroll
    for (int t = 0; t < kTokTile; ++t) {
      if (t < nt) {
        const float* xt = x + t * cols + i;
#pragma unroll
        for (int k = 0; k < 8; ++k) s[t] += wf[k] * xt[k];
      }
    }
  }
  store_tile(s, rt, y, rows);
}

// One block of 256 threads per row.
__global__ void rmsnorm_rows(const float* x, const float* weight, float* y, int64_t n, float eps) {
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * n;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * n;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += xr[i] * xr[i];
  __shared__ float part[32];
  s = warp_sum(s);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    float t = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.0f;
    t = warp_sum(t);
    if (threadIdx.x == 0) part[0] = t;
  }
  __syncthreads();
  const float scale = rsqrtf(part[0] / static_cast<float>(n) + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * scale * weight[i];
}


}  // namespace

bool gemv_supports(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 || t == DType::Q4_0 ||
         t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K || t == DType::MXFP4 || t == DType::IQ4_NL ||
         t == DType::IQ4_XS;
}

Status gemv(DType type, const void* w, int64_t rows, int64_t cols, size_t row_bytes, const float* x, float* y) {
  return gemm(type, w, rows, cols, row_bytes, x, 1, y);
}

namespace {

Status check_type(DType type, int64_t cols) {
  if (!gemv_supports(type))
    return Error{std::string("CUDA gemv: weight type ") + dtype_name(type) + " is not supported yet"};
  if ((type == DType::Q8_0 || type == DType::Q4_0 || type == DType::MXFP4 || type == DType::IQ4_NL) && cols % 32 != 0)
    return Error{"CUDA gemv: quantized rows must be a multiple of 32 wide"};
  if ((type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K || type == DType::IQ4_XS) && cols % 256 != 0)
    return Error{"CUDA gemv: K-quant rows must be a multiple of 256 wide"};
  return {};
}

// One launch of the product kernel for `type`: grid.y tiles of tokens (or pairs, under an IdMap).
Status launch(DType type, const void* w, int64_t rows, int64_t cols, size_t row_bytes, const float* x,
              int64_t n_tokens, float* y, unsigned grid_y, const IdMap& id) {
  const dim3 grid(static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock), grid_y),
      block(32 * kWarpsPerBlock);
  const auto* wb = static_cast<const uint8_t*>(w);
  const bool vec = cols % 256 == 0 && row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0 &&
                   id.expert_bytes % 16 == 0;
  switch (type) {
    case DType::Q8_0: TM_LAUNCH(gemv_blocks<DType::Q8_0>, grid, block, 0, stream())(wb, rows, cols, row_bytes, x, y, n_tokens, id); break;
    case DType::Q4_0: TM_LAUNCH(gemv_blocks<DType::Q4_0>, grid, block, 0, stream())(wb, rows, cols, row_bytes, x, y, n_tokens, id); break;
    case DType::MXFP4: TM_LAUNCH(gemv_blocks<DType::MXFP4>, grid, block, 0, stream())(wb, rows, cols, row_bytes, x, y, n_tokens, id); break;
    case DType::IQ4_NL: TM_LAUNCH(gemv_blocks<DType::IQ4_NL>, grid, block, 0, stream())(wb, rows, cols, row_bytes, x, y, n_tokens, id); break;
    case DType::Q5_K: TM_LAUNCH(gemv_blocks<DType::Q5_K>, grid, block, 0, stream())(wb, rows, cols, row_bytes, x, y, n_tokens, id); break;
    case DType::IQ4_XS: TM_LAUNCH(gemv_blocks<DType::IQ4_XS>, grid, block, 0, stream())(wb, rows, cols, row_bytes, x, y, n_tokens, id); break;
    case DType::Q4_K: TM_LAUNCH(gemv_blocks<DType::Q4_K>, grid, block, 0, stream())(wb, rows, cols, row_bytes, x, y, n_tokens, id); break;
    case DType::Q6_K: TM_LAUNCH(gemv_blocks<DType::Q6_K>, grid, block, 0, stream())(wb, rows, cols, row_bytes, x, y, n_tokens, id); break;
    case DType::F32: TM_LAUNCH(gemv_float<DType::F32>, grid, block, 0, stream())(wb, rows, cols, row_bytes, x, y, n_tokens, id); break;
    case DType::F16:
      if (vec) TM_LAUNCH(gemv_half_vec<DType::F16>, grid, block, 0, stream())(wb, rows, cols, row_bytes, x, y, n_tokens, id);
      else TM_LAUNCH(gemv_float<DType::F16>, grid, block, 0, stream())(wb, rows, cols, row_bytes, x, y, n_tokens, id);
      break;
    default:
      if (vec) TM_LAUNCH(gemv_half_vec<DType::BF16>, grid, block, 0, stream())(wb, rows, cols, row_bytes, x, y, n_tokens, id);
      else TM_LAUNCH(gemv_float<DType::BF16>, grid, block, 0, stream())(wb, rows, cols, row_bytes, x, y, n_tokens, id);
      break;
  }
  return launched(id.ids ? "gemm_id" : "gemm");
}

constexpr int64_t kMaxGridY = 65535;

}  // namespace

Status gemm(DType type, const void* w, int64_t rows, int64_t cols, size_t row_bytes, const float* x, int64_t n_tokens,
            float* y) {
  TM_TRY(check_type(type, cols));
  if (rows <= 0 || n_tokens <= 0) return {};
  constexpr int64_t kMaxTokens = kMaxGridY * kTokTile;  // grid.y's limit, in tiles
  for (int64_t t = 0; t < n_tokens; t += kMaxTokens) {
    const int64_t n = n_tokens - t < kMaxTokens ? n_tokens - t : kMaxTokens;
    TM_TRY(launch(type, w, rows, cols, row_bytes, x + t * cols, n, y + t * rows,
                  static_cast<unsigned>((n + kTokTile - 1) / kTokTile), IdMap{}));
  }
  return {};
}

Status gemm_id(DType type, const void* w, size_t expert_bytes, int64_t rows, int64_t cols, size_t row_bytes,
               const float* x, int64_t x_div, const int32_t* ids, int64_t n_pairs, float* y, const int32_t* order) {
  TM_TRY(check_type(type, cols));
  if (x_div <= 0) return Error{"CUDA gemm_id: x_div must be positive"};
  if (rows <= 0 || n_pairs <= 0) return {};
  if (order) {  // one launch: the order indexes every pair (pairs past grid.y's limit would need another)
    if (n_pairs > kMaxGridY) return Error{"CUDA gemm_id: at most 65535 pairs with an order"};
    return launch(type, w, rows, cols, row_bytes, x, n_pairs, y, static_cast<unsigned>(n_pairs),
                  IdMap{ids, expert_bytes, x_div, order});
  }
  const int64_t chunk = kMaxGridY - kMaxGridY % x_div;  // whole tokens per launch
  for (int64_t p = 0; p < n_pairs; p += chunk) {
    const int64_t n = n_pairs - p < chunk ? n_pairs - p : chunk;
    TM_TRY(launch(type, w, rows, cols, row_bytes, x + (p / x_div) * cols, n, y + p * rows, static_cast<unsigned>(n),
                  IdMap{ids + p, expert_bytes, x_div}));
  }
  return {};
}

Status rmsnorm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps) {
  if (n_rows <= 0) return {};
  TM_LAUNCH(rmsnorm_rows, static_cast<unsigned>(n_rows), 256, 0, stream())(x, weight, y, n, eps);
  return launched("rmsnorm");
}


}  // namespace tmill::gpu::inline TM_GPU_ABI
