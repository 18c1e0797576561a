// AVX-512 paged attention: block_size 16 (one zmm = one dimension of a block's 16 keys, thanks to
// the transposed K tile), any head_dim <= 512 (the last 16-wide chunk of a V row is masked), up to
// 16 query heads per KV head.
#include "kernels/isa_avx512.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

// s[g] = the 16 keys of a block (transposed K tile) dotted with query head g, for GN heads in registers.
// With few heads one FMA chain per head would wait on the FMA latency at every dimension, so each
// head gets A independent chains (dimensions d, d + 1, .. interleaved), summed at the end.
template <int T, int GN>
void qk_block(const uint8_t* kt, const float* q, int64_t hd, __m512* s, int64_t pf) {
  constexpr int64_t eb = elem_bytes<T>();
  constexpr int A = GN == 1 ? 4 : GN == 2 ? 2 : 1;
  __m512 r[GN][A];
#pragma GCC unroll 8
  for (int g = 0; g < GN; ++g)
#pragma GCC unroll 4
    for (int i = 0; i < A; ++i) r[g][i] = _mm512_setzero_ps();
  int64_t d = 0;
  for (; d + A <= hd; d += A) {
    if (GN == 1 && pf) prefetch_weights<A * 16 * eb>(kt + d * 16 * eb, pf);  // next A dims, pf on (attn)
#pragma GCC unroll 4
    for (int i = 0; i < A; ++i) {
      const __m512 kd = load16<T>(kt + (d + i) * 16 * eb);
#pragma GCC unroll 8
      for (int g = 0; g < GN; ++g) r[g][i] = _mm512_fmadd_ps(_mm512_set1_ps(q[g * hd + d + i]), kd, r[g][i]);
    }
  }
  for (; d < hd; ++d) {
    const __m512 kd = load16<T>(kt + d * 16 * eb);
#pragma GCC unroll 8
    for (int g = 0; g < GN; ++g) r[g][0] = _mm512_fmadd_ps(_mm512_set1_ps(q[g * hd + d]), kd, r[g][0]);
  }
#pragma GCC unroll 8
  for (int g = 0; g < GN; ++g) {
    if constexpr (A == 4) s[g] = _mm512_add_ps(_mm512_add_ps(r[g][0], r[g][1]), _mm512_add_ps(r[g][2], r[g][3]));
    else if constexpr (A == 2) s[g] = _mm512_add_ps(r[g][0], r[g][1]);
    else s[g] = r[g][0];
  }
}

using QkFn = void (*)(const uint8_t*, const float*, int64_t, __m512*, int64_t);
template <int T>
constexpr QkFn kQk[8] = {qk_block<T, 1>, qk_block<T, 2>, qk_block<T, 3>, qk_block<T, 4>,
                         qk_block<T, 5>, qk_block<T, 6>, qk_block<T, 7>, qk_block<T, 8>};

// acc[g][j] += sum_t p[g][t] * V[t][j] for GN query heads and JN 16-wide chunks of the V rows
// (row stride vstride bytes), all accumulators in registers. With one or two heads the even and odd
// tokens go to separate accumulators (B = 2), so the FMA chains are not latency-bound.
template <int T, int GN, int JN>
void pv_block(const uint8_t* v0, int64_t vstride, int64_t n, const float (*p)[16], float* acc, int64_t hp,
              bool last_masked, __mmask16 tail, int64_t pf) {
  constexpr int64_t eb = elem_bytes<T>();
  constexpr int B = GN <= 2 ? 2 : 1;
  __m512 r[B][GN][JN];
#pragma GCC unroll 8
  for (int g = 0; g < GN; ++g)
#pragma GCC unroll 4
    for (int j = 0; j < JN; ++j) {
      r[0][g][j] = _mm512_load_ps(acc + g * hp + j * 16);
      if constexpr (B == 2) r[B - 1][g][j] = _mm512_setzero_ps();
    }
  auto step = [&](int64_t t, __m512 (&rr)[GN][JN]) {
    const uint8_t* vrow = v0 + t * vstride;
    if (GN == 1 && pf) prefetch_weights<JN * 16 * eb>(vrow, pf);
    __m512 v[JN];
#pragma GCC unroll 4
    for (int j = 0; j < JN; ++j)
      v[j] = (last_masked && j == JN - 1) ? load16<T>(vrow + j * 16 * eb, tail) : load16<T>(vrow + j * 16 * eb);
#pragma GCC unroll 8
    for (int g = 0; g < GN; ++g) {
      const __m512 w = _mm512_set1_ps(p[g][t]);
#pragma GCC unroll 4
      for (int j = 0; j < JN; ++j) rr[g][j] = _mm512_fmadd_ps(w, v[j], rr[g][j]);
    }
  };
  int64_t t = 0;
  if constexpr (B == 2)
    for (; t + 2 <= n; t += 2) {
      step(t, r[0]);
      step(t + 1, r[1]);
    }
  for (; t < n; ++t) step(t, r[0]);
#pragma GCC unroll 8
  for (int g = 0; g < GN; ++g)
#pragma GCC unroll 4
    for (int j = 0; j < JN; ++j) {
      __m512 o = r[0][g][j];
      if constexpr (B == 2) o = _mm512_add_ps(o, r[B - 1][g][j]);
      _mm512_store_ps(acc + g * hp + j * 16, o);
    }
}

