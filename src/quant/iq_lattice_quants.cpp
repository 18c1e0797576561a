// The lattice i-quant quantizers IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S: the searches of ggml's
// quantize_iq2_xxs / _xs / _s and quantize_iq3_xxs / _s (the functions llama-quantize calls), so that
// our bytes are llama.cpp's (tests/unit/quant/iq_lattice_quant_test.cpp), and the search tables they
// share with the IQ1 quantizers (iq1_quants.cpp). IQ1_S / IQ1_M are in iq1_quants.cpp.
//
// Per block (16 or 32 elements) of a 256-element super-block:
//   weights w = importance * sqrt(sigma2 + x^2) (sigma2 the super-block's mean square, doubled for all
//   but IQ2_XXS / IQ2_XS), or x^2 (IQ3; 0.25 sigma2 + x^2 for IQ2_S) without importance;
//   signs are split off (IQ2_XXS, IQ2_XS, IQ3_XXS store 7 bits per 8 elements and an even number of
//   minus signs, so an odd group flips its least important element);
//   the magnitudes are matched to grid points (groups of 8 or 4 coordinates 2l+1) for a sweep of
//   scales, points off the grid replaced by the nearest listed neighbour, and the weighted
//   least-squares scale of the best sweep kept (then re-projected and refitted, as ggml does);
// the block scales are stored as 4-bit odd multiples of max_scale / 31 (times a per-type fudge factor).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <mutex>

#include "core/fp16.h"
#include "core/log.h"
#include "quant/blocks.h"
#include "quant/iq_grids.h"
#include "quant/iq_lattice.h"
#include "quant/kquants.h"
#include "quant/scale_search.h"

