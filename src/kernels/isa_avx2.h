// What the AVX2 kernel files (*_avx2.cpp) share: the per-ISA prologue, vector math and the small
// pieces every kernel would otherwise repeat (horizontal reductions, broadcasts, element loads and
// conversions, nibble unpacking, partial stores). The AVX-512 files get it through isa_avx512.h (they
// have every AVX2 instruction). Include it first, and only from those files.
//
// ODR (cmake/tm_module.cmake): everything here is `static` -- static inline functions and function
// templates, internal linkage -- so each translation unit compiles its own copy with its own flags
// and the linker never keeps one ISA's copy for code of another. Nothing here may have external
// linkage; plain-data headers (kernel_abi.h, attention_abi.h) are fine.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/attention_abi.h"
#include "kernels/kernel_abi.h"

// Full unrolling of the short fixed-count loops keeps tile accumulators in registers (GCC at -O2
// would otherwise keep the arrays in memory).
#define TM_UNROLL _Pragma("GCC unroll 16")
// For helpers that take a kernel's register arrays (accumulators, unpacked weights): a call that
// was not inlined would put the arrays in memory.
#define TM_ISA_INLINE static inline __attribute__((always_inline))

namespace tmill::kern {

// ---- weight streaming

// Software prefetch of the weight stream (AVX-512 attention's long KV runs use it too): the cache
// lines of Bytes bytes starting `ahead` bytes past p. The hint is chosen once at start-up
// (kernels/dispatch.cpp, g_prefetch_weights_nta):
// - Intel: into L2 (T1), not L1 (T0): on an Intel Xeon with AMX (2 vCPUs, 2026-12-04) OLMoE's expert
//   products (bench_moe, Q4_0, 16 tokens) read 25.8 GB/s with T1 against 23.3-24.3 with T0, 1 token
//   29.4 against 26.4-27.0: L1's few fill buffers, not DRAM, bounded the T0 stream.
// - AMD: non-temporal (NTA). On AMD EPYC (Zen 5, 2 vCPUs) T0 and T1 tie (bench_moe n:16, medians 4.97
//   and 4.95 ms per layer), while NTA made OLMoE's 16-stream decode step ~3 % shorter (2026-12-05: one
//   process choosing the hint at random step by step, 7 of 7 runs faster, median time ratio 0.969
//   against 0.998 for the same binary with both sides T1; bench/KERNELS.md).
//
// kWeightPrefetchBytes: the distance of the 32-column block kernels (legacy, IQ4_NL, MXFP4; the
// K-quant kernels prefetch one super-block ahead, or, in tiles of 4+ tokens, two ahead spread over the
// sub-blocks). With only the hardware prefetcher (plus two lines per block) the weight stream fell
// short of DRAM bandwidth: Q4_0 GEMV 4864x896 on 2 threads took 155-173 us, 92-97 us with every line
// prefetched; 16-token GEMMs gained too. Longer distances (6 and 12 KiB) read slower (bench_moe; on AMD
// EPYC 6 KiB tied 3 KiB, bench/KERNELS.md).
inline constexpr int64_t kWeightPrefetchBytes = 3072;
template <int64_t Bytes>
TM_ISA_INLINE void prefetch_weights(const void* p, int64_t ahead) {
  const char* pf = static_cast<const char*>(p) + ahead;
  if (g_prefetch_weights_nta) {  // kernel_abi.h; a predictable branch per call
    TM_UNROLL
    for (int64_t o = 0; o < Bytes; o += 64) _mm_prefetch(pf + o, _MM_HINT_NTA);
  } else {
    TM_UNROLL
    for (int64_t o = 0; o < Bytes; o += 64) _mm_prefetch(pf + o, _MM_HINT_T1);
  }
}

// ---- vector math

// exp(x) as exp512 in isa_avx512.h, with 2^n built in the exponent field.
static inline __m256 exp256(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500E-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// Soft-capping cap * tanh(x / cap), with tanh(y) = 1 - 2 / (exp(2y) + 1) (absolute error ~1e-7 * cap).
static inline __m256 softcap256(__m256 x, float cap) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp256(_mm256_mul_ps(x, _mm256_set1_ps(2.0f / cap)));
  const __m256 t = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
  return _mm256_mul_ps(t, _mm256_set1_ps(cap));
}

// The value v, opaque to the compiler, for a product that must stay rounded: GCC contracts a
// separate multiply and add into one FMA (C++ mode defaults to -ffp-contract=fast), which rounds
// once instead of twice and so would not give the generic loops' bits. Any float or vector type.
template <class V>
static inline V rounded(V v) {
  asm("" : "+v"(v));
  return v;
}

// MXFP4's half scales 2^(e-128) of 8 E8M0 bytes (quant/blocks.h mxfp4_half_scale): (e - 1) << 23 as
// float bits, or the subnormals 0x00200000 << e for e < 2.
static inline __m256 e8m0_half_x8(const uint8_t* p) {
  const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
  const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, small));
}

