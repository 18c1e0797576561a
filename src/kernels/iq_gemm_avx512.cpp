// AVX-512 VNNI GEMM for the lattice i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) on
// row-major weights, bitwise the scalar kernel's results (kernels/iq_gemm_scalar.cpp).
//
// The AVX2 kernel decodes a row's super-block for every tile of 8 tokens and reduces each token's
// sum horizontally; here a group of 16 rows (one per int32 lane) is decoded once per call for all
// the task's tiles (build_direct, shared with AVX2) into an x16 layout like the packed K-quants':
// unsigned levels u = w + 64 (w the signed integer level, |w| <= 62), 16 rows x 4 columns per
// vector, the multipliers of each row's 16-column groups as int32 lanes, d as float lanes. Each
// token then takes, per 16-column group j, 4 x vpdpbusd of u against its activation bytes with the
// accumulator preloaded with -64 * sum(x of group j) (twice the Q8K record's bias16), times the
// group's multipliers (vpmulld): sum_j m_j * (integer dot of group j), the scalar kernel's integer.
// Per super-block y += (d * dx) * float(isum) in the scalar kernel's order and roundings (no FMA).
#include "kernels/isa_avx512.h"
#include "kernels/iq_direct_avx2.h"
#include "kernels/kernel_table.h"

#include <cstdlib>