namespace tmill::kquant {
namespace {
using qsearch::nearest_int;

// ---------------------------------------------------------------------------------------------
// Tables

// Coordinate of one grid byte: its rank among the magnitudes a grid uses.
int coordinate(LatticeId id, uint8_t b) {
  switch (id) {
    case kLatIQ1S: return static_cast<int8_t>(b) + 1;  // levels -1, 0, 1
    case kLatIQ3S: return (b - 1) / 2;                 // 1, 3, ..., 15
    case kLatIQ3XXS: {
      static constexpr uint8_t kMags[8] = {4, 12, 20, 28, 36, 44, 52, 62};
      return static_cast<int>(std::find(kMags, kMags + 8, b) - kMags);
    }
    default: return b == 8 ? 0 : b == 25 ? 1 : 2;  // IQ2 grids: 8, 25, 43
  }
}

void build(LatticeId id, Lattice& lat) {
  int size = 0, nwant = 0;
  const uint64_t* g64 = nullptr;
  const uint32_t* g32 = nullptr;
  switch (id) {
    case kLatIQ2XXS: size = 256, nwant = 2, g64 = kIq2xxsGrid; break;
    case kLatIQ2XS: size = 512, nwant = 2, g64 = kIq2xsGrid; break;
    case kLatIQ2S: size = 1024, nwant = 1, g64 = kIq2sGrid; break;
    case kLatIQ1S: size = 2048, nwant = 3, g64 = kIq1sGrid; break;
    case kLatIQ3XXS: size = 256, nwant = 2, g32 = kIq3xxsGrid; break;
    default: size = 512, nwant = 3, g32 = kIq3sGrid; break;
  }
  lat.group = g64 ? 8 : 4;
  lat.bits = g64 ? 2 : 3;
  const int g = lat.group, bits = lat.bits;
  lat.level.resize(static_cast<size_t>(size * g));
  for (int j = 0; j < size; ++j)
    for (int i = 0; i < g; ++i) {
      const uint8_t b = static_cast<uint8_t>((g64 ? g64[j] >> (8 * i) : g32[j] >> (8 * i)) & 255);
      lat.level[static_cast<size_t>(g * j + i)] = static_cast<uint8_t>(coordinate(id, b));
    }
  lat.map.assign(size_t{1} << (bits * g), INT32_MIN);
  for (int j = 0; j < size; ++j) {
    uint32_t u = 0;
    for (int i = 0; i < g; ++i) u |= static_cast<uint32_t>(lat.point(j)[i]) << (bits * i);
    lat.map[u] = j;
  }
  // Neighbour lists of the points the quantizers can produce (coordinates 0..2 on the 2-bit
  // lattices, 0..7 on the 3-bit ones): the grid points at the nwant smallest distances, by distance
  // then index (ggml sorts (distance, index) pairs; distances are integers, so we bucket them).
  const int maxl = bits == 2 ? 2 : 7;
  std::vector<int> d2(static_cast<size_t>(size));
  for (uint32_t u = 0; u < lat.map.size(); ++u) {
    if (lat.map[u] >= 0) continue;
    int c[8];
    bool reachable = true;
    for (int i = 0; i < g; ++i) {
      c[i] = static_cast<int>((u >> (bits * i)) & ((1u << bits) - 1));
      reachable = reachable && c[i] <= maxl;
    }
    if (!reachable) continue;
    int counts[8 * 49 + 1] = {};
    for (int j = 0; j < size; ++j) {
      const uint8_t* p = lat.point(j);
      int s = 0;
      for (int i = 0; i < g; ++i) s += (p[i] - c[i]) * (p[i] - c[i]);
      d2[static_cast<size_t>(j)] = s;
      ++counts[s];
    }
    lat.map[u] = -static_cast<int32_t>(lat.lists.size()) - 1;
    const size_t head = lat.lists.size();
    lat.lists.push_back(0);
    int have = 0;
    for (int s = 0; s <= 8 * 49 && have < nwant; ++s) {
      if (!counts[s]) continue;
      ++have;
      for (int j = 0; j < size; ++j)
        if (d2[static_cast<size_t>(j)] == s) lat.lists.push_back(static_cast<uint16_t>(j));
    }
    lat.lists[head] = static_cast<uint16_t>(lat.lists.size() - head - 1);
  }
}

// ---------------------------------------------------------------------------------------------
// The block search shared by IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S

enum class Start { kQp, kMax };                          // initial scale: make_qp_quants, or max / (2 kMaxQ - 1)
enum class Redo { kAlways, kOffGridOnly, kAllIfOffGrid };  // re-projection after the sweep

struct Spec {
  LatticeId lat;
  int n;        // block size
  int kmaxq;    // coordinates 0 .. kmaxq - 1
  int nsteps;   // sweep is = -nsteps .. nsteps
  float step;   // id = (2 kMaxQ - 1 + is * step) / max
  float eps;    // blocks with max below this are zero
  bool parity;  // 7-bit sign groups (even number of minus signs)
  Start start;
  Redo redo;
  bool on_grid_init;
};

constexpr Spec kIq2xxs{kLatIQ2XXS, 32, 3, 6, 0.1f, 1e-15f, true, Start::kQp, Redo::kAlways, true};
constexpr Spec kIq2xs{kLatIQ2XS, 16, 3, 9, 0.1f, 1e-15f, true, Start::kMax, Redo::kOffGridOnly, true};
constexpr Spec kIq2s{kLatIQ2S, 16, 3, 9, 0.1f, 1e-8f, false, Start::kMax, Redo::kOffGridOnly, true};
constexpr Spec kIq3xxs{kLatIQ3XXS, 32, 8, 15, 0.2f, 1e-8f, true, Start::kMax, Redo::kOffGridOnly, true};
// (ggml tests IQ3_S blocks with !max, i.e. max == 0: the smallest positive float as eps.)
constexpr Spec kIq3s{kLatIQ3S, 32, 8, 9, 0.2f, FLT_TRUE_MIN, false, Start::kMax, Redo::kAllIfOffGrid, false};

struct BlockFit {
  bool zero = true;
  float scale = 0;
  uint16_t index[8] = {};  // grid index per group of `group` elements
  uint8_t signs[4] = {};   // per 8 elements
};

// Magnitudes xval (>= 0 except the parity flip) and sign bytes of a block.
void fold_signs(bool parity, const float* xb, const float* w, int n, float* xval, uint8_t* signs) {
  for (int k = 0; k < n / 8; ++k) {
    int nflip = 0;
    uint8_t s = 0;
    for (int i = 0; i < 8; ++i) {
      const float v = xb[8 * k + i];
      xval[8 * k + i] = v >= 0 ? v : -v;
      if (v < 0) ++nflip, s = static_cast<uint8_t>(s | (1 << i));
    }
    if (parity && nflip % 2) {
      int imin = 0;
      float min = w[8 * k] * xb[8 * k] * xb[8 * k];
      for (int i = 1; i < 8; ++i) {
        const float a = w[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
        if (a < min) min = a, imin = i;
      }
      xval[8 * k + imin] = -xval[8 * k + imin];
      s = static_cast<uint8_t>(s ^ (1 << imin));
    }
    signs[k] = parity ? static_cast<uint8_t>(s & 127) : s;
  }
}

// Rounds one group to lattice coordinates for inverse scale id; off the grid, the best neighbour for
// `scale`. L receives the grid point's coordinates; returns whether the rounding was on the grid.
bool project(const Lattice& lat, int kmaxq, const float* x, const float* waux, float id, float scale, int8_t* L) {
  uint32_t u = 0;
  for (int i = 0; i < lat.group; ++i) {
    const int l = std::clamp(nearest_int(0.5f * (id * x[i] - 1)), 0, kmaxq - 1);
    L[i] = static_cast<int8_t>(l);
    u |= static_cast<uint32_t>(l) << (lat.bits * i);
  }
  if (lat.map[u] >= 0) return true;
  nearest_neighbour(lat, lat.neighbours(u), x, waux, scale, L);
  return false;
}

void refit(int n, const float* w, const float* xval, const int8_t* L, float& sumqx, float& sumq2) {
  sumqx = sumq2 = 0;
  for (int i = 0; i < n; ++i) {
    const float q = static_cast<float>(2 * L[i] + 1);
    sumqx += w[i] * xval[i] * q;
    sumq2 += w[i] * q * q;
  }
}

void fit_block(const Spec& sp, const float* xb, const float* weight, BlockFit& f) {
  const Lattice& lat = lattice(sp.lat);
  const int n = sp.n, g = lat.group, ng = n / g;
  float xval[32], waux[32];
  int8_t L[32] = {}, Laux[32];
  bool on[8], on_aux[8];
  for (int i = 0; i < n; ++i) waux[i] = std::sqrt(weight[i]);
  f = BlockFit{};
  f.zero = false;
  fold_signs(sp.parity, xb, weight, n, xval, f.signs);
  float max = xval[0];
  for (int i = 1; i < n; ++i) max = std::max(max, xval[i]);
  if (max < sp.eps) {
    f = BlockFit{};
    return;
  }
  float scale, top = max;
  if (sp.start == Start::kQp) {
    uint8_t Lq[32];
    scale = qsearch::make_qp_quants(n, sp.kmaxq + 1, xval, Lq, weight);
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(Lq[i]);
    top = scale * static_cast<float>(sp.kmaxq);
    if (top <= 0) {
      f = BlockFit{};
      return;
    }
  } else {
    scale = max / static_cast<float>(2 * sp.kmaxq - 1);
  }
  std::fill(on, on + ng, sp.on_grid_init);
  float best = 0;
  for (int is = -sp.nsteps; is <= sp.nsteps; ++is) {
    const float id = (static_cast<float>(2 * sp.kmaxq - 1) + static_cast<float>(is) * sp.step) / top;
    const float this_scale = 1 / id;
    for (int k = 0; k < ng; ++k)
      on_aux[k] = project(lat, sp.kmaxq, xval + g * k, waux + g * k, id, this_scale, Laux + g * k);
    float sumqx, sumq2;
    refit(n, weight, xval, Laux, sumqx, sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::copy(Laux, Laux + n, L);
      std::copy(on_aux, on_aux + ng, on);
    }
  }
  const bool any_off = std::count(on, on + ng, false) > 0;
  if (scale > 0 && (sp.redo == Redo::kAlways || any_off)) {
    const float id = 1 / scale;
    for (int k = 0; k < ng; ++k) {
      if (sp.redo == Redo::kOffGridOnly && on[k]) continue;
      project(lat, sp.kmaxq, xval + g * k, waux + g * k, id, scale, L + g * k);
    }
    float sumqx, sumq2;
    refit(n, weight, xval, L, sumqx, sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  if (scale < 0) {  // never seen; ggml flips the scale and the signs
    scale = -scale;
    for (int k = 0; k < n / 8; ++k) f.signs[k] = static_cast<uint8_t>(sp.parity ? ~f.signs[k] & 127 : ~f.signs[k]);
  }
  for (int k = 0; k < ng; ++k) {
    uint32_t u = 0;
    for (int i = 0; i < g; ++i) u |= static_cast<uint32_t>(L[g * k + i]) << (lat.bits * i);
    TM_ASSERT(lat.map[u] >= 0, "i-quant search left a point off the grid");
    f.index[k] = static_cast<uint16_t>(lat.map[u]);
  }
  f.scale = scale;
}

// The block weights of block ib (size n) of the super-block xbl.
void block_weights(const float* xbl, const float* qw, int ib, int n, float sigma2, bool iq2s, float* w) {
  const float* xb = xbl + n * ib;
  for (int i = 0; i < n; ++i) {
    if (qw) w[i] = qw[n * ib + i] * std::sqrt(sigma2 + xb[i] * xb[i]);
    else w[i] = iq2s ? 0.25f * sigma2 + xb[i] * xb[i] : xb[i] * xb[i];
  }
}

float sum_squares(const float* x) {
  float s = 0;
  for (int i = 0; i < QK_K; ++i) s += x[i] * x[i];
  return s;
}

// 4-bit scale code of a block scale (odd multiples of d).
int scale_code(float id, float s) { return std::clamp(nearest_int(0.5f * (id * s - 1)), 0, 15); }

// n scales as 4-bit codes, two per byte (even index in the low nibble), into out[n / 2].
void pack_scale_nibbles(float id, const float* scales, int n, uint8_t* out) {
  for (int i = 0; i < n; i += 2)
    out[i / 2] = static_cast<uint8_t>(scale_code(id, scales[i]) | (scale_code(id, scales[i + 1]) << 4));
}

}  // namespace

const Lattice& lattice(LatticeId id) {
  static std::once_flag once[kLatCount];
  static Lattice tables[kLatCount];
  std::call_once(once[id], [id] { build(id, tables[id]); });
  return tables[id];
}

int nearest_neighbour(const Lattice& lat, const uint16_t* nb, const float* xval, const float* w, float scale,
                      int8_t* L) {
  float best_d2 = FLT_MAX;
  int best = nb[1];
  for (int j = 1; j <= nb[0]; ++j) {
    const uint8_t* p = lat.point(nb[j]);
    float d2 = 0;
    for (int i = 0; i < lat.group; ++i) {
      const float diff = scale * static_cast<float>(2 * p[i] + 1) - xval[i];
      d2 += w[i] * diff * diff;
    }
    if (d2 < best_d2) best_d2 = d2, best = nb[j];
  }
  const uint8_t* p = lat.point(best);
  for (int i = 0; i < lat.group; ++i) L[i] = static_cast<int8_t>(p[i]);
  return best;
}

void iq2_xxs_row(const float* x, BlockIQ2_XXS* y, int64_t n, const float* qw) {
  TM_ASSERT(qw, "IQ2_XXS needs an importance vector");
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    const float* xbl = x + QK_K * ibl;
    const float* qwb = qw + QK_K * ibl;
    const float sigma2 = sum_squares(xbl) / QK_K;
    uint32_t q2[16] = {};
    float scales[8], max_scale = 0, w[32];
    for (int ib = 0; ib < 8; ++ib) {
      block_weights(xbl, qwb, ib, 32, sigma2, false, w);
      BlockFit f;
      fit_block(kIq2xxs, xbl + 32 * ib, w, f);
      scales[ib] = f.scale;
      if (f.zero) continue;
      for (int k = 0; k < 4; ++k) {
        q2[2 * ib] |= static_cast<uint32_t>(f.index[k]) << (8 * k);
        q2[2 * ib + 1] |= static_cast<uint32_t>(f.signs[k]) << (7 * k);
      }
      max_scale = std::max(max_scale, f.scale);
    }
    std::memset(&y[ibl], 0, sizeof(BlockIQ2_XXS));
    if (max_scale == 0) continue;
    const float d = max_scale / 31;
    y[ibl].d = fp32_to_fp16(d);
    const float id = 1 / d;
    for (int ib = 0; ib < 8; ++ib) q2[2 * ib + 1] |= static_cast<uint32_t>(scale_code(id, scales[ib])) << 28;
    std::memcpy(y[ibl].qs, q2, sizeof(q2));
  }
}

void iq2_xs_row(const float* x, BlockIQ2_XS* y, int64_t n, const float* qw) {
  TM_ASSERT(qw, "IQ2_XS needs an importance vector");
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = sum_squares(xbl) / QK_K;
    BlockIQ2_XS& b = y[ibl];
    std::memset(&b, 0, sizeof b);
    float scales[16], max_scale = 0, w[16];
    for (int ib = 0; ib < 16; ++ib) {
      block_weights(xbl, qw + QK_K * ibl, ib, 16, sigma2, false, w);
      BlockFit f;
      fit_block(kIq2xs, xbl + 16 * ib, w, f);
      scales[ib] = f.scale;
      if (f.zero) continue;
      for (int k = 0; k < 2; ++k) b.qs[2 * ib + k] = static_cast<uint16_t>(f.index[k] | (f.signs[k] << 9));
      max_scale = std::max(max_scale, f.scale);
    }
    if (max_scale == 0) {
      std::memset(&b, 0, sizeof b);
      continue;
    }
    const float d = max_scale / 31;
    b.d = fp32_to_fp16(d);
    const float id = 1 / d;
    pack_scale_nibbles(id, scales, 16, b.scales);
  }
}

void iq2_s_row(const float* x, BlockIQ2_S* y, int64_t n, const float* qw) {
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = 2 * sum_squares(xbl) / QK_K;
    BlockIQ2_S& b = y[ibl];
    std::memset(&b, 0, sizeof b);
    float scales[16], max_scale = 0, w[16];
    for (int ib = 0; ib < 16; ++ib) {
      block_weights(xbl, qw ? qw + QK_K * ibl : nullptr, ib, 16, sigma2, true, w);
      BlockFit f;
      fit_block(kIq2s, xbl + 16 * ib, w, f);
      scales[ib] = f.scale;
      if (f.zero) continue;
      for (int k = 0; k < 2; ++k) {
        const int i8 = 2 * ib + k;
        b.qs[i8] = static_cast<uint8_t>(f.index[k] & 255);
        b.qh[i8 / 4] = static_cast<uint8_t>(b.qh[i8 / 4] | ((f.index[k] >> 8) << (2 * (i8 % 4))));
        b.qs[QK_K / 8 + i8] = f.signs[k];
      }
      max_scale = std::max(max_scale, f.scale);
    }
    if (max_scale == 0) continue;
    const float d = max_scale / 31;
    b.d = fp32_to_fp16(d * 0.9875f);
    const float id = 1 / d;
    pack_scale_nibbles(id, scales, 16, b.scales);
  }
}

void iq3_xxs_row(const float* x, BlockIQ3_XXS* y, int64_t n, const float* qw) {
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = 2 * sum_squares(xbl) / QK_K;
    uint8_t grid[64] = {};
    uint32_t scales_signs[8] = {};
    float scales[8], max_scale = 0, w[32];
    for (int ib = 0; ib < 8; ++ib) {
      block_weights(xbl, qw ? qw + QK_K * ibl : nullptr, ib, 32, sigma2, false, w);
      BlockFit f;
      fit_block(kIq3xxs, xbl + 32 * ib, w, f);
      scales[ib] = f.scale;
      if (f.zero) continue;
      for (int k = 0; k < 8; ++k) grid[8 * ib + k] = static_cast<uint8_t>(f.index[k]);
      for (int k = 0; k < 4; ++k) scales_signs[ib] |= static_cast<uint32_t>(f.signs[k]) << (7 * k);
      max_scale = std::max(max_scale, f.scale);
    }
    std::memset(&y[ibl], 0, sizeof(BlockIQ3_XXS));
    if (max_scale == 0) continue;
    const float d = max_scale / 31;
    y[ibl].d = fp32_to_fp16(d * 1.0125f);
    const float id = 1 / d;
    for (int ib = 0; ib < 8; ++ib) scales_signs[ib] |= static_cast<uint32_t>(scale_code(id, scales[ib])) << 28;
    std::memcpy(y[ibl].qs, grid, sizeof grid);
    std::memcpy(y[ibl].qs + 64, scales_signs, sizeof scales_signs);
  }
}

