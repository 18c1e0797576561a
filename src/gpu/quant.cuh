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

// Element l (0..31) of run c of a row of type T, where a run is 32 consecutive elements: a
// Q8_0/Q4_0/IQ4_NL/MXFP4 block, or sub-block c % 8 of super-block c / 8. The one place each format's
// element is decoded on the device (the CPU's dequantize_row, element by element); the scale loads
// are the same expressions for every l, so a caller unrolling over l gets them once.
template <DType T>
__device__ __forceinline__ float dequant_elem(const uint8_t* row, int64_t c, int l) {
  if constexpr (T == DType::Q8_0) {
    const uint8_t* blk = row + c * 34;
    return f16_at(blk) * static_cast<float>(reinterpret_cast<const int8_t*>(blk + 2)[l]);
  } else if constexpr (T == DType::Q4_0) {  // element l: low nibble of qs[l], l + 16 the high one
    const uint8_t* blk = row + c * 18;
    const int q = l < 16 ? blk[2 + l] & 15 : blk[2 + l - 16] >> 4;
    return f16_at(blk) * static_cast<float>(q - 8);
  } else if constexpr (T == DType::IQ4_NL || T == DType::MXFP4) {  // Q4_0's nibble order, a 16-level table
    const uint8_t* blk = row + c * (T == DType::MXFP4 ? 17 : 18);
    const float d = T == DType::MXFP4 ? mxfp4_scale(blk[0]) : f16_at(blk);
    const uint8_t* q = blk + (T == DType::MXFP4 ? 1 : 2);
    const int8_t* levels = T == DType::MXFP4 ? kMxfp4 : kIq4nl;
    return d * static_cast<float>(levels[l < 16 ? q[l] & 15 : q[l - 16] >> 4]);
  } else if constexpr (T == DType::IQ4_XS) {  // sub-block j: qs[16j..16j+15], Q4_0's nibble order
    const uint8_t* blk = row + (c / 8) * 136;
    const int j = static_cast<int>(c % 8);
    const uint8_t* q = blk + 8 + 16 * j;
    return iq4xs_scale(blk, j) * static_cast<float>(kIq4nl[l < 16 ? q[l] & 15 : q[l - 16] >> 4]);
  } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    // sub-block j: 64-element chunk j / 2, low nibbles for even j; Q5_K's fifth bit of element 32 j + l
    // is qh[l] bit j
    constexpr int kBytes = T == DType::Q4_K ? 144 : 176, kQs = T == DType::Q4_K ? 16 : 48;
    const uint8_t* blk = row + (c / 8) * kBytes;
    const int j = static_cast<int>(c % 8);
    int s, m;
    q4k_scale_min(j, blk + 4, &s, &m);
    const uint8_t b = blk[kQs + 32 * (j / 2) + l];
    int q = j % 2 == 0 ? (b & 15) : (b >> 4);
    if constexpr (T == DType::Q5_K) q |= ((blk[16 + l] >> j) & 1) << 4;
    return f16_at(blk) * static_cast<float>(s) * static_cast<float>(q) - f16_at(blk + 2) * static_cast<float>(m);
  } else {  // Q6_K: run c % 8 = 4 * half + quarter: 128-element half, 32-element quarter
    const uint8_t* blk = row + (c / 8) * 210;
    const int run = static_cast<int>(c % 8), n = run / 4, quarter = run % 4;
    const uint8_t* ql = blk + 64 * n;
    const uint8_t* qh = blk + 128 + 32 * n;
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192) + 8 * n;
    int q;
    if (quarter == 0) q = (ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4);
    else if (quarter == 1) q = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
    else if (quarter == 2) q = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
    else q = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
    return f16_at(blk + 208) * static_cast<float>(sc[l / 16 + 2 * quarter]) * static_cast<float>(q - 32);
  }
}

// Run c of a row (32 elements, dequant_elem's runs), each times `scale` (the CPU's get_row, then the
// scale), into out.
template <DType T, class Out>
__device__ __forceinline__ void dequantize_run(const uint8_t* row, int64_t c, Out* out, float scale) {
#pragma unroll
  for (int l = 0; l < 32; ++l) put(out, l, dequant_elem<T>(row, c, l) * scale);
}

}  // namespace
}  // namespace tmill::gpu::inline TM_GPU_ABI
