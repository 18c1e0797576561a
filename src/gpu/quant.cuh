// Device-side pieces of the GGUF block formats (quant/blocks.h has the layouts), shared by the
// product kernels (gemv.cu), the tensor-core path's dequantization (gemm_tc.cu) and the embedding
// rows (elementwise.cu get_rows). Included by .cu files only.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace tmill::gpu::inline TM_GPU_ABI {
namespace {  // each .cu file gets its own copy (the tables live in its constant memory)

__device__ __forceinline__ float f16_at(const uint8_t* p) {
  __half h;
  memcpy(&h, p, 2);
  return __half2float(h);
}

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
__device__ __forceinline__ void q4k_scale_min(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// IQ4_NL / IQ4_XS levels (ggml's kvalues_iq4nl) and MXFP4's E2M1 values doubled.
__constant__ int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
__constant__ int8_t kMxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// MXFP4's E8M0 scale, halved (quant/blocks.h mxfp4_half_scale), so table value x scale is exact.
__device__ __forceinline__ float mxfp4_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  return __uint_as_float(bits);
}

// IQ4_XS (136 B: d f16 | scales_h u16 | scales_l[4] | qs[128]): sub-block j's scale d * (ls - 32).
__device__ __forceinline__ float iq4xs_scale(const uint8_t* blk, int j) {
  const int scales_h = blk[2] | (blk[3] << 8);
  const int ls = ((blk[4 + j / 2] >> (4 * (j % 2))) & 0xF) | (((scales_h >> (2 * j)) & 3) << 4);
  return f16_at(blk) * static_cast<float>(ls - 32);
}

// Stores a dequantized value as the caller's type: F16 (the tensor-core product's operands) or F32.
__device__ __forceinline__ void put(__half* o, int j, float v) { o[j] = __float2half_rn(v); }
__device__ __forceinline__ void put(float* o, int j, float v) { o[j] = v; }

// Bytes and elements of one block of a block type (the K-quants and IQ4_XS: 256-element super-blocks).
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

// Run c of a row of type T, where a run is 32 consecutive elements: a Q8_0/Q4_0/IQ4_NL/MXFP4 block,
// or sub-block c % 8 of super-block c / 8. The constructor reads the run's scales once; (l) decodes
// element l (0..31) -- the CPU's dequantize_row, element by element, with the same expressions. The
// one place each format's element is decoded on the device (the GEMV, gemm_tc's dequantization and
// get_rows use it).
template <DType T>
struct RunDecoder {
  const uint8_t* q;        // the run's quant bytes (Q6_K: its low bits)
  const uint8_t* qh;       // Q5_K, Q6_K: the high bits
  const int8_t* levels;    // IQ4_NL, MXFP4, IQ4_XS: the 16-level table
  const int8_t* sc;        // Q6_K: the run's two 16-element scales
  float d, dm;             // the scale (Q4_K/Q5_K: d x the sub-block's scale) and Q4_K/Q5_K's d_min x min
  int j;                   // Q4_K/Q5_K: the sub-block (odd: high nibbles; Q5_K's bit of qh); Q6_K: the quarter

  __device__ __forceinline__ RunDecoder(const uint8_t* row, int64_t c) : qh(nullptr), levels(nullptr), sc(nullptr), dm(0.0f), j(0) {
    if constexpr (T == DType::Q8_0 || T == DType::Q4_0 || T == DType::IQ4_NL) {
      const uint8_t* blk = row + c * (T == DType::Q8_0 ? 34 : 18);
      d = f16_at(blk);
      q = blk + 2;
      if constexpr (T == DType::IQ4_NL) levels = kIq4nl;
    } else if constexpr (T == DType::MXFP4) {
      const uint8_t* blk = row + c * 17;
      d = mxfp4_scale(blk[0]);
      q = blk + 1;
      levels = kMxfp4;
    } else if constexpr (T == DType::IQ4_XS) {  // sub-block j: qs[16j..16j+15]
      const uint8_t* blk = row + (c / 8) * 136;
      j = static_cast<int>(c % 8);
      d = iq4xs_scale(blk, j);
      q = blk + 8 + 16 * j;
      levels = kIq4nl;
    } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
      // sub-block j: 64-element chunk j / 2, low nibbles for even j; Q5_K's fifth bit of element
      // 32 j + l is qh[l] bit j
      constexpr int kBytes = T == DType::Q4_K ? 144 : 176, kQs = T == DType::Q4_K ? 16 : 48;
      const uint8_t* blk = row + (c / 8) * kBytes;
      j = static_cast<int>(c % 8);
      int s, m;
      q4k_scale_min(j, blk + 4, &s, &m);
      d = f16_at(blk) * static_cast<float>(s);
      dm = f16_at(blk + 2) * static_cast<float>(m);
      q = blk + kQs + 32 * (j / 2);
      qh = blk + 16;
    } else {  // Q6_K: run c % 8 = 4 * half + quarter: 128-element half, 32-element quarter
      const uint8_t* blk = row + (c / 8) * 210;
      const int run = static_cast<int>(c % 8), n = run / 4;
      j = run % 4;
      q = blk + 64 * n;
      qh = blk + 128 + 32 * n;
      sc = reinterpret_cast<const int8_t*>(blk + 192) + 8 * n;
      d = f16_at(blk + 208);
    }
  }
  // Q4_0's nibble order: element l is the low nibble of q[l], l + 16 the high one.
  __device__ __forceinline__ int nibble(int l) const { return l < 16 ? q[l] & 15 : q[l - 16] >> 4; }
  __device__ __forceinline__ float operator()(int l) const {
    if constexpr (T == DType::Q8_0) {
      return d * static_cast<float>(reinterpret_cast<const int8_t*>(q)[l]);
    } else if constexpr (T == DType::Q4_0) {
      return d * static_cast<float>(nibble(l) - 8);
    } else if constexpr (T == DType::IQ4_NL || T == DType::MXFP4 || T == DType::IQ4_XS) {
      return d * static_cast<float>(levels[nibble(l)]);
    } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
      int v = j % 2 == 0 ? (q[l] & 15) : (q[l] >> 4);
      if constexpr (T == DType::Q5_K) v |= ((qh[l] >> j) & 1) << 4;
      return d * static_cast<float>(v) - dm;
    } else {
      int v;
      if (j == 0) v = (q[l] & 0xF) | (((qh[l] >> 0) & 3) << 4);
      else if (j == 1) v = (q[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
      else if (j == 2) v = (q[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
      else v = (q[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
      return d * static_cast<float>(sc[l / 16 + 2 * j]) * static_cast<float>(v - 32);
    }
  }
};

// Run c of a row (32 elements, RunDecoder's runs), each times `scale` (the CPU's get_row, then the
// scale), into out.
template <DType T, class Out>
__device__ __forceinline__ void dequantize_run(const uint8_t* row, int64_t c, Out* out, float scale) {
  const RunDecoder<T> run(row, c);
#pragma unroll
  for (int l = 0; l < 32; ++l) put(out, l, run(l) * scale);
}

}  // namespace
}  // namespace tmill::gpu::inline TM_GPU_ABI