void iq3_s_row(const float* x, BlockIQ3_S* y, int64_t n, const float* qw) {
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = 2 * sum_squares(xbl) / QK_K;
    BlockIQ3_S& b = y[ibl];
    std::memset(&b, 0, sizeof b);
    // Block ib's grid indices and signs go to their places for block ib. (ggml de3ff81 advances its
    // write positions only past non-zero blocks, so after an all-zero block of 32 it writes the later
    // blocks' entries one block early and the super-block decodes to garbage; we do not copy that,
    // and differ from llama.cpp's bytes only in super-blocks with such a block.)
    float scales[8], max_scale = 0, w[32];
    for (int ib = 0; ib < 8; ++ib) {
      block_weights(xbl, qw ? qw + QK_K * ibl : nullptr, ib, 32, sigma2, false, w);
      BlockFit f;
      fit_block(kIq3s, xbl + 32 * ib, w, f);
      scales[ib] = f.scale;
      if (f.zero) continue;
      for (int k = 0; k < 8; ++k) {
        b.qs[8 * ib + k] = static_cast<uint8_t>(f.index[k] & 255);
        b.qh[ib] = static_cast<uint8_t>(b.qh[ib] | ((f.index[k] >> 8) << k));
      }
      for (int k = 0; k < 4; ++k) b.signs[4 * ib + k] = f.signs[k];
      max_scale = std::max(max_scale, f.scale);
    }
    if (max_scale == 0) continue;
    const float d = max_scale / 31;
    b.d = fp32_to_fp16(d * 1.033f);
    const float id = 1 / d;
    pack_scale_nibbles(id, scales, 8, b.scales);
  }
}

}  // namespace tmill::kquant