using PvFn = void (*)(const uint8_t*, int64_t, int64_t, const float (*)[16], float*, int64_t, bool, __mmask16, int64_t);
template <int T>
constexpr PvFn kPv[6][4] = {
    {pv_block<T, 1, 1>, pv_block<T, 1, 2>, pv_block<T, 1, 3>, pv_block<T, 1, 4>},
    {pv_block<T, 2, 1>, pv_block<T, 2, 2>, pv_block<T, 2, 3>, pv_block<T, 2, 4>},
    {pv_block<T, 3, 1>, pv_block<T, 3, 2>, pv_block<T, 3, 3>, pv_block<T, 3, 4>},
    {pv_block<T, 4, 1>, pv_block<T, 4, 2>, pv_block<T, 4, 3>, pv_block<T, 4, 4>},
    {pv_block<T, 5, 1>, pv_block<T, 5, 2>, pv_block<T, 5, 3>, pv_block<T, 5, 4>},
    {pv_block<T, 6, 1>, pv_block<T, 6, 2>, pv_block<T, 6, 3>, pv_block<T, 6, 4>},
};

// How far (in scaled-score units) a score may exceed the softmax reference before it is moved.
constexpr float kSlack = 8.0f;

// Q4 tiles are dequantized per block into F32 tiles (dequant_q4_kv_tiles) and run as F32 (L).
// a.n_kv KV heads at once: for each block, head j's tile (adjacent to head j - 1's in the pool) with
// its query heads j * G .. j * G + G - 1; every head's arithmetic is what it would be alone.
template <int T>
void attn(const AttnArgs& a) {
  constexpr int L = T == kKvQ4 ? static_cast<int>(kKvF32) : T;
  constexpr int64_t bs = 16, eb = elem_bytes<L>();
  alignas(64) float kq[T == kKvQ4 ? 256 * 16 : 1], vq[T == kKvQ4 ? 256 * 16 : 1];
  const int64_t hd = a.head_dim, G = a.group, HQ = G * a.n_kv, nd = (hd + 15) / 16, hp = nd * 16;  // acc rows padded to hp
  const __mmask16 tail = static_cast<__mmask16>(hd % 16 ? (1u << (hd % 16)) - 1 : 0xffff);
  alignas(64) float acc[kAttnAccFloats];
  alignas(64) float p[16][16];
  alignas(64) float lsum[16][16];  // per query head: lane-wise partial sums of p
  float m[16];
  for (int64_t g = 0; g < HQ; ++g) {
    m[g] = -__builtin_inff();
    _mm512_store_ps(lsum[g], _mm512_setzero_ps());
  }
  std::memset(acc, 0, sizeof(float) * static_cast<size_t>(HQ * hp));
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  // Long runs (several heads' tiles per block, e.g. OLMoE's 16 x 4 KiB): with one query head per KV
  // head, the kernels prefetch each line kAttnPrefetch bytes ahead as they go -- into the next heads'
  // tiles of the same run. bench_attention's OLMoE DecodeStep (heads:16, one thread, AMD EPYC, 24 runs
  // alternating): median 25.7 -> 21.5 ms. Short runs keep the whole-next-block prefetch below; a hot
  // single head lost 12-22 % to the line prefetches, which is why they stay off there.
  // The target is the tile kAttnPrefetch bytes on in the order the loop reads them (this block's
  // next heads, then the next block's first heads: a block's run ends, the next one starts elsewhere
  // in the pool), so the prefetches neither stop at a run's end nor fetch lines no one reads
  // (OLMoE's step, 10 runs alternating: 19.2-22.9 ms against 20.3-26.4 before, faster in every pair).
  constexpr int64_t kAttnPrefetch = 4096;
  const bool line_pf = T != kKvQ4 && a.n_kv * a.tile_bytes >= 16384;  // (Q4: kernels read dequantized copies)
  const int64_t ahead = (kAttnPrefetch + a.tile_bytes - 1) / a.tile_bytes, last_block = (a.n_ctx - 1) / bs;
  for (int64_t b = a.ctx_begin / bs; b * bs < a.n_ctx; ++b) {
    const int64_t n = a.n_ctx - b * bs < bs ? a.n_ctx - b * bs : bs;
    // a sliding window's first block: the keys before ctx_begin are masked like those past n_ctx
    const int64_t t0 = a.ctx_begin > b * bs ? a.ctx_begin - b * bs : 0;
    const __mmask16 valid = static_cast<__mmask16>(tail_mask16(n) & ~tail_mask16(t0));
    // Short runs (one head's tiles, a few KiB): pull the next block's toward L2. Long ones (several
    // heads: each block's K and V tiles are two contiguous runs) are left to the hardware prefetchers,
    // which follow them; software prefetches of a whole next block there only queue behind them
    // (bench_attention's OLMoE step, 16 heads x 4 KiB: 18.5 ms without, 21-22 ms with).
    if (a.n_kv * a.tile_bytes < 16384 && (b + 1) * bs < a.n_ctx) prefetch_kv_block(a, b + 1);
    // ALiBi: each key's distance back from the query, the lanes' positions less n_ctx - 1 (every head's)
    const __m512 dist = _mm512_add_ps(_mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                      _mm512_set1_ps(static_cast<float>(b * bs - (a.n_ctx - 1))));
    for (int64_t j = 0; j < a.n_kv; ++j) {
      const int64_t tile = kv_tile(a.block_table[b], a.n_head_kv, a.kv_head + j);
      const uint8_t* kt = a.k_base + tile * a.tile_bytes;
      const uint8_t* vt = a.v_base + tile * a.tile_bytes;
      int64_t pf = 0;  // bytes from this tile to the one to prefetch (K and V alike), 0: none
      if (line_pf) {
        const int64_t jj = j + ahead, bb = b + jj / a.n_kv;
        if (bb <= last_block)
          pf = (kv_tile(a.block_table[bb], a.n_head_kv, a.kv_head + jj % a.n_kv) - tile) * a.tile_bytes;
      }
      if constexpr (T == kKvQ4) {
        dequant_q4_kv_tiles(kt, vt, hd, kq, vq);
        kt = reinterpret_cast<const uint8_t*>(kq);
        vt = reinterpret_cast<const uint8_t*>(vq);
      }
      const int64_t h0 = j * G;  // this KV head's first query head
      // scores of the block's 16 keys for every query head of this KV head
      __m512 s[16];
      for (int64_t g0 = 0; g0 < G; g0 += 8) {
        const int gn = static_cast<int>(G - g0 < 8 ? G - g0 : 8);
        kQk<L>[gn - 1](kt, a.q + (h0 + g0) * hd, hd, s + g0, pf);
      }
      __m512 kscale = _mm512_set1_ps(a.scale), vscale = _mm512_set1_ps(1.0f);
      if constexpr (kv_token_scaled(T)) {
        const __m512 unit = _mm512_set1_ps(kv_code_unit<T>());
        kscale = _mm512_mul_ps(kscale, _mm512_mul_ps(unit, _mm512_loadu_ps(reinterpret_cast<const float*>(kt + hd * bs))));
        vscale = _mm512_mul_ps(unit, _mm512_loadu_ps(reinterpret_cast<const float*>(vt + hd * bs)));
      }
      // Online softmax with a lazy reference: p = exp(s - m[h]) where m[h] is a past maximum, moved
      // (and acc, lsum rescaled) only when a score exceeds it by more than kSlack, so p <= e^kSlack.
      // Most blocks then cost one compare instead of two horizontal reductions and a scalar exp; the
      // row sum stays a vector until the end.
      for (int64_t g = 0; g < G; ++g) {
        const int64_t h = h0 + g;
        __m512 sc = _mm512_mul_ps(s[g], kscale);
        if (a.softcap > 0) sc = softcap512(sc, a.softcap);  // gemma2
        if (a.alibi) sc = _mm512_add_ps(sc, _mm512_mul_ps(_mm512_set1_ps(a.alibi[h]), dist));  // bloom, mpt
        const __m512 sg = _mm512_mask_mov_ps(neg_inf, valid, sc);
        if (_mm512_cmp_ps_mask(sg, _mm512_set1_ps(m[h] + kSlack), _CMP_GT_OQ)) {
          const float mx = __builtin_fmaxf(m[h], _mm512_reduce_max_ps(sg));
          const float corr = __builtin_expf(m[h] - mx);  // 0 on the first block (m = -inf)
          m[h] = mx;
          const __m512 c = _mm512_set1_ps(corr);
          _mm512_store_ps(lsum[h], _mm512_mul_ps(c, _mm512_load_ps(lsum[h])));
          for (int64_t jd = 0; jd < nd; ++jd)
            _mm512_store_ps(acc + h * hp + jd * 16, _mm512_mul_ps(c, _mm512_load_ps(acc + h * hp + jd * 16)));
        }
        __m512 pg = _mm512_maskz_mov_ps(valid, exp512(_mm512_sub_ps(sg, _mm512_set1_ps(m[h]))));
        _mm512_store_ps(lsum[h], _mm512_add_ps(pg, _mm512_load_ps(lsum[h])));
        if constexpr (kv_token_scaled(T)) pg = _mm512_mul_ps(pg, vscale);
        _mm512_store_ps(p[h], pg);
      }
      // acc += p V: each V row chunk is loaded (and converted) once for a block of query heads, whose
      // accumulators stay in registers (up to 6 heads x 4 vectors + 4 V vectors of 32 zmm).
      for (int64_t j0 = 0; j0 < nd; j0 += 4) {
        const int jn = static_cast<int>(nd - j0 < 4 ? nd - j0 : 4);
        const bool last_masked = j0 + jn == nd && hd % 16 != 0;
        for (int64_t g0 = 0; g0 < G; g0 += 6) {
          const int gn = static_cast<int>(G - g0 < 6 ? G - g0 : 6);
          kPv<L>[gn - 1][jn - 1](vt + j0 * 16 * eb, hd * eb, n, p + h0 + g0, acc + (h0 + g0) * hp + j0 * 16, hp,
                                 last_masked, tail, pf);
        }
      }
    }
  }
  for (int64_t g = 0; g < HQ; ++g) {
    const float l = _mm512_reduce_add_ps(_mm512_load_ps(lsum[g]));
    const __m512 inv = _mm512_set1_ps(a.sinks ? sink_norm(m[g], l, a.sinks[g]) : 1.0f / l);
    for (int64_t j = 0; j < nd; ++j) {
      const __m512 o = _mm512_mul_ps(inv, _mm512_load_ps(acc + g * hp + j * 16));
      if (j == nd - 1) _mm512_mask_storeu_ps(a.out + g * hd + j * 16, tail, o);
      else _mm512_storeu_ps(a.out + g * hd + j * 16, o);
    }
  }
}

bool covers(const AttnArgs& a) {
  // (acc: the run's query heads x head_dim rounded to 16; a Q4 block's F32 tiles: 256 x 16)
  return a.block_size == 16 && a.head_dim >= 1 && a.head_dim <= 512 && a.group >= 1 && a.n_kv >= 1 &&
         a.group * a.n_kv <= attn_max_heads(a.head_dim) &&
         (a.kv_type != kKvQ4 || (a.head_dim % 8 == 0 && a.head_dim <= 256));  // dequant_q4_kv_tiles: 8 at a time
}

}  // namespace

void add_attention_avx512(KernelTable& t) {
  t.attention_covers = covers;
  for_each_kind<kKvF32, kKvF16, kKvBF16, kKvI8, kKvQ4, kKvF8E4M3, kKvF8E5M2>(
      [&](auto k) { t.attention[k.value] = attn<decltype(k)::value>; });
}

}  // namespace tmill::kern
