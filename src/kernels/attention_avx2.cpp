// AVX2 paged attention: like attention_avx512.cpp with each block's 16 keys in two ymm halves;
// head_dim a multiple of 8.
#include <immintrin.h>

#include <cstring>

#include "kernels/attention_abi.h"
#include "kernels/vec_math_avx2.h"

namespace tmill::kern {
namespace {


template <int T>
__m256 load8(const uint8_t* p) {
  if constexpr (T == kKvF32) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  if constexpr (T == kKvF16) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  if constexpr (T == kKvBF16)
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

template <int T>
constexpr int64_t elem_bytes() {
  return T == kKvF32 ? 4 : T == kKvI8 ? 1 : 2;
}

float hmax(__m256 v) {
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  x = _mm_max_ss(x, _mm_shuffle_ps(x, x, 1));
  return _mm_cvtss_f32(x);
}
float hsum(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_shuffle_ps(x, x, 1));
  return _mm_cvtss_f32(x);
}

template <int T>
void attn(const AttnArgs& a) {
  constexpr int64_t bs = 16, eb = elem_bytes<T>();
  const int64_t hd = a.head_dim, G = a.group, nd = hd / 8;
  alignas(32) float acc[16 * 256];
  alignas(32) float p[16][16];
  float m[16], l[16];
  for (int64_t g = 0; g < G; ++g) {
    m[g] = -__builtin_inff();
    l[g] = 0.0f;
  }
  std::memset(acc, 0, sizeof(float) * static_cast<size_t>(G * hd));
  alignas(32) static const int32_t lane[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  const __m256i lanes = _mm256_load_si256(reinterpret_cast<const __m256i*>(lane));
  for (int64_t b = 0; b * bs < a.n_ctx; ++b) {
    const int64_t n = a.n_ctx - b * bs < bs ? a.n_ctx - b * bs : bs;
    const __m256 valid_lo = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lanes));
    const __m256 valid_hi =
        _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n) - 8), lanes));
    const int64_t tile = static_cast<int64_t>(a.block_table[b]) * a.n_head_kv + a.kv_head;
    const uint8_t* kt = a.k_base + tile * a.tile_bytes;
    const uint8_t* vt = a.v_base + tile * a.tile_bytes;
    __m256 s0[16], s1[16];
    for (int64_t g = 0; g < G; ++g) s0[g] = s1[g] = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd; ++d) {
      const __m256 k0 = load8<T>(kt + d * bs * eb), k1 = load8<T>(kt + (d * bs + 8) * eb);
      for (int64_t g = 0; g < G; ++g) {
        const __m256 q = _mm256_set1_ps(a.q[g * hd + d]);
        s0[g] = _mm256_fmadd_ps(q, k0, s0[g]);
        s1[g] = _mm256_fmadd_ps(q, k1, s1[g]);
      }
    }
    __m256 ks0 = _mm256_set1_ps(a.scale), ks1 = ks0, vs0 = _mm256_set1_ps(1.0f), vs1 = vs0;
    if constexpr (T == kKvI8) {
      const float* kscale = reinterpret_cast<const float*>(kt + hd * bs);
      const float* vscale = reinterpret_cast<const float*>(vt + hd * bs);
      ks0 = _mm256_mul_ps(ks0, _mm256_loadu_ps(kscale));
      ks1 = _mm256_mul_ps(ks1, _mm256_loadu_ps(kscale + 8));
      vs0 = _mm256_loadu_ps(vscale);
      vs1 = _mm256_loadu_ps(vscale + 8);
    }
    const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
    for (int64_t g = 0; g < G; ++g) {
      const __m256 a0 = _mm256_blendv_ps(ninf, _mm256_mul_ps(s0[g], ks0), valid_lo);
      const __m256 a1 = _mm256_blendv_ps(ninf, _mm256_mul_ps(s1[g], ks1), valid_hi);
      const float mx = __builtin_fmaxf(m[g], hmax(_mm256_max_ps(a0, a1)));
      const float corr = __builtin_expf(m[g] - mx);
      const __m256 mv = _mm256_set1_ps(mx);
      __m256 p0 = _mm256_and_ps(valid_lo, exp256(_mm256_sub_ps(a0, mv)));
      __m256 p1 = _mm256_and_ps(valid_hi, exp256(_mm256_sub_ps(a1, mv)));
      l[g] = l[g] * corr + hsum(_mm256_add_ps(p0, p1));
      m[g] = mx;
      if constexpr (T == kKvI8) {
        p0 = _mm256_mul_ps(p0, vs0);
        p1 = _mm256_mul_ps(p1, vs1);
      }
      _mm256_store_ps(p[g], p0);
      _mm256_store_ps(p[g] + 8, p1);
      if (corr != 1.0f) {
        const __m256 c = _mm256_set1_ps(corr);
        for (int64_t j = 0; j < nd; ++j)
          _mm256_store_ps(acc + g * hd + j * 8, _mm256_mul_ps(c, _mm256_load_ps(acc + g * hd + j * 8)));
      }
    }
    for (int64_t g = 0; g < G; ++g) {
      float* ag = acc + g * hd;
      for (int64_t j0 = 0; j0 < nd; j0 += 4) {
        const int64_t jn = nd - j0 < 4 ? nd - j0 : 4;
        __m256 r[4];
        for (int64_t j = 0; j < jn; ++j) r[j] = _mm256_load_ps(ag + (j0 + j) * 8);
        for (int64_t t = 0; t < n; ++t) {
          const __m256 w = _mm256_set1_ps(p[g][t]);
          const uint8_t* vrow = vt + t * hd * eb;
          for (int64_t j = 0; j < jn; ++j) r[j] = _mm256_fmadd_ps(w, load8<T>(vrow + (j0 + j) * 8 * eb), r[j]);
        }
        for (int64_t j = 0; j < jn; ++j) _mm256_store_ps(ag + (j0 + j) * 8, r[j]);
      }
    }
  }
  for (int64_t g = 0; g < G; ++g) {
    const __m256 inv = _mm256_set1_ps(1.0f / l[g]);
    for (int64_t j = 0; j < nd; ++j)
      _mm256_storeu_ps(a.out + g * hd + j * 8, _mm256_mul_ps(inv, _mm256_load_ps(acc + g * hd + j * 8)));
  }
}

}  // namespace

AttnFn attention_avx2(const AttnArgs& a) {
  if (a.block_size != 16 || a.head_dim % 8 != 0 || a.head_dim > 256 || a.group > 16 || a.group < 1) return nullptr;
  switch (a.kv_type) {
    case kKvF32: return attn<kKvF32>;
    case kKvF16: return attn<kKvF16>;
    case kKvBF16: return attn<kKvBF16>;
    case kKvI8: return attn<kKvI8>;
    default: return nullptr;
  }
}

}  // namespace tmill::kern
