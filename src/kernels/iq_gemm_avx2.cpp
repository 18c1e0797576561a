// AVX2 GEMM for the lattice i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) on row-major
// weights, bitwise the scalar kernel's results (kernels/iq_gemm_scalar.cpp). Per super-block the grid
// entries are looked up and gathered straight into vectors (_mm256_set_epi64x / _epi32; the integer
// form of quant/iq_decode.h, without its buffer), so each 32-element sub-block becomes two vectors: |w| and a sign source s (IQ2/IQ3: +-1 from the sign bits, expanded with one vpshufb;
// IQ1: w = 8 * level + delta itself). Each token of the tile then takes, per sub-block,
// vpmaddubsw(|w|, sign(x, s)) (pairs <= 2 * 62 * 127 < 32767) and vpmaddwd by the two 16-element
// scales, summed in int32 lanes: the same integer as the scalar loop, and the same float steps.
#include "kernels/isa_avx2.h"
#include "kernels/iq_direct_avx2.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {

bool g_iq_fast_pdep = false;

namespace {

// IQ1_S's super-block as levels: per sub-block |level| (aw), the level itself as the sign source (sw),
// 8 x the multiplier as the madd factor (sc), and multiplier x delta sign (sd: the delta term's weight
// on the sub-block's activation sum). Returns d's fp16 bits. (IQ1_S: d | qs[32] | qh u16[8].)
TM_ISA_INLINE uint16_t iq1s_levels(const uint8_t* blk, __m256i aw[8], __m256i sw[8], __m256i sc[8], int sd[8]) {
  uint16_t d;
  std::memcpy(&d, blk, 2);
  TM_UNROLL
  for (int ib = 0; ib < 8; ++ib) {
    uint16_t h;
    std::memcpy(&h, blk + 34 + 2 * ib, 2);
    // the four 11-bit grid indices (qs byte l | 3 bits of h at 3l, << 8): in 16-bit fields by two
    // pdeps where PDEP is fast (g_iq_fast_pdep), else one by one
    __m256i lvl;
    if (g_iq_fast_pdep) {
      const uint64_t idx =
          _pdep_u64(iq_le32(blk + 2 + 4 * ib), 0x00ff00ff00ff00ffull) | _pdep_u64(h, 0x0700070007000700ull);
      auto g = [&](int l) { return static_cast<int64_t>(kIq1sGrid[(idx >> (16 * l)) & 0xffff]); };
      lvl = _mm256_set_epi64x(g(3), g(2), g(1), g(0));
    } else {
      const uint8_t* q = blk + 2 + 4 * ib;
      auto g = [&](int l) { return static_cast<int64_t>(kIq1sGrid[q[l] | (((h >> (3 * l)) & 7) << 8)]); };
      lvl = _mm256_set_epi64x(g(3), g(2), g(1), g(0));
    }
    aw[ib] = _mm256_abs_epi8(lvl);
    sw[ib] = lvl;  // sign(x, 0) = 0: a zero level contributes nothing, as it must
    const int m = 2 * ((h >> 12) & 7) + 1;
    sc[ib] = _mm256_set1_epi16(static_cast<int16_t>(8 * m));
    sd[ib] = (h >> 15) ? -m : m;
  }
  return d;
}

// One tile of T <= kTile tokens.
template <int K>
void iq_tile(const uint8_t* w, size_t row_bytes, int64_t nb, int64_t r0, int64_t r1, const uint8_t* act, int T,
             float* y, int64_t ldy) {
  for (int64_t r = r0; r < r1; ++r) {
    float acc[kTile] = {};
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = w + static_cast<size_t>(r) * row_bytes + static_cast<size_t>(b) * kIqBlockBytes[K];
      __m256i aw[8], sw[8], sc[8];
      const uint8_t* rec = act + b * T * kQ8KRecordBytes;
      if constexpr (K == kIqIQ1_S) {
        // IQ1_S as 8 * (level . x) + delta * sum(x): the sub-block's delta is one sign, and the Q8K
        // record holds each 32-column sum, so only the levels (-1, 0, 1) need vectors; the same integer.
        int sd[8];  // multiplier x delta sign per sub-block
        const float d = fp16_to_fp32(iq1s_levels(blk, aw, sw, sc, sd));
        for (int t = 0; t < T; ++t) {
          const uint8_t* x = rec + 256 * t;
          const int16_t* bsum = reinterpret_cast<const int16_t*>(rec + T * 260 + 16 * t);
          __m256i s32 = _mm256_setzero_si256();
          int delta = 0;
          TM_UNROLL
          for (int ib = 0; ib < 8; ++ib) {
            const __m256i q = load_si256(x + 32 * ib);
            const __m256i p = _mm256_maddubs_epi16(aw[ib], _mm256_sign_epi8(q, sw[ib]));
            s32 = _mm256_add_epi32(s32, _mm256_madd_epi16(p, sc[ib]));
            delta += sd[ib] * bsum[ib];
          }
          float dx;
          std::memcpy(&dx, rec + T * 256 + 4 * t, 4);
          acc[t] += rounded((d * dx) * static_cast<float>(hsum8_epi32(s32) + delta));
        }
        continue;
      }
      const float d = fp16_to_fp32(build_direct<K>(blk, aw, sw, sc));
      for (int t = 0; t < T; ++t) {
        const uint8_t* x = rec + 256 * t;
        __m256i s32 = _mm256_setzero_si256();
        TM_UNROLL
        for (int ib = 0; ib < 8; ++ib) {
          const __m256i q = load_si256(x + 32 * ib);
          const __m256i p = _mm256_maddubs_epi16(aw[ib], _mm256_sign_epi8(q, sw[ib]));
          s32 = _mm256_add_epi32(s32, _mm256_madd_epi16(p, sc[ib]));
        }
        float dx;
        std::memcpy(&dx, rec + T * 256 + 4 * t, 4);
        acc[t] += rounded((d * dx) * static_cast<float>(hsum8_epi32(s32)));
      }
    }
    for (int t = 0; t < T; ++t) y[t * ldy + r] = kIqFactor[K] * acc[t];
  }
}

template <int K>
void iq_gemm(const uint8_t* w, size_t row_bytes, int64_t nb, int64_t r0, int64_t r1, const uint8_t* act,
             size_t tile_bytes, int64_t n, float* y, int64_t ldy) {
  for (int64_t i = 0; i * kTile < n; ++i) {
    const int T = static_cast<int>(n - i * kTile < kTile ? n - i * kTile : kTile);
    iq_tile<K>(w, row_bytes, nb, r0, r1, act + static_cast<size_t>(i) * tile_bytes, T, y + i * kTile * ldy, ldy);
  }
}

}  // namespace

void add_iq_gemm_avx2(KernelTable& t) {
  for_each_kind<kIqIQ2_XXS, kIqIQ2_XS, kIqIQ2_S, kIqIQ3_XXS, kIqIQ3_S, kIqIQ1_S, kIqIQ1_M>(
      [&](auto k) { t.iq_gemm[k.value] = iq_gemm<decltype(k)::value>; });
}

}  // namespace tmill::kern
