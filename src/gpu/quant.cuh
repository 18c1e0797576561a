// Device-side pieces of the GGUF block formats (quant/blocks.h has the layouts), shared by the
// product kernels (gemv.cu) and the tensor-core path's dequantization (gemm_tc.cu). Included by .cu
// files only.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

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

}  // namespace
}  // namespace tmill::gpu::inline TM_GPU_ABI
