// AVX2 paged attention: like attention_avx512.cpp with each block's 16 keys in two ymm halves;
// head_dim a multiple of 8, up to 512 (as many query heads as the accumulators hold: attn_max_heads).
#include "kernels/isa_avx2.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

// How far (in scaled-score units) a score may exceed the softmax reference before it is moved.
constexpr float kSlack = 8.0f;

// s0/s1[g] = the block's keys 0..7 / 8..15 dotted with query head g, GN heads in registers. With one
// or two heads each gets A independent chain pairs over interleaved dimensions (summed at the end):
// one pair per head would wait on the FMA latency at every dimension.
template <int T, int GN>
void qk_block(const uint8_t* kt, const float* q, int64_t hd, __m256* s0, __m256* s1) {
  constexpr int64_t bs = 16, eb = elem_bytes<T>();
  constexpr int A = GN == 1 ? 4 : GN == 2 ? 2 : 1;
  __m256 r0[GN][A], r1[GN][A];
#pragma GCC unroll 8
  for (int g = 0; g < GN; ++g)
#pragma GCC unroll 4
    for (int i = 0; i < A; ++i) r0[g][i] = r1[g][i] = _mm256_setzero_ps();
  auto step = [&](int64_t d, int i) {
    const __m256 k0 = load8<T>(kt + d * bs * eb), k1 = load8<T>(kt + (d * bs + 8) * eb);
#pragma GCC unroll 8
    for (int g = 0; g < GN; ++g) {
      const __m256 qd = _mm256_set1_ps(q[g * hd + d]);
      r0[g][i] = _mm256_fmadd_ps(qd, k0, r0[g][i]);
      r1[g][i] = _mm256_fmadd_ps(qd, k1, r1[g][i]);
    }
  };
  int64_t d = 0;
  for (; d + A <= hd; d += A)
#pragma GCC unroll 4
    for (int i = 0; i < A; ++i) step(d + i, i);
  for (; d < hd; ++d) step(d, 0);
#pragma GCC unroll 8
  for (int g = 0; g < GN; ++g) {
    __m256 a0 = r0[g][0], a1 = r1[g][0];
#pragma GCC unroll 4
    for (int i = 1; i < A; ++i) {
      a0 = _mm256_add_ps(a0, r0[g][i]);
      a1 = _mm256_add_ps(a1, r1[g][i]);
    }
    s0[g] = a0;
    s1[g] = a1;
  }
}
using QkFn = void (*)(const uint8_t*, const float*, int64_t, __m256*, __m256*);
template <int T>
constexpr QkFn kQk[6] = {qk_block<T, 1>, qk_block<T, 2>, qk_block<T, 3>, qk_block<T, 4>, qk_block<T, 5>, qk_block<T, 6>};

// acc[g][j] += sum_t p[g][t] * V[t][j] for GN heads and JN 8-wide chunks of the V rows. With one or
// two heads the even and odd tokens go to separate accumulators (B = 2): fewer chains than the FMA
// latency needs otherwise.
template <int T, int GN, int JN>
void pv_block(const uint8_t* v0, int64_t vstride, int64_t n, const float (*p)[16], float* acc, int64_t ld) {
  constexpr int64_t eb = elem_bytes<T>();
  constexpr int B = GN <= 2 ? 2 : 1;
  __m256 r[B][GN][JN];
#pragma GCC unroll 4
  for (int g = 0; g < GN; ++g)
#pragma GCC unroll 4
    for (int j = 0; j < JN; ++j) {
      r[0][g][j] = _mm256_load_ps(acc + g * ld + j * 8);
      if constexpr (B == 2) r[B - 1][g][j] = _mm256_setzero_ps();
    }
  auto step = [&](int64_t t, __m256 (&rr)[GN][JN]) {
    __m256 v[JN];
#pragma GCC unroll 4
    for (int j = 0; j < JN; ++j) v[j] = load8<T>(v0 + t * vstride + j * 8 * eb);
#pragma GCC unroll 4
    for (int g = 0; g < GN; ++g) {
      const __m256 w = _mm256_set1_ps(p[g][t]);
#pragma GCC unroll 4
      for (int j = 0; j < JN; ++j) rr[g][j] = _mm256_fmadd_ps(w, v[j], rr[g][j]);
    }
  };
  int64_t t = 0;
  if constexpr (B == 2)
    for (; t + 2 <= n; t += 2) {
      step(t, r[0]);
      step(t + 1, r[1]);
    }
  for (; t < n; ++t) step(t, r[0]);
#pragma GCC unroll 4
  for (int g = 0; g < GN; ++g)
#pragma GCC unroll 4
    for (int j = 0; j < JN; ++j) {
      __m256 o = r[0][g][j];
      if constexpr (B == 2) o = _mm256_add_ps(o, r[B - 1][g][j]);
      _mm256_store_ps(acc + g * ld + j * 8, o);
    }
}
using PvFn = void (*)(const uint8_t*, int64_t, int64_t, const float (*)[16], float*, int64_t);
template <int T>
constexpr PvFn kPv[3][3] = {{pv_block<T, 1, 1>, pv_block<T, 1, 2>, pv_block<T, 1, 3>},
                            {pv_block<T, 2, 1>, pv_block<T, 2, 2>, pv_block<T, 2, 3>},
                            {pv_block<T, 3, 1>, pv_block<T, 3, 2>, pv_block<T, 3, 3>}};

