// AVX2 GEMM for the lattice i-quants (IQ2_XXS, IQ2_XS, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) on row-major
// weights, bitwise the scalar kernel's results (kernels/iq_gemm_scalar.cpp). Per super-block the grid
// entries are gathered by quant/iq_decode.h (table look-ups), then each 32-element sub-block becomes
// two vectors: |w| and a sign source s (IQ2/IQ3: +-1 from the sign bits, expanded with one vpshufb;
// IQ1: w = 8 * level + delta itself). Each token of the tile then takes, per sub-block,
// vpmaddubsw(|w|, sign(x, s)) (pairs <= 2 * 62 * 127 < 32767) and vpmaddwd by the two 16-element
// scales, summed in int32 lanes: the same integer as the scalar loop, and the same float steps.
#include "kernels/isa_avx2.h"
#include "kernels/kernel_table.h"
#include "core/fp16.h"
#include "quant/iq_decode.h"

namespace tmill::kern {
namespace {

// The 4 sign (or delta) bytes of a sub-block, each spread over its 8 elements, ANDed with the
// element's bit: non-zero where bit (element % 8) of the element's byte is set.
TM_ISA_INLINE __m256i spread_bits(const uint8_t* sgn, bool bit0_only) {
  uint32_t v;
  std::memcpy(&v, sgn, 4);
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3,
                                        3, 3, 3, 3, 3);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(v)), shuf);
  const __m256i bits = bit0_only ? _mm256_set1_epi8(1)
                                 : _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bits), bits);  // 0xff where set
}

template <int K>
TM_ISA_INLINE void build(const IqDecoded& o, __m256i aw[8], __m256i sw[8], __m256i sc[8]) {
  const __m256i one = _mm256_set1_epi8(1);
  TM_UNROLL
  for (int ib = 0; ib < 8; ++ib) {
    const __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(o.mag + 32 * ib));
    if constexpr (K == kIqIQ1_S || K == kIqIQ1_M) {
      const __m256i m2 = _mm256_add_epi8(m, m), m4 = _mm256_add_epi8(m2, m2), m8 = _mm256_add_epi8(m4, m4);
      const __m256i neg = spread_bits(o.sgn + 4 * ib, true);
      const __m256i w = _mm256_add_epi8(m8, _mm256_or_si256(neg, one));  // 8 * level + (+-1)
      aw[ib] = _mm256_abs_epi8(w);
      sw[ib] = w;
    } else {
      aw[ib] = m;
      sw[ib] = _mm256_or_si256(spread_bits(o.sgn + 4 * ib, false), one);  // -1 or +1
    }
    sc[ib] = _mm256_set_m128i(_mm_set1_epi16(o.sc[2 * ib + 1]), _mm_set1_epi16(o.sc[2 * ib]));
  }
}

template <int K>
void iq_gemm(const uint8_t* w, size_t row_bytes, int64_t nb, int64_t r0, int64_t r1, const uint8_t* act, int T,
             float* y, int64_t ldy) {
  IqDecoded o;
  for (int64_t r = r0; r < r1; ++r) {
    float acc[kTile] = {};
    for (int64_t b = 0; b < nb; ++b) {
      iq_decode(K, w + static_cast<size_t>(r) * row_bytes + static_cast<size_t>(b) * kIqBlockBytes[K], o);
      __m256i aw[8], sw[8], sc[8];
      build<K>(o, aw, sw, sc);
      const float d = fp16_to_fp32(o.d);
      const uint8_t* rec = act + b * T * kQ8KRecordBytes;
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

}  // namespace

void add_iq_gemm_avx2(KernelTable& t) {
  t.iq_gemm[kIqIQ2_XXS] = iq_gemm<kIqIQ2_XXS>;
  t.iq_gemm[kIqIQ2_XS] = iq_gemm<kIqIQ2_XS>;
  t.iq_gemm[kIqIQ3_XXS] = iq_gemm<kIqIQ3_XXS>;
  t.iq_gemm[kIqIQ3_S] = iq_gemm<kIqIQ3_S>;
  t.iq_gemm[kIqIQ1_S] = iq_gemm<kIqIQ1_S>;
  t.iq_gemm[kIqIQ1_M] = iq_gemm<kIqIQ1_M>;
}

}  // namespace tmill::kern
