// Device-side pieces of the GGUF block formats (quant/blocks.h has the layouts), shared by the
// product kernels (gemv.cu), the tensor-core path's dequantization (gemm_tc.cu) and the embedding
// rows (elementwise.cu get_rows). Included by .cu files only.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/dtype.h"
#include "quant/iq_grids.h"

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

// The i-quants' lattice grids and sign table (quant/iq_grids.h: llama.cpp's values) in device memory:
// copies made at compile time (a host constexpr array cannot be indexed at run time in device code).
template <class T, int N>
struct IqTable {
  T v[N];
};
template <class T, int N>
constexpr IqTable<T, N> iq_table(const T (&a)[N]) {
  IqTable<T, N> t{};
  for (int i = 0; i < N; ++i) t.v[i] = a[i];
  return t;
}
__device__ const IqTable<uint8_t, 128> kIqSignsDev = iq_table(tmill::kIqSigns);
__device__ const IqTable<uint64_t, 256> kIq2xxsDev = iq_table(tmill::kIq2xxsGrid);
__device__ const IqTable<uint64_t, 512> kIq2xsDev = iq_table(tmill::kIq2xsGrid);
__device__ const IqTable<uint64_t, 1024> kIq2sDev = iq_table(tmill::kIq2sGrid);
__device__ const IqTable<uint32_t, 256> kIq3xxsDev = iq_table(tmill::kIq3xxsGrid);
__device__ const IqTable<uint32_t, 512> kIq3sDev = iq_table(tmill::kIq3sGrid);
__device__ const IqTable<uint64_t, 2048> kIq1sDev = iq_table(tmill::kIq1sGrid);