// ---- horizontal reductions (fixed order: callers that must match other ISAs' bits rely on it)

// lanes 0-3 + lanes 4-7, then + 2 apart, then + 1 apart.
static inline float hsum8(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_shuffle_ps(x, x, 1));
  return _mm_cvtss_f32(x);
}

static inline float hmax8(__m256 v) {
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  x = _mm_max_ss(x, _mm_shuffle_ps(x, x, 1));
  return _mm_cvtss_f32(x);
}

static inline int32_t hsum8_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// The sums of four vectors, as one vector (a's sum in lane 0).
static inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// RMSNorm's scale 1 / sqrt(sum / n + eps) from 8 lanes of partial sums of squares, combined as
// the generic rmsnorm_rows does (4, 2, 1 apart: hsum8) so every ISA gives the same bits.
static inline float rms_inv_scale(__m256 l8, int64_t n, float eps) {
  float ss = hsum8(l8) / static_cast<float>(n);
  ss += eps;
  return 1.0f / __builtin_sqrtf(ss);
}

// ---- loads, broadcasts, masks

// 32-bit lanes below `left` set (any left; <= 0 gives none), for masked loads of a row's tail.
static inline __m256i tail_mask8(int64_t left) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left < 8 ? left : 8)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline __m256i load_si256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// The 4 bytes at p in every 32-bit lane.
static inline __m256i bcast32x8(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// 8 f16 values at p as floats.
static inline __m256 load_f16x8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Bytes per element of a FloatType / KvType (the same numbers for F32, F16, BF16; I8 and FP8 are KvTypes).
template <int Type>
static constexpr int64_t elem_bytes() {
  return Type == kKvF32 ? 4 : kv_token_scaled(Type) ? 1 : 2;
}

// What the loads below return for a one-byte KV code, times this, is its value: E4M3 codes widen
// through FP16 at 1/256 of their value (core/fp8.h), so the kernels fold 256 into the token's scale.
template <int Type>
static constexpr float kv_code_unit() {
  return Type == kKvF8E4M3 ? 256.0f : 1.0f;
}

// FP8 codes as core/fp8.h's FP16 patterns (E4M3: value / 256), from the codes sign-extended to 16-bit
// lanes (cvtepi8_epi16): E4M3's (code << 7) puts the sign's copies at bits 14 and 15, and bit 14 --
// the exponent's top bit, 0 for every E4M3 value -- is cleared; E5M2's (code << 8) is its pattern.
template <int Type>
static inline __m128i fp8_f16_bits(__m128i w) {
  if constexpr (Type == kKvF8E5M2) return _mm_slli_epi16(w, 8);
  return _mm_and_si128(_mm_slli_epi16(w, 7), _mm_set1_epi16(static_cast<short>(0xbfff)));
}
template <int Type>
static inline __m256i fp8_f16_bits(__m256i w) {
  if constexpr (Type == kKvF8E5M2) return _mm256_slli_epi16(w, 8);
  return _mm256_and_si256(_mm256_slli_epi16(w, 7), _mm256_set1_epi16(static_cast<short>(0xbfff)));
}

// 8 consecutive elements of type Type (FloatType or KvType) at p, as floats.
template <int Type>
static inline __m256 load8(const uint8_t* p) {
  if constexpr (Type == kKvF32) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  if constexpr (Type == kKvF16) return load_f16x8(p);
  if constexpr (Type == kKvBF16)
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  if constexpr (Type == kKvF8E4M3 || Type == kKvF8E5M2)
    return _mm256_cvtph_ps(fp8_f16_bits<Type>(_mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// Q4 KV tiles (attention_abi.h) of one 16-token block as f32: K into kf [hd][16], V into vf [16][hd]
// (the F32 tile layouts); hd a multiple of 8. Same products as the scalar oracle: f16 scale * (q - 8).
static inline void dequant_q4_kv_tiles(const uint8_t* kt, const uint8_t* vt, int64_t hd, float* kf, float* vf) {
  constexpr int64_t bs = 16;
  const int64_t gs = kv_q4_group(hd), ng = hd / gs;
  const uint8_t* ks = kt + hd * bs / 2;
  const uint8_t* vs = vt + hd * bs / 2;
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m256 eight = _mm256_set1_ps(8.0f);
  for (int64_t d = 0; d < hd; ++d) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(kt + d * (bs / 2)));
    const __m128i q = _mm_unpacklo_epi8(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16(b, 4), m4));
    const __m256 q0 = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q)), eight);
    const __m256 q1 = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(q, 8))), eight);
    const uint8_t* srow = ks + (d / gs) * bs * 2;
    _mm256_storeu_ps(kf + d * bs, _mm256_mul_ps(load_f16x8(srow), q0));
    _mm256_storeu_ps(kf + d * bs + 8, _mm256_mul_ps(load_f16x8(srow + 16), q1));
  }
  for (int64_t t = 0; t < bs; ++t) {
    for (int64_t d = 0; d < hd; d += 8) {
      int32_t w;
      std::memcpy(&w, vt + t * (hd / 2) + d / 2, 4);
      const __m128i b = _mm_cvtsi32_si128(w);
      const __m128i q = _mm_unpacklo_epi8(_mm_and_si128(b, m4), _mm_and_si128(_mm_srli_epi16(b, 4), m4));
      uint16_t h;
      std::memcpy(&h, vs + (t * ng + d / gs) * 2, 2);
      const __m256 qf = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q)), eight);
      _mm256_storeu_ps(vf + t * hd + d, _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(h)), qf));
    }
  }
}