// Q4 tiles are dequantized per block into F32 tiles (dequant_q4_kv_tiles) and run as F32 (L).
template <int T>
void attn(const AttnArgs& a) {
  constexpr int L = T == kKvQ4 ? static_cast<int>(kKvF32) : T;
  constexpr int64_t bs = 16, eb = elem_bytes<L>();
  alignas(32) float kq[T == kKvQ4 ? 256 * 16 : 1], vq[T == kKvQ4 ? 256 * 16 : 1];
  const int64_t hd = a.head_dim, G = a.group, nd = hd / 8;
  alignas(32) float acc[kAttnAccFloats];
  alignas(32) float p[16][16];
  alignas(32) float lsum[16][8];  // per query head: lane-wise partial sums of p
  float m[16];
  for (int64_t g = 0; g < G; ++g) {
    m[g] = -__builtin_inff();
    _mm256_store_ps(lsum[g], _mm256_setzero_ps());
  }
  std::memset(acc, 0, sizeof(float) * static_cast<size_t>(G * hd));
  for (int64_t b = a.ctx_begin / bs; b * bs < a.n_ctx; ++b) {
    const int64_t n = a.n_ctx - b * bs < bs ? a.n_ctx - b * bs : bs;
    // a sliding window's first block: the keys before ctx_begin are masked like those past n_ctx
    const int64_t t0 = a.ctx_begin > b * bs ? a.ctx_begin - b * bs : 0;
    const __m256 valid_lo = _mm256_castsi256_ps(_mm256_andnot_si256(tail_mask8(t0), tail_mask8(n)));
    const __m256 valid_hi = _mm256_castsi256_ps(_mm256_andnot_si256(tail_mask8(t0 - 8), tail_mask8(n - 8)));
    const int64_t tile = kv_tile(a.block_table[b], a.n_head_kv, a.kv_head);
    const uint8_t* kt = a.k_base + tile * a.tile_bytes;
    const uint8_t* vt = a.v_base + tile * a.tile_bytes;
    if ((b + 1) * bs < a.n_ctx) prefetch_kv_block(a, b + 1);
    if constexpr (T == kKvQ4) {
      dequant_q4_kv_tiles(kt, vt, hd, kq, vq);
      kt = reinterpret_cast<const uint8_t*>(kq);
      vt = reinterpret_cast<const uint8_t*>(vq);
    }
    __m256 s0[16], s1[16];
    for (int64_t g0 = 0; g0 < G; g0 += 6) {
      const int gn = static_cast<int>(G - g0 < 6 ? G - g0 : 6);
      kQk<L>[gn - 1](kt, a.q + g0 * hd, hd, s0 + g0, s1 + g0);
    }
    __m256 ks0 = _mm256_set1_ps(a.scale), ks1 = ks0, vs0 = _mm256_set1_ps(1.0f), vs1 = vs0;
    if constexpr (kv_token_scaled(T)) {
      const float* kscale = reinterpret_cast<const float*>(kt + hd * bs);
      const float* vscale = reinterpret_cast<const float*>(vt + hd * bs);
      const __m256 unit = _mm256_set1_ps(kv_code_unit<T>());
      ks0 = _mm256_mul_ps(ks0, _mm256_mul_ps(unit, _mm256_loadu_ps(kscale)));
      ks1 = _mm256_mul_ps(ks1, _mm256_mul_ps(unit, _mm256_loadu_ps(kscale + 8)));
      vs0 = _mm256_mul_ps(unit, _mm256_loadu_ps(vscale));
      vs1 = _mm256_mul_ps(unit, _mm256_loadu_ps(vscale + 8));
    }
    const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
    // ALiBi: each key's distance back from the query, the lanes' positions less n_ctx - 1
    const __m256 dist0 = _mm256_add_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7),
                                       _mm256_set1_ps(static_cast<float>(b * bs - (a.n_ctx - 1))));
    const __m256 dist1 = _mm256_add_ps(dist0, _mm256_set1_ps(8.0f));
    // Online softmax with a lazy reference (as the AVX-512 kernel): m[g] moves, and acc / lsum are
    // rescaled, only when a score exceeds it by more than kSlack; the row sums stay vectors.
    for (int64_t g = 0; g < G; ++g) {
      __m256 c0 = _mm256_mul_ps(s0[g], ks0), c1 = _mm256_mul_ps(s1[g], ks1);
      if (a.softcap > 0) {  // gemma2
        c0 = softcap256(c0, a.softcap);
        c1 = softcap256(c1, a.softcap);
      }
      if (a.alibi) {  // bloom, mpt
        const __m256 slope = _mm256_set1_ps(a.alibi[g]);
        c0 = _mm256_add_ps(c0, _mm256_mul_ps(slope, dist0));
        c1 = _mm256_add_ps(c1, _mm256_mul_ps(slope, dist1));
      }
      const __m256 a0 = _mm256_blendv_ps(ninf, c0, valid_lo);
      const __m256 a1 = _mm256_blendv_ps(ninf, c1, valid_hi);
      const __m256 lim = _mm256_set1_ps(m[g] + kSlack);
      if (_mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(a0, lim, _CMP_GT_OQ), _mm256_cmp_ps(a1, lim, _CMP_GT_OQ)))) {
        const float mx = __builtin_fmaxf(m[g], hmax8(_mm256_max_ps(a0, a1)));
        const __m256 c = _mm256_set1_ps(__builtin_expf(m[g] - mx));  // 0 on the first block (m = -inf)
        m[g] = mx;
        _mm256_store_ps(lsum[g], _mm256_mul_ps(c, _mm256_load_ps(lsum[g])));
        for (int64_t j = 0; j < nd; ++j)
          _mm256_store_ps(acc + g * hd + j * 8, _mm256_mul_ps(c, _mm256_load_ps(acc + g * hd + j * 8)));
      }
      const __m256 mv = _mm256_set1_ps(m[g]);
      __m256 p0 = _mm256_and_ps(valid_lo, exp256(_mm256_sub_ps(a0, mv)));
      __m256 p1 = _mm256_and_ps(valid_hi, exp256(_mm256_sub_ps(a1, mv)));
      _mm256_store_ps(lsum[g], _mm256_add_ps(_mm256_add_ps(p0, p1), _mm256_load_ps(lsum[g])));
      if constexpr (kv_token_scaled(T)) {
        p0 = _mm256_mul_ps(p0, vs0);
        p1 = _mm256_mul_ps(p1, vs1);
      }
      _mm256_store_ps(p[g], p0);
      _mm256_store_ps(p[g] + 8, p1);
    }
    // acc += p V: V row chunks loaded once per block of up to 3 query heads (registers: 9 + 3 + 1)
    for (int64_t j0 = 0; j0 < nd; j0 += 3) {
      const int jn = static_cast<int>(nd - j0 < 3 ? nd - j0 : 3);
      for (int64_t g0 = 0; g0 < G; g0 += 3) {
        const int gn = static_cast<int>(G - g0 < 3 ? G - g0 : 3);
        kPv<L>[gn - 1][jn - 1](vt + j0 * 8 * eb, hd * eb, n, p + g0, acc + g0 * hd + j0 * 8, hd);
      }
    }
  }
  for (int64_t g = 0; g < G; ++g) {
    const float l = hsum8(_mm256_load_ps(lsum[g]));
    const __m256 inv = _mm256_set1_ps(a.sinks ? sink_norm(m[g], l, a.sinks[g]) : 1.0f / l);
    for (int64_t j = 0; j < nd; ++j)
      _mm256_storeu_ps(a.out + g * hd + j * 8, _mm256_mul_ps(inv, _mm256_load_ps(acc + g * hd + j * 8)));
  }
}

bool covers(const AttnArgs& a) {
  // (acc: group x head_dim floats; a Q4 block's F32 tiles: 256 x 16)
  return a.block_size == 16 && a.head_dim % 8 == 0 && a.head_dim <= 512 && a.group >= 1 &&
         a.group <= attn_max_heads(a.head_dim) && a.n_kv == 1 && (a.kv_type != kKvQ4 || a.head_dim <= 256);
}

}  // namespace

void add_attention_avx2(KernelTable& t) {
  t.attention_covers = covers;
  for_each_kind<kKvF32, kKvF16, kKvBF16, kKvI8, kKvQ4, kKvF8E4M3, kKvF8E5M2>(
      [&](auto k) { t.attention[k.value] = attn<decltype(k)::value>; });
}

}  // namespace tmill::kern
