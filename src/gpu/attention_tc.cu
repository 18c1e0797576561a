// Prefill attention on tensor cores (gpu/kernels.h paged_attention_decode with a.tiles, when
// attention_prefill_on_tensor_cores): flash attention's tiling over the paged KV cache with WMMA (its
// INT8 and Q4 elements dequantized to F16 as they are staged).
// A CTA per (tile, KV head) holds 64 query rows -- the tile's (token, query head) pairs, token-major,
// at most 64 / G tokens of one sequence -- as F16 in shared memory, 16 rows per warp, and walks the
// positions 32 at a time: K staged [dimension][position] (the cache's own layout), V [position]
// [dimension]; S = Q K^T on tensor cores, the row's mask (its causal limit, window), scale and soft-cap
// applied in FP32, then P = exp(S - m) rounded to F16 and O += P V on tensor cores, O in the warp's
// accumulators for the whole walk. WMMA's accumulator layout is opaque, so O cannot be rescaled row by
// row as an online softmax's running maximum grows: the walk is done twice, the first pass for each
// row's maximum m (S only), the second for P and O with that final m (K read twice, V once).
// head_dim up to 128 (HD = 64 or 128, zeros past head_dim); larger heads use the scalar tiles.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <string>

#include "gpu/attention.cuh"
#include "gpu/kernels.h"
#include "gpu/stream.cuh"