// ---- x16 weight layouts (kernel_abi.h): AVX2 handles a 64-byte chunk vector as two 8-row halves

// Nibble chunks of one 32-column block (4 chunk vectors, 64 bytes apart, this half's 32 bytes at n)
// -> its 8 level vectors in element order: chunk c's low nibbles are elements 4c..4c+3, its high
// nibbles elements 16+4c.. (Q4_0 order).
TM_ISA_INLINE void unpack_nibbles(const uint8_t* n, __m256i q[8]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  TM_UNROLL
  for (int c = 0; c < 4; ++c) {
    const __m256i v = load_si256(n + 64 * c);
    q[c] = _mm256_and_si256(v, m4);
    q[c + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
  }
}

// ORs the fifth bits h (Q5 order: bit c of byte i belongs to element 4c+i) into bit 4 of the 8 level
// vectors (16-bit shifts cannot bleed into bit 4 of either byte for these shift counts).
TM_ISA_INLINE void add_fifth_bits(__m256i h, __m256i q[8]) {
  const __m256i b4 = _mm256_set1_epi8(0x10);
  q[0] = _mm256_or_si256(q[0], _mm256_and_si256(_mm256_slli_epi16(h, 4), b4));
  q[1] = _mm256_or_si256(q[1], _mm256_and_si256(_mm256_slli_epi16(h, 3), b4));
  q[2] = _mm256_or_si256(q[2], _mm256_and_si256(_mm256_slli_epi16(h, 2), b4));
  q[3] = _mm256_or_si256(q[3], _mm256_and_si256(_mm256_slli_epi16(h, 1), b4));
  q[4] = _mm256_or_si256(q[4], _mm256_and_si256(h, b4));
  q[5] = _mm256_or_si256(q[5], _mm256_and_si256(_mm256_srli_epi16(h, 1), b4));
  q[6] = _mm256_or_si256(q[6], _mm256_and_si256(_mm256_srli_epi16(h, 2), b4));
  q[7] = _mm256_or_si256(q[7], _mm256_and_si256(_mm256_srli_epi16(h, 3), b4));
}

// The AVX2 x16 GEMM loops (a 64-byte chunk vector is two ymm halves, rows 0-7 and 8-15): for each
// 8-row half hf of the 16-row groups [g0, g1) that holds real rows (below `rows`) and each tile of
// up to U of the T tokens, f(KindTag<u>{}, gb, hf, t0, r, nrows): gb is the group's first
// group-block, t0 the tile's first token, r the half's first row, nrows (1..8) its real rows.
template <int U, class F>
TM_ISA_INLINE void for_each_half_tile(const uint8_t* w, int64_t group_bytes, int64_t g0, int64_t g1, int T,
                                      int64_t rows, F&& f) {
  for (int64_t g = g0; g < g1; ++g) {
    for (int hf = 0; hf < 2; ++hf) {
      const int64_t r = g * kRows + 8 * hf;
      if (r >= rows) break;
      const int nrows = rows - r >= 8 ? 8 : static_cast<int>(rows - r);
      const uint8_t* gb = w + g * group_bytes;
      for_each_tile<U>(T, [&](auto u, int64_t t0) { f(u, gb, hf, static_cast<int>(t0), r, nrows); });
    }
  }
}

// ---- register tiles

// A tile of accumulators (any vector type) set to zero.
template <class V, int R, int T>
TM_ISA_INLINE void zero_tile(V (&acc)[R][T]) {
  TM_UNROLL
  for (int i = 0; i < R; ++i)
    TM_UNROLL
    for (int t = 0; t < T; ++t) acc[i][t] = V{};
}

// Rows r .. r+R-1 of a row-major matrix of rb-byte rows.
template <int R>
TM_ISA_INLINE void row_pointers(const uint8_t* (&rows)[R], const void* w, size_t rb, int64_t r) {
  TM_UNROLL
  for (int i = 0; i < R; ++i) rows[i] = static_cast<const uint8_t*>(w) + static_cast<size_t>(r + i) * rb;
}

// The first n (1..8) lanes of v to dst.
static inline void store_rows8(float* dst, __m256 v, int n) {
  if (n == 8) {
    _mm256_storeu_ps(dst, v);
  } else {
    float tmp[8];
    _mm256_storeu_ps(tmp, v);
    for (int i = 0; i < n; ++i) dst[i] = tmp[i];
  }
}

}  // namespace tmill::kern