__device__ __forceinline__ uint32_t le32_at(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

// Q3_K's signed 6-bit scale j (0..15) from its 12 packed bytes (quant/blocks.h q3k_scale).
__device__ __forceinline__ int q3k_scale_dev(int j, const uint8_t* s) {
  const int lo = (s[j % 8] >> (4 * (j / 8))) & 0xF;
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

// Stores a dequantized value as the caller's type: F16 (the tensor-core product's operands) or F32.
__device__ __forceinline__ void put(__half* o, int j, float v) { o[j] = __float2half_rn(v); }
__device__ __forceinline__ void put(float* o, int j, float v) { o[j] = v; }

// Bytes and elements of one block of a block type (the K-quants and IQ4_XS: 256-element super-blocks).
template <DType T>
constexpr int kBlockBytes = T == DType::Q8_0 ? 34
                            : T == DType::Q4_0 || T == DType::IQ4_NL ? 18
                            : T == DType::Q4_1 ? 20
                            : T == DType::Q5_0 ? 22
                            : T == DType::Q5_1 ? 24
                            : T == DType::MXFP4 ? 17
                            : T == DType::Q2_K ? 84
                            : T == DType::Q3_K ? 110
                            : T == DType::Q4_K ? 144
                            : T == DType::Q5_K ? 176
                            : T == DType::IQ4_XS ? 136
                            : T == DType::IQ2_XXS ? 66
                            : T == DType::IQ2_XS ? 74
                            : T == DType::IQ2_S ? 82
                            : T == DType::IQ3_XXS ? 98
                            : T == DType::IQ3_S ? 110
                            : T == DType::IQ1_S ? 50
                            : T == DType::IQ1_M ? 56
                            : 210;
template <DType T>
constexpr bool kIqLattice = T == DType::IQ2_XXS || T == DType::IQ2_XS || T == DType::IQ2_S || T == DType::IQ3_XXS ||
                            T == DType::IQ3_S || T == DType::IQ1_S || T == DType::IQ1_M;
template <DType T>
constexpr int kBlockElems = T == DType::Q2_K || T == DType::Q3_K || T == DType::Q4_K || T == DType::Q5_K ||
                                    T == DType::Q6_K || T == DType::IQ4_XS || kIqLattice<T>
                                ? 256
                                : 32;

// Run c of a row of type T, where a run is 32 consecutive elements: a Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL/
// MXFP4 block, or sub-block c % 8 of super-block c / 8. The constructor reads the run's scales once; (l) decodes
// element l (0..31) -- the CPU's dequantize_row, element by element, with the same expressions. The
// one place each format's element is decoded on the device (the GEMV, gemm_tc's dequantization and
// get_rows use it).
template <DType T>
struct RunDecoder {
  const uint8_t* q;        // the run's quant bytes (Q6_K: its low bits)
  const uint8_t* qh;       // Q5_K, Q6_K: the high bits
  const int8_t* levels;    // IQ4_NL, MXFP4, IQ4_XS: the 16-level table
  const int8_t* sc;        // Q6_K: the run's two 16-element scales
  float d, dm;             // the scale (Q4_K/Q5_K: d x the sub-block's scale; Q2_K/Q3_K: of elements 0..15)
                           // and the min (Q4_K/Q5_K/Q2_K: d_min x min, subtracted; Q4_1/Q5_1: m, added)
  float d1, dm1;           // Q2_K/Q3_K: elements 16..31's scale and min
  uint32_t qh32;           // Q5_0/Q5_1: the block's fifth bits
  int j;                   // Q4_K/Q5_K: the sub-block (odd: high nibbles; Q5_K's bit of qh); Q6_K: the quarter;
                           // Q2_K/Q3_K: the 2-bit field (shift 2 j) of the 32 bytes
  int hbit;                // Q3_K: the run's bit of hmask
  uint32_t aux;            // IQ2_XXS / IQ3_XXS: the run's scale-and-signs word; IQ1_S: its high bits
  const uint8_t* sg;       // IQ3_S: the run's four sign bytes

  __device__ __forceinline__ RunDecoder(const uint8_t* row, int64_t c)
      : qh(nullptr), levels(nullptr), sc(nullptr), dm(0.0f), d1(0.0f), dm1(0.0f), qh32(0), j(0), hbit(0), aux(0),
        sg(nullptr) {
    if constexpr (kIqLattice<T>) {
      // the i-quants (quant/iq_decode.h, quant/dequantize_iq.cpp): run j = c % 8 of a super-block, its two
      // 16-element scales into d and d1 with the CPU's expressions, the bytes operator() reads into q / qh
      const uint8_t* blk = row + (c / 8) * kBlockBytes<T>;
      j = static_cast<int>(c % 8);
      if constexpr (T == DType::IQ1_M) {
        uint16_t dbits = 0;
        for (int k = 0; k < 4; ++k) dbits = static_cast<uint16_t>(dbits | ((blk[48 + 2 * k + 1] >> 4) << (4 * k)));
        const float dd = __half2float(__ushort_as_half(dbits));
        const int s = blk[48 + 2 * (j / 2)] | (blk[48 + 2 * (j / 2) + 1] << 8);
        d = dd * static_cast<float>(2 * ((s >> (6 * (j % 2))) & 7) + 1);
        d1 = dd * static_cast<float>(2 * ((s >> (6 * (j % 2) + 3)) & 7) + 1);
        q = blk + 4 * j;
        qh = blk + 32 + 2 * j;
      } else {
        const float dd = f16_at(blk);
        if constexpr (T == DType::IQ2_XXS || T == DType::IQ3_XXS) {
          aux = le32_at(T == DType::IQ2_XXS ? blk + 6 + 8 * j : blk + 2 + 64 + 4 * j);
          const float f = T == DType::IQ2_XXS ? 0.25f : 0.5f;
          d = d1 = dd * (0.5f + static_cast<float>(aux >> 28)) * f;
          q = blk + 2 + 8 * j;  // IQ2_XXS: 4 grid index bytes (then aux); IQ3_XXS: 8
        } else if constexpr (T == DType::IQ2_XS || T == DType::IQ2_S) {
          const uint8_t s = blk[T == DType::IQ2_XS ? 66 + j : 74 + j];
          d = dd * (0.5f + static_cast<float>(s & 15)) * 0.25f;
          d1 = dd * (0.5f + static_cast<float>(s >> 4)) * 0.25f;
          q = T == DType::IQ2_XS ? blk + 2 + 8 * j : blk + 2 + 4 * j;
          qh = T == DType::IQ2_S ? blk + 66 + j : nullptr;
        } else if constexpr (T == DType::IQ3_S) {  // d | qs[64] | qh[8] | signs[32] | scales[4]
          d = d1 = dd * static_cast<float>(2 * ((blk[106 + j / 2] >> (4 * (j % 2))) & 15) + 1);
          q = blk + 2 + 8 * j;
          qh = blk + 66 + j;
          sg = blk + 74 + 4 * j;
        } else {  // IQ1_S: d | qs[32] | qh[8] u16
          aux = static_cast<uint32_t>(blk[34 + 2 * j] | (blk[34 + 2 * j + 1] << 8));
          d = d1 = dd * static_cast<float>(2 * ((aux >> 12) & 7) + 1);
          q = blk + 2 + 4 * j;
        }
      }
    } else if constexpr (T == DType::Q4_1 || T == DType::Q5_0 || T == DType::Q5_1) {
      // d | (m) | (qh[4]) | qs[16]; qh is not 4-byte aligned: read bytewise
      const uint8_t* blk = row + c * kBlockBytes<T>;
      d = f16_at(blk);
      if constexpr (T != DType::Q5_0) dm = f16_at(blk + 2);
      if constexpr (T != DType::Q4_1) {
        const uint8_t* h = blk + (T == DType::Q5_0 ? 2 : 4);
        qh32 = static_cast<uint32_t>(h[0]) | (static_cast<uint32_t>(h[1]) << 8) | (static_cast<uint32_t>(h[2]) << 16) |
               (static_cast<uint32_t>(h[3]) << 24);
      }
      q = blk + (T == DType::Q4_1 ? 4 : T == DType::Q5_0 ? 6 : 8);
    } else if constexpr (T == DType::Q2_K || T == DType::Q3_K) {
      // run r = c % 8: half r / 4 of the super-block (32 bytes of qs each), 2-bit field j = r % 4 of them;
      // two 16-element sub-blocks, scales 8 half + 2 j and the next
      const uint8_t* blk = row + (c / 8) * kBlockBytes<T>;
      const int r = static_cast<int>(c % 8), half = r / 4, is = 8 * half + 2 * (r % 4);
      j = r % 4;
      if constexpr (T == DType::Q2_K) {  // scales[16] (low nibble scale, high min) | qs[64] | d | dmin
        const float dd = f16_at(blk + 80), dmin = f16_at(blk + 82);
        const uint8_t s0 = blk[is], s1 = blk[is + 1];
        d = dd * static_cast<float>(s0 & 0xF);
        dm = dmin * static_cast<float>(s0 >> 4);
        d1 = dd * static_cast<float>(s1 & 0xF);
        dm1 = dmin * static_cast<float>(s1 >> 4);
        q = blk + 16 + 32 * half;
      } else {  // hmask[32] | qs[64] | scales[12] | d; the high bit of element l of run r: hmask[l] bit r
        const float d_all = f16_at(blk + 108);
        d = d_all * static_cast<float>(q3k_scale_dev(is, blk + 96));
        d1 = d_all * static_cast<float>(q3k_scale_dev(is + 1, blk + 96));
        q = blk + 32 + 32 * half;
        qh = blk;
        hbit = 1 << r;
      }
    } else if constexpr (T == DType::Q8_0 || T == DType::Q4_0 || T == DType::IQ4_NL) {
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
    } else if constexpr (T == DType::Q4_1) {
      return static_cast<float>(nibble(l)) * d + dm;
    } else if constexpr (T == DType::Q5_0 || T == DType::Q5_1) {
      const int v = nibble(l) | static_cast<int>(((qh32 >> l) & 1) << 4);
      if constexpr (T == DType::Q5_0) return static_cast<float>(v - 16) * d;
      else return static_cast<float>(v) * d + dm;
    } else if constexpr (T == DType::Q2_K) {
      const int v = (q[l] >> (2 * j)) & 3;
      return l < 16 ? d * static_cast<float>(v) - dm : d1 * static_cast<float>(v) - dm1;
    } else if constexpr (T == DType::Q3_K) {
      const int v = ((q[l] >> (2 * j)) & 3) - ((qh[l] & hbit) ? 0 : 4);
      return (l < 16 ? d : d1) * static_cast<float>(v);
    } else if constexpr (kIqLattice<T>) {
      const int g = l / 8, e = l % 8;  // the 8-element group and the element in it
      const float db = l < 16 ? d : d1;
      if constexpr (T == DType::IQ1_S || T == DType::IQ1_M) {  // ggml: dl * (grid + delta), delta = +-1/8
        int hi, neg;
        if constexpr (T == DType::IQ1_S) {
          hi = static_cast<int>((aux >> (3 * g)) & 7);
          neg = static_cast<int>(aux >> 15);
        } else {
          const int nib = (qh[g / 2] >> (4 * (g % 2))) & 15;
          hi = nib & 7;
          neg = nib >> 3;
        }
        const uint64_t grid = kIq1sDev.v[q[g] | (hi << 8)];
        const auto lvl = static_cast<int8_t>(static_cast<uint8_t>(grid >> (8 * e)));
        return db * (static_cast<float>(lvl) + (neg ? -0.125f : 0.125f));
      } else {
        uint32_t mag;
        uint8_t signs;
        if constexpr (T == DType::IQ2_XXS) {
          mag = static_cast<uint32_t>(kIq2xxsDev.v[q[g]] >> (8 * e)) & 255;
          signs = kIqSignsDev.v[(aux >> (7 * g)) & 127];
        } else if constexpr (T == DType::IQ2_XS) {
          const int v = q[2 * g] | (q[2 * g + 1] << 8);
          mag = static_cast<uint32_t>(kIq2xsDev.v[v & 511] >> (8 * e)) & 255;
          signs = kIqSignsDev.v[v >> 9];
        } else if constexpr (T == DType::IQ2_S) {
          mag = static_cast<uint32_t>(kIq2sDev.v[q[g] | (((qh[0] >> (2 * g)) & 3) << 8)] >> (8 * e)) & 255;
          signs = q[32 + g];
        } else if constexpr (T == DType::IQ3_XXS) {
          mag = (kIq3xxsDev.v[q[l / 4]] >> (8 * (l % 4))) & 255;
          signs = kIqSignsDev.v[(aux >> (7 * g)) & 127];
        } else {  // IQ3_S
          mag = (kIq3sDev.v[q[l / 4] | (((qh[0] >> (l / 4)) & 1) << 8)] >> (8 * (l % 4))) & 255;
          signs = sg[g];
        }
        const float v = db * static_cast<float>(mag);
        return ((signs >> e) & 1) ? -v : v;
      }
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

// Host side: calls f(std::integral_constant<DType, T>{}) with the block type t as a compile-time T (to
// launch the kernel instantiated for it); false, calling nothing, for a type that is no block type the
// device decodes. The one list of them in the kernels (gpu/kernels.h block_type_supported is the
// callers').
template <class F>
bool with_block_type(DType t, F&& f) {
#define TM_BLOCK_TYPE_CASE(T)                     \
  case DType::T:                                  \
    f(std::integral_constant<DType, DType::T>{}); \
    return true;
  switch (t) {
    TM_BLOCK_TYPE_CASE(Q8_0)
    TM_BLOCK_TYPE_CASE(Q4_0)
    TM_BLOCK_TYPE_CASE(Q4_1)
    TM_BLOCK_TYPE_CASE(Q5_0)
    TM_BLOCK_TYPE_CASE(Q5_1)
    TM_BLOCK_TYPE_CASE(IQ4_NL)
    TM_BLOCK_TYPE_CASE(MXFP4)
    TM_BLOCK_TYPE_CASE(Q2_K)
    TM_BLOCK_TYPE_CASE(Q3_K)
    TM_BLOCK_TYPE_CASE(Q4_K)
    TM_BLOCK_TYPE_CASE(Q5_K)
    TM_BLOCK_TYPE_CASE(Q6_K)
    TM_BLOCK_TYPE_CASE(IQ4_XS)
    TM_BLOCK_TYPE_CASE(IQ2_XXS)
    TM_BLOCK_TYPE_CASE(IQ2_XS)
    TM_BLOCK_TYPE_CASE(IQ2_S)
    TM_BLOCK_TYPE_CASE(IQ3_XXS)
    TM_BLOCK_TYPE_CASE(IQ3_S)
    TM_BLOCK_TYPE_CASE(IQ1_S)
    TM_BLOCK_TYPE_CASE(IQ1_M)
    default: return false;
  }
#undef TM_BLOCK_TYPE_CASE
}

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
