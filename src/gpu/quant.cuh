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

// Elements 32 c .. 32 c + 31 of a row of type T (a Q8_0/Q4_0/IQ4_NL/MXFP4 block, or a 32-element run of
// a K-quant or IQ4_XS super-block), each times `scale` (the CPU's get_row, then the scale), into out.
template <DType T, class Out>
__device__ __forceinline__ void dequantize_run(const uint8_t* row, int64_t c, Out* out, float scale) {
  if constexpr (T == DType::Q8_0) {
    const uint8_t* blk = row + c * 34;
    const float d = f16_at(blk);
    const int8_t* q = reinterpret_cast<const int8_t*>(blk + 2);
    for (int j = 0; j < 32; ++j) put(out, j, (d * static_cast<float>(q[j])) * scale);
  } else if constexpr (T == DType::Q4_0) {
    const uint8_t* blk = row + c * 18;
    const float d = f16_at(blk);
    const uint8_t* q = blk + 2;
    for (int j = 0; j < 16; ++j) {
      put(out, j, (d * static_cast<float>(static_cast<int>(q[j] & 15) - 8)) * scale);
      put(out, j + 16, (d * static_cast<float>(static_cast<int>(q[j] >> 4) - 8)) * scale);
    }
  } else if constexpr (T == DType::IQ4_NL || T == DType::MXFP4) {
    const uint8_t* blk = row + c * (T == DType::MXFP4 ? 17 : 18);
    const float d = T == DType::MXFP4 ? mxfp4_scale(blk[0]) : f16_at(blk);
    const uint8_t* q = blk + (T == DType::MXFP4 ? 1 : 2);
    const int8_t* levels = T == DType::MXFP4 ? kMxfp4 : kIq4nl;
    for (int j = 0; j < 16; ++j) {
      put(out, j, (d * static_cast<float>(levels[q[j] & 15])) * scale);
      put(out, j + 16, (d * static_cast<float>(levels[q[j] >> 4])) * scale);
    }
  } else if constexpr (T == DType::IQ4_XS) {  // super-block c / 8, sub-block c % 8: qs[16j..16j+15]
    const uint8_t* blk = row + (c / 8) * 136;
    const int j = static_cast<int>(c % 8);
    const float dl = iq4xs_scale(blk, j);
    const uint8_t* q = blk + 8 + 16 * j;
    for (int l = 0; l < 16; ++l) {
      put(out, l, (dl * static_cast<float>(kIq4nl[q[l] & 15])) * scale);
      put(out, l + 16, (dl * static_cast<float>(kIq4nl[q[l] >> 4])) * scale);
    }
  } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    // super-block c / 8, sub-block j = c % 8: 64-element chunk j / 2, low nibbles for even j; Q5_K's
    // fifth bit of element 32 j + l is qh[l] bit j
    constexpr int kBytes = T == DType::Q4_K ? 144 : 176, kQs = T == DType::Q4_K ? 16 : 48;
    const uint8_t* blk = row + (c / 8) * kBytes;
    const int j = static_cast<int>(c % 8);
    const float d = f16_at(blk), dmin = f16_at(blk + 2);
    int s, m;
    q4k_scale_min(j, blk + 4, &s, &m);
    const uint8_t* qs = blk + kQs + 32 * (j / 2);
    for (int l = 0; l < 32; ++l) {
      int q = j % 2 == 0 ? (qs[l] & 15) : (qs[l] >> 4);
      if constexpr (T == DType::Q5_K) q |= ((blk[16 + l] >> j) & 1) << 4;
      put(out, l, (d * static_cast<float>(s) * static_cast<float>(q) - dmin * static_cast<float>(m)) * scale);
    }
  } else {  // Q6_K: super-block c / 8; run c % 8 = 4 * half + quarter: 128-element half, 32-element quarter
    const uint8_t* blk = row + (c / 8) * 210;
    const int run = static_cast<int>(c % 8), n = run / 4, quarter = run % 4;
    const uint8_t* ql = blk + 64 * n;
    const uint8_t* qh = blk + 128 + 32 * n;
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192) + 8 * n;
    const float d = f16_at(blk + 208);
    for (int l = 0; l < 32; ++l) {
      int q;
      if (quarter == 0) q = (ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4);
      else if (quarter == 1) q = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
      else if (quarter == 2) q = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
      else q = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
      put(out, l, (d * static_cast<float>(sc[l / 16 + 2 * quarter]) * static_cast<float>(q - 32)) * scale);
    }
  }
}

}  // namespace
}  // namespace tmill::gpu::inline TM_GPU_ABI
