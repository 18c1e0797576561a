// The AMX tile operations the *_amx.cpp kernels use: the compiler's intrinsics, or, where TM_AMX_SOFT
// is defined, a software model of the tile registers written from Intel's pseudocode (the SDM's
// LDTILECFG, TILELOADD, TILESTORED, TILEZERO, TDPBSUD and TILERELEASE). The model lets a CPU without
// AMX run the kernels' own code (tests/unit/kernels/amx_model_avx512.cpp compiles qgemm_legacy_amx.cpp
// against it), so their tile shapes, strides and operand order are tested on every AVX-512 machine;
// the AMX hardware itself is tested where it exists (matmul_test's AmxTilesGiveTheAvx512Bits).
//
// The intrinsics paste the tile numbers into the instruction's text: pass literal numbers.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#if defined(TM_AMX_SOFT)
namespace tmill::kern::amx_soft {

struct Tiles {
  uint16_t colsb[8];
  uint8_t rows[8];
  alignas(64) uint8_t data[8][16][64];
};
inline thread_local Tiles g_tiles{};

// The 64-byte configuration: palette, start row, 14 reserved bytes, colsb[16] (u16), rows[16].
inline void loadconfig(const void* cfg) {
  const auto* c = static_cast<const uint8_t*>(cfg);
  g_tiles = Tiles{};
  for (int t = 0; t < 8; ++t) {
    std::memcpy(&g_tiles.colsb[t], c + 16 + 2 * t, 2);
    g_tiles.rows[t] = c[48 + t];
  }
}
inline void loadd(int t, const void* base, int64_t stride) {
  std::memset(g_tiles.data[t], 0, sizeof g_tiles.data[t]);
  for (int r = 0; r < g_tiles.rows[t]; ++r)
    std::memcpy(g_tiles.data[t][r], static_cast<const uint8_t*>(base) + r * stride, g_tiles.colsb[t]);
}
inline void stored(int t, void* base, int64_t stride) {
  for (int r = 0; r < g_tiles.rows[t]; ++r)
    std::memcpy(static_cast<uint8_t*>(base) + r * stride, g_tiles.data[t][r], g_tiles.colsb[t]);
}
inline void zero(int t) { std::memset(g_tiles.data[t], 0, sizeof g_tiles.data[t]); }
// dst.row[m].dword[n] += sum over k < a.colsb / 4 and i < 4 of s8(a.row[m].byte[4k + i]) *
// u8(b.row[k].byte[4n + i]), for m < dst.rows, n < dst.colsb / 4 (32-bit wrap-around).
inline void dpbsud(int dst, int a, int b) {
  for (int m = 0; m < g_tiles.rows[dst]; ++m)
    for (int n = 0; n < g_tiles.colsb[dst] / 4; ++n) {
      int32_t acc;
      std::memcpy(&acc, g_tiles.data[dst][m] + 4 * n, 4);
      for (int k = 0; k < g_tiles.colsb[a] / 4; ++k)
        for (int i = 0; i < 4; ++i)
          acc += static_cast<int32_t>(static_cast<int8_t>(g_tiles.data[a][m][4 * k + i])) *
                 static_cast<int32_t>(g_tiles.data[b][k][4 * n + i]);
      std::memcpy(g_tiles.data[dst][m] + 4 * n, &acc, 4);
    }
}
inline void release() { g_tiles = Tiles{}; }

}  // namespace tmill::kern::amx_soft

#undef _tile_loadconfig
#undef _tile_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbsud
#undef _tile_release
#define _tile_loadconfig(cfg) ::tmill::kern::amx_soft::loadconfig(cfg)
#define _tile_loadd(t, base, stride) ::tmill::kern::amx_soft::loadd(t, base, stride)
#define _tile_stored(t, base, stride) ::tmill::kern::amx_soft::stored(t, base, stride)
#define _tile_zero(t) ::tmill::kern::amx_soft::zero(t)
#define _tile_dpbsud(dst, a, b) ::tmill::kern::amx_soft::dpbsud(dst, a, b)
#define _tile_release() ::tmill::kern::amx_soft::release()
#endif
