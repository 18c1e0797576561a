// AMX-INT8 kernels for the 32-element block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) on the interleaved
// x16 layouts (kernels/kernel_abi.h), for tiles of kMinTokens or more tokens; smaller tiles keep the
// AVX-512 kernel this level inherits.
//
// Per group-block (16 rows x 32 columns) the 8 unpacked chunk vectors (unpack_legacy) are stored as
// they are as the B tile: 8 rows of 64 bytes, elements 4c..4c+3 of each of the 16 rows, which is the
// layout AMX multiplies. The T token rows of the activation record (32 signed bytes each, 32 bytes
// apart) load as the A tile, and one TDPBSUD gives the T x 16 int32 dot products that the AVX-512
// kernel builds with 8 vpdpbusd per token. From there on the arithmetic is the AVX-512 kernel's to
// the bit: the exact integer dot plus the record's bias, converted, times the token's scale, then
// fused-multiply-added with the 16 row scales into the token's accumulator, block after block in the
// same order. So a token's result depends neither on the kernel nor on the batch it runs in
// (tests/unit/kernels/matmul_test.cpp compares the levels bit for bit, on AMX hardware and, on any
// AVX-512 CPU, through kernels/amx_tiles.h's software model of the tiles).
//
// What it saves is the per-token vector work (12 operations per token and block instead of 4), which
// is what bounds the AVX-512 kernel once a block is shared by several tokens: batched decode,
// mixture-of-experts products and prompts.
#include "kernels/amx_tiles.h"
#include "kernels/isa_avx512.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

constexpr int kMinTokens = 2;         // one token: the AVX-512 kernel (a tile's set-up costs more there)

// The AVX-512 kernels this level inherits, for tiles below kMinTokens (set at registration, before
// any call; the tables are built once).
QGemmFn g_avx512[kPackKinds];

// Tile registers: 0 the weights (B), then per activation tile h: 1 + 2h its tokens (A), 2 + 2h the
// products (C).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

template <int T, int NT>
inline void configure_tiles() {
  TileConfig c;
  c.rows[0] = 8;
  c.colsb[0] = 64;
  for (int h = 0; h < NT; ++h) {
    c.rows[1 + 2 * h] = T;
    c.colsb[1 + 2 * h] = 32;
    c.rows[2 + 2 * h] = T;
    c.colsb[2 + 2 * h] = 64;
  }
  _tile_loadconfig(&c);
}

// The products of activation tile H (records at rec) with the weights in tile 0, stored at out. The
// tile numbers are spelled out: the intrinsics paste them into the instruction's text.
template <int H>
inline void tile_products(const uint8_t* rec, int32_t* out) {
  if constexpr (H == 0) {
    _tile_loadd(1, rec, 32);
    _tile_zero(2);
    _tile_dpbsud(2, 1, 0);
    _tile_stored(2, out, 64);
  } else {
    static_assert(H == 1);
    _tile_loadd(3, rec, 32);
    _tile_zero(4);
    _tile_dpbsud(4, 3, 0);
    _tile_stored(4, out, 64);
  }
}

// NT activation tiles of T tokens each (tile h's records at act[h]) in one pass over the weights; y
// rows are tokens h * T + t (as gemm_tiles in qgemm_legacy_avx512.cpp).
template <int Kind, int T, int NT>
void gemm_tiles(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* const* act, float* y,
                int64_t ldy, int64_t rows) {
  constexpr int64_t BB = kGroupBlockBytes[Kind];
  constexpr bool kMin = Kind == kPackQ4_1 || Kind == kPackQ5_1;
  configure_tiles<T, NT>();
  alignas(64) uint8_t wt[8 * 64];
  alignas(64) int32_t dots[NT][T * 16];
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* gb = w + g * nb * BB;
    const uint8_t* rec[NT];
    TM_UNROLL
    for (int h = 0; h < NT; ++h) rec[h] = act[h];
    __m512 acc[NT * T];
    TM_UNROLL
    for (int t = 0; t < NT * T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, gb += BB) {
      prefetch_weights<BB>(gb, kWeightPrefetchBytes);
      if constexpr (Kind == kPackQ8_0) {
        _tile_loadd(0, gb + kLegacyLayout[Kind].q, 64);  // the stored levels are the B tile as they are
      } else {
        __m512i q[8];
        unpack_legacy<Kind>(gb, q);
        TM_UNROLL
        for (int c = 0; c < 8; ++c) _mm512_store_si512(wt + 64 * c, q[c]);
        _tile_loadd(0, wt, 64);
      }
      tile_products<0>(rec[0], dots[0]);
      if constexpr (NT == 2) tile_products<1>(rec[1], dots[1]);
      const __m512 dw = load_f16x16(gb);
      __m512 mw = _mm512_setzero_ps();
      if constexpr (kMin) mw = load_f16x16(gb + kLegacyLayout[Kind].m);
      TM_UNROLL
      for (int h = 0; h < NT; ++h) {
        const float* dx = reinterpret_cast<const float*>(rec[h] + T * 32);
        const int32_t* bx = reinterpret_cast<const int32_t*>(rec[h] + T * 36);
        TM_UNROLL
        for (int t = 0; t < T; ++t) {
          __m512i d = _mm512_load_si512(dots[h] + 16 * t);
          if constexpr (!kMin) d = _mm512_add_epi32(_mm512_set1_epi32(bx[t]), d);
          add_legacy_block<kMin>(acc[h * T + t], d, dx[t], bx[t], dw, mw);
        }
        rec[h] += T * kQ8RecordBytes;
      }
    }
    const __mmask16 mask = group_mask(g, rows);
    TM_UNROLL
    for (int t = 0; t < NT * T; ++t) _mm512_mask_storeu_ps(y + t * ldy + g * kRows, mask, acc[t]);
  }
  _tile_release();  // the thread's tile state back to init: context switches need not save it
}

template <int Kind>
void entry(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act, int T, float* y, int64_t ldy,
           int64_t rows) {
  if (T < kMinTokens) return g_avx512[Kind](w, nb, g0, g1, act, T, y, ldy, rows);
  with_count<kTile>(T, [&](auto k) {
    if constexpr (decltype(k)::value >= kMinTokens)
      gemm_tiles<Kind, decltype(k)::value, 1>(w, nb, g0, g1, &act, y, ldy, rows);
  });
}

template <int Kind>
void gemm2(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act0, const uint8_t* act1,
           float* y, int64_t ldy, int64_t rows) {
  const uint8_t* act[2] = {act0, act1};
  gemm_tiles<Kind, kTile, 2>(w, nb, g0, g1, act, y, ldy, rows);
}

}  // namespace

void add_qgemm_legacy_amx(KernelTable& t) {
  for_each_kind<kPackQ8_0, kPackQ4_0, kPackQ4_1, kPackQ5_0, kPackQ5_1>([&](auto k) {
    g_avx512[k.value] = t.qgemm[k.value];
    t.qgemm[k.value] = entry<decltype(k)::value>;
    t.qgemm2[k.value] = gemm2<decltype(k)::value>;
  });
}

}  // namespace tmill::kern