namespace tmill::kern {
namespace {

constexpr int kOffset = 64;  // u = w + kOffset fits a byte for every type (|w| <= 62)
// One decoded super-block of a 16-row group: 64 level vectors (sub-block ib, 4-column chunk c), 16
// multiplier vectors (16-column group j), the d vector.
constexpr size_t kLevelBytes = 64 * 64, kMultOff = kLevelBytes, kDOff = kMultOff + 16 * 64;
constexpr size_t kSbBytes = kDOff + 64;

// This thread's buffer for one decoded row group, freed when the thread ends (no STL in ISA files:
// see isa_avx2.h).
struct GroupBuffer {
  uint8_t* p = nullptr;
  size_t cap = 0;
  ~GroupBuffer() { std::free(p); }
};
uint8_t* group_buffer(size_t bytes) {
  thread_local GroupBuffer buf;
  if (bytes > buf.cap) {
    std::free(buf.p);
    buf.cap = (bytes + 4095) / 4096 * 4096;
    buf.p = static_cast<uint8_t*>(std::aligned_alloc(64, buf.cap));
  }
  return buf.p;
}

// Rows r .. r + n_rows - 1 (n_rows <= 16; the other lanes get zeros) of all nb super-blocks.
template <int K>
void decode_group(const uint8_t* w, size_t row_bytes, int64_t nb, int64_t r, int n_rows, uint8_t* out) {
  alignas(64) uint8_t rowmajor[8][16][32];  // [sub-block][row][32 levels]
  alignas(64) int32_t mult[16][16];         // [16-column group][row]
  alignas(64) float dv[16];
  const __m256i off = _mm256_set1_epi8(kOffset);
  const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32(8));  // row i's dword 0 of a sub-block
  std::memset(rowmajor, 0, sizeof(rowmajor));
  std::memset(mult, 0, sizeof(mult));
  std::memset(dv, 0, sizeof(dv));
  for (int64_t b = 0; b < nb; ++b) {
    for (int i = 0; i < n_rows; ++i) {
      const uint8_t* blk = w + static_cast<size_t>(r + i) * row_bytes + static_cast<size_t>(b) * kIqBlockBytes[K];
      __m256i aw[8], sw[8], sc[8];
      int m[16];
      dv[i] = fp16_to_fp32(build_direct<K>(blk, aw, sw, sc, m));
      TM_UNROLL
      for (int ib = 0; ib < 8; ++ib) {
        // IQ1: sw is the signed level itself; IQ2/IQ3: |w| with the sign of sw (+-1)
        const __m256i wv = (K == kIqIQ1_S || K == kIqIQ1_M) ? sw[ib] : _mm256_sign_epi8(aw[ib], sw[ib]);
        _mm256_store_si256(reinterpret_cast<__m256i*>(rowmajor[ib][i]), _mm256_add_epi8(wv, off));
      }
      for (int j = 0; j < 16; ++j) mult[j][i] = m[j];
    }
    uint8_t* sb = out + static_cast<size_t>(b) * kSbBytes;
    TM_UNROLL
    for (int ib = 0; ib < 8; ++ib)
      TM_UNROLL
      for (int c = 0; c < 8; ++c)  // chunk c of every row: the 16 rows' dwords c, one per lane
        _mm512_store_si512(sb + (ib * 8 + c) * 64,
                           _mm512_i32gather_epi32(_mm512_add_epi32(idx, _mm512_set1_epi32(c)), rowmajor[ib], 4));
    TM_UNROLL
    for (int j = 0; j < 16; ++j) _mm512_store_si512(sb + kMultOff + j * 64, _mm512_load_si512(mult[j]));
    _mm512_store_ps(sb + kDOff, _mm512_load_ps(dv));
  }
}

// 4 chunks of one 16-column group: acc + sum_c u_c . x[4c..4c+3] per lane.
TM_ISA_INLINE __m512i dot4(__m512i acc, const uint8_t* u, const uint8_t* x) {
  TM_UNROLL
  for (int c = 0; c < 4; ++c)
    acc = _mm512_dpbusd_epi32(acc, _mm512_load_si512(u + 64 * c), bcast32x16(x + 4 * c));
  return acc;
}

// Tokens t0 .. t0 + U - 1 of a tile of T over a decoded group (nb super-blocks).
template <int K, int U>
void group_tile(const uint8_t* dec, int64_t nb, const uint8_t* act, int T, int t0, float* y, int64_t ldy, int64_t r,
                __mmask16 mask) {
  __m512 acc[U];
  TM_UNROLL
  for (int u = 0; u < U; ++u) acc[u] = _mm512_setzero_ps();
  const uint8_t* rec = act;
  for (int64_t b = 0; b < nb; ++b, rec += T * kQ8KRecordBytes) {
    const uint8_t* sb = dec + static_cast<size_t>(b) * kSbBytes;
    __m512i isum[U];
    TM_UNROLL
    for (int u = 0; u < U; ++u) isum[u] = _mm512_setzero_si512();
    TM_UNROLL
    for (int j = 0; j < 16; ++j) {  // 16-column group j: sub-block j / 2, chunks 4 (j % 2) ..
      const uint8_t* uj = sb + ((j / 2) * 8 + 4 * (j % 2)) * 64;
      const __m512i m = _mm512_load_si512(sb + kMultOff + j * 64);
      TM_UNROLL
      for (int u = 0; u < U; ++u) {
        const int t = t0 + u;
        const __m512i bias = bcast32x16(rec + T * 276 + 4 * (16 * t + j));  // -32 * sum of the group's x
        const __m512i a = dot4(_mm512_add_epi32(bias, bias), uj, rec + 256 * t + 16 * j);
        isum[u] = _mm512_add_epi32(isum[u], _mm512_mullo_epi32(a, m));
      }
    }
    const __m512 d = _mm512_load_ps(sb + kDOff);
    TM_UNROLL
    for (int u = 0; u < U; ++u) {
      float dx;
      std::memcpy(&dx, rec + T * 256 + 4 * (t0 + u), 4);
      const __m512 p = rounded(_mm512_mul_ps(d, _mm512_set1_ps(dx)));
      acc[u] = _mm512_add_ps(acc[u], rounded(_mm512_mul_ps(p, _mm512_cvtepi32_ps(isum[u]))));
    }
  }
  TM_UNROLL
  for (int u = 0; u < U; ++u)
    _mm512_mask_storeu_ps(y + (t0 + u) * ldy + r, mask, _mm512_mul_ps(_mm512_set1_ps(kIqFactor[K]), acc[u]));
}

// Below this many tokens decoding a group into the x16 layout costs more than it saves: the row
// kernel the table had before (AVX2's, same bits) runs instead. BM_Gemm IQ2_XXS 896x4864, 2 threads:
// 1 token 215 us (row kernel) vs 360 (x16), 16 tokens 956 vs 560, 512 tokens 31.0 vs 8.6 ms; the
// costs cross near 5 tokens.
constexpr int64_t kMinTokens = 6;
IqGemmFn g_row_kernel[kIqGemmKinds];

template <int K>
void iq_gemm(const uint8_t* w, size_t row_bytes, int64_t nb, int64_t r0, int64_t r1, const uint8_t* act,
             size_t tile_bytes, int64_t n, float* y, int64_t ldy) {
  if (n < kMinTokens && g_row_kernel[K]) {
    g_row_kernel[K](w, row_bytes, nb, r0, r1, act, tile_bytes, n, y, ldy);
    return;
  }
  uint8_t* dec = group_buffer(static_cast<size_t>(nb) * kSbBytes);
  for (int64_t r = r0; r < r1; r += kRows) {
    const int n_rows = static_cast<int>(r1 - r < kRows ? r1 - r : kRows);
    decode_group<K>(w, row_bytes, nb, r, n_rows, dec);
    const __mmask16 mask = tail_mask16(n_rows);
    for (int64_t i = 0; i * kTile < n; ++i) {
      const int T = static_cast<int>(n - i * kTile < kTile ? n - i * kTile : kTile);
      const uint8_t* a = act + static_cast<size_t>(i) * tile_bytes;
      float* yi = y + i * kTile * ldy;
      for_each_tile<kTile>(T, [&](auto u, int64_t t) {
        group_tile<K, decltype(u)::value>(dec, nb, a, T, static_cast<int>(t), yi, ldy, r, mask);
      });
    }
  }
}

}  // namespace

void add_iq_gemm_avx512(KernelTable& t) {
  g_iq_fast_pdep = true;
  for (int k = 0; k < kIqGemmKinds; ++k) g_row_kernel[k] = t.iq_gemm[k];  // AVX2's, registered before
  for_each_kind<kIqIQ2_XXS, kIqIQ2_XS, kIqIQ2_S, kIqIQ3_XXS, kIqIQ3_S, kIqIQ1_S, kIqIQ1_M>(
      [&](auto k) { t.iq_gemm[k.value] = iq_gemm<decltype(k)::value>; });
}

}  // namespace tmill::kern