namespace tmill::gpu::inline TM_GPU_ABI {
namespace {

constexpr int kRows = 64;  // query rows per CTA: 4 warps x 16
constexpr int kChunk = 32;  // positions per step (stage_chunk's)

template <int HD>
struct alignas(32) PrefillSmem {
  static constexpr int kLdQ = HD + 8, kLdK = kChunk + 8, kLdV = HD + 8;  // rows 16-byte aligned, banks staggered
  __half q[kRows * kLdQ];    // [row][dimension]
  __half k[HD * kLdK];       // [dimension][position]
  __half v[kChunk * kLdV];   // [position][dimension]
  float s[4][16 * kChunk];   // a warp's scores; its P (F16, ld kChunk) over their start; O's tiles at the end
  float inv[4][16];          // each row's 1 / sum (or the sink's normalization)
};

template <int HD>
__global__ void __launch_bounds__(128) attn_prefill_tc(GpuAttnArgs a) {
  using namespace nvcuda;
  using Smem = PrefillSmem<HD>;
  __shared__ Smem sm;
  const int64_t tile = blockIdx.x, h = blockIdx.y;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t t0 = a.tiles[2 * tile], nt = a.tiles[2 * tile + 1];
  const int64_t G = a.n_head / a.n_head_kv, hd = a.head_dim, rows = nt * G;
  const int32_t* table = a.block_tables + t0 * a.max_blocks;  // the tile's sequence
  // Q: row r is (token t0 + r / G, query head h G + r % G); rows past the tile and dimensions past hd are 0
  for (int64_t e = threadIdx.x; e < kRows * HD; e += blockDim.x) {
    const int64_t r = e / HD, d = e % HD;
    float v = 0.0f;
    if (r < rows && d < hd) v = a.q[((t0 + r / G) * a.n_head + h * G + r % G) * hd + d];
    sm.q[r * Smem::kLdQ + d] = __float2half_rn(v);
  }
  // this lane's row (two lanes a row, 16 positions each of a step) and its limits
  const int row = lane / 2, half = lane % 2;
  const int64_t r = warp * 16 + row;
  int64_t lo = 0, hi = 0;  // valid positions [lo, hi); empty for padding rows
  if (r < rows) {
    hi = a.n_ctx[t0 + r / G];
    lo = a.window > 0 && hi > a.window ? hi - a.window : 0;
  }
  const int64_t first_ctx = a.n_ctx[t0], end = a.n_ctx[t0 + nt - 1];
  const int64_t begin = a.window > 0 && first_ctx > a.window ? first_ctx - a.window : 0;
  float* s = sm.s[warp];
  auto stage = [&](int64_t p0, bool with_v) {
    __syncthreads();  // every warp is done with the previous step's K and V
    stage_chunk<kKeys>(a, table, h, p0, end, HD, sm.k, Smem::kLdK);
    if (with_v) stage_chunk<kValues>(a, table, h, p0, end, HD, sm.v, Smem::kLdV);
    __syncthreads();
  };
  // S = Q K^T for the warp's 16 rows and the step's 32 positions, into s (ld kChunk), then this lane's
  // 16 scores masked, scaled and soft-capped (-inf where the row does not attend)
  auto scores = [&](int64_t p0, float (&out)[16]) {
    for (int n0 = 0; n0 < kChunk; n0 += 16) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int kk = 0; kk < HD; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> qa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> kb;
        wmma::load_matrix_sync(qa, &sm.q[(warp * 16) * Smem::kLdQ + kk], Smem::kLdQ);
        wmma::load_matrix_sync(kb, &sm.k[kk * Smem::kLdK + n0], Smem::kLdK);
        wmma::mma_sync(acc, qa, kb, acc);
      }
      wmma::store_matrix_sync(s + n0, acc, kChunk, wmma::mem_row_major);
    }
    __syncwarp();
    for (int c = 0; c < 16; ++c) {
      const int64_t p = p0 + half * 16 + c;
      float v = -INFINITY;
      if (p >= lo && p < hi) {
        v = s[row * kChunk + half * 16 + c] * a.scale;
        if (a.softcap > 0.0f) v = a.softcap * tanhf(v / a.softcap);
      }
      out[c] = v;
    }
    __syncwarp();  // s is read: P may go over it
  };
  float sc[16];
  // pass 1: each row's maximum
  float m = -INFINITY;
  for (int64_t p0 = begin; p0 < end; p0 += kChunk) {
    stage(p0, false);
    scores(p0, sc);
    for (float v : sc) m = fmaxf(m, v);
  }
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
  // pass 2: P = exp(S - m) in F16, O += P V
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> o[HD / 16];
  for (auto& f : o) wmma::fill_fragment(f, 0.0f);
  float l = 0.0f;
  __half* pw = reinterpret_cast<__half*>(s);
  for (int64_t p0 = begin; p0 < end; p0 += kChunk) {
    stage(p0, true);
    scores(p0, sc);
    for (int c = 0; c < 16; ++c) {
      const float w = sc[c] == -INFINITY ? 0.0f : __expf(sc[c] - m);
      l += w;
      pw[row * kChunk + half * 16 + c] = __float2half_rn(w);
    }
    __syncwarp();
    for (int k0 = 0; k0 < kChunk; k0 += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> pa;
      wmma::load_matrix_sync(pa, pw + k0, kChunk);
      for (int d0 = 0; d0 < HD; d0 += 16) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> vb;
        wmma::load_matrix_sync(vb, &sm.v[k0 * Smem::kLdV + d0], Smem::kLdV);
        wmma::mma_sync(o[d0 / 16], pa, vb, o[d0 / 16]);
      }
    }
    __syncwarp();  // P is read: the next step's scores may go over it
  }
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  if (half == 0) {
    const int64_t head = h * G + r % G;
    sm.inv[warp][row] = r >= rows ? 0.0f : a.sinks ? sink_norm(m, l, a.sinks[head]) : l > 0.0f ? 1.0f / l : 0.0f;
  }
  __syncwarp();
  // O's 16 x 16 tiles through s, the real rows' first hd dimensions normalized into out
  for (int d0 = 0; d0 < HD; d0 += 16) {
    wmma::store_matrix_sync(s, o[d0 / 16], 16, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
      const int64_t rr = warp * 16 + e / 16, d = d0 + e % 16;
      if (rr < rows && d < hd)
        a.out[((t0 + rr / G) * a.n_head + h * G + rr % G) * hd + d] = s[e] * sm.inv[warp][e / 16];
    }
    __syncwarp();
  }
}

}  // namespace

Status paged_attention_prefill_tc(const GpuAttnArgs& a) {
  if (a.n_tiles > 0x7fffffff) return Error{"CUDA attention: too many prefill tiles"};
  const dim3 grid(static_cast<unsigned>(a.n_tiles), static_cast<unsigned>(a.n_head_kv));
  if (a.head_dim <= 64) {
    TM_LAUNCH(attn_prefill_tc<64>, grid, 128, 0, stream())(a);
  } else {
    TM_LAUNCH(attn_prefill_tc<128>, grid, 128, 0, stream())(a);
  }
  return launched("paged attention (prefill tiles, tensor cores)");
}

}  // namespace tmill::gpu::inline TM_GPU_ABI
