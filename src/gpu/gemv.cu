// Decode-time kernels of the CUDA backend (gpu/kernels.h): matrix-vector products that dequantize the
// weights in registers (F32, F16, BF16 and the block types of kernels.h block_type_supported, in their
// GGUF file layouts), and RMSNorm.
// One warp per output row: the 32 lanes stride over the row, each lane keeps a float partial sum per
// token, and a butterfly of shuffles adds them. Rows are independent and each weight is read once, so
// the weights stream from HBM: block types 32 blocks at a time through shared memory with 16-byte
// loads (stage_bytes), then four consecutive elements a lane (RunDecoder), x read as float4s;
// half-precision rows 8 elements a lane, 16-byte loads straight to registers. (No fmt in .cu files: nvcc's front end
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
// coalesced 16-byte loads (stage_bytes); then the lanes go over their 32-element runs (a block, or a
// super-block's sub-block) four runs at a time, eight lanes a run and four consecutive elements a
// lane (quant.cuh RunDecoder), so each token's x is read 512 contiguous bytes per instruction and
// every weight byte from shared memory once. (Lane-per-block reads, 34 to 210 bytes apart in the
// weights and 128 bytes apart in x, touched up to 32 cache lines per load instruction: the L1, not
// HBM, was the bound.)
template <DType T>
__global__ void gemv_blocks(const uint8_t* w, int64_t rows, int64_t cols, size_t row_bytes, const float* x, float* y,
                            int64_t n_tokens, IdMap id) {
  constexpr int kVecs = (32 * kBlockBytes<T> + 15) / 16 + 1;  // 32 blocks and a lead of up to 15 bytes
  constexpr int kRuns = kBlockElems<T> / 32;                   // runs of 32 elements per block
  __shared__ uint4 stage[kWarpsPerBlock][kVecs];
  RowTile rt;
  if (!row_tile(w, rows, cols, row_bytes, n_tokens, id, &x, &y, &rt)) return;
  const int nt = rt.nt, lane = rt.lane, e0 = 4 * (lane % 8);  // the lane's elements of a run: e0 .. e0 + 3
  const uint8_t* row = rt.row;
  uint4* buf = stage[threadIdx.x / 32];
  float s[kTokTile] = {};
  const int64_t nb = cols / kBlockElems<T>;
  for (int64_t b0 = 0; b0 < nb; b0 += 32) {
    const int64_t cnt = nb - b0 < 32 ? nb - b0 : 32;
    const uint8_t* staged = stage_bytes(row + b0 * kBlockBytes<T>, cnt * kBlockBytes<T>, buf, lane);
    const float* xc = x + b0 * kBlockElems<T> + e0;
    for (int64_t c = lane / 8; c < cnt * kRuns; c += 4) {
      const RunDecoder<T> run(staged, c);
      float wv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) wv[i] = run(e0 + i);
#pragma unroll
      for (int t = 0; t < kTokTile; ++t) {
        if (t < nt) {
          float xv[4];
          load_floats4(xc + t * cols + 32 * c, xv);
          s[t] += wv[0] * xv[0] + wv[1] * xv[1] + wv[2] * xv[2] + wv[3] * xv[3];
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
        float xv[8];  // (two 16-byte loads: eight scalar ones 32 bytes apart across the lanes touched 8 lines each)
        load_floats4(x + t * cols + i, reinterpret_cast<float(&)[4]>(xv[0]));
        load_floats4(x + t * cols + i + 4, reinterpret_cast<float(&)[4]>(xv[4]));
#pragma unroll
        for (int k = 0; k < 8; ++k) s[t] += wf[k] * xv[k];
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

bool gemv_supports(DType t) { return get_rows_supports(t); }  // (the same decoders: quant.cuh, elem<T>)

Status gemv(DType type, const void* w, int64_t rows, int64_t cols, size_t row_bytes, const float* x, float* y) {
  return gemm(type, w, rows, cols, row_bytes, x, 1, y);
}

namespace {

Status check_type(DType type, int64_t cols) {
  if (!gemv_supports(type))
    return Error{std::string("CUDA gemv: weight type ") + dtype_name(type) + " is not supported yet"};
  if (block_type_supported(type) && cols % dtype_info(type).block_size != 0)
    return Error{std::string("CUDA gemv: ") + dtype_name(type) + " rows must be whole blocks of " +
                 std::to_string(dtype_info(type).block_size)};
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
  if (with_block_type(type, [&](auto t) {
        TM_LAUNCH(gemv_blocks<decltype(t)::value>, grid, block, 0, stream())(wb, rows, cols, row_bytes, x, y, n_tokens, id);
      }))
    return launched(id.ids ? "gemm_id" : "gemm");
  switch (type) {
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
