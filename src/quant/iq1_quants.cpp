// IQ1_S / IQ1_M quantizers: the searches of ggml's quantize_iq1_s / quantize_iq1_m (the functions
// llama-quantize calls), so that our bytes are llama.cpp's (tests/unit/quant/iq_lattice_quant_test.cpp).
//
// Each block (32 elements for IQ1_S, 16 for IQ1_M) takes levels -1, 0, 1 plus a shift delta = +-1/8
// (per block for IQ1_S, per half block for IQ1_M). With three levels the weighted least-squares
// problem is solved exactly: sort the block, and for every split of the sorted values into three runs
// (levels -1 / 0 / +1) and every shift, the fit follows from prefix sums of w x and w. Groups of 8
// levels that are not a point of the 2048-point grid are replaced by the listed neighbour (lattice
// tables of quant/iq_lattice.h) with the smallest weighted error, and the scale refitted. The block
// scales are 3-bit odd multiples of max_scale / 15; IQ1_M then refits the super-block scale over all
// of its blocks. The fudge factors (1.125, 1.1125) are ggml's.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/fp16.h"
#include "core/log.h"
#include "quant/blocks.h"
#include "quant/iq_lattice.h"
#include "quant/kquants.h"
#include "quant/scale_search.h"

namespace tmill::kquant {
namespace {
using qsearch::nearest_int;

constexpr float kDelta = 0.125f;  // ggml's IQ1S_DELTA = IQ1M_DELTA
constexpr float kPlus[3] = {-1 + kDelta, kDelta, 1 + kDelta};
constexpr float kMinus[3] = {-1 - kDelta, -kDelta, 1 - kDelta};

// Grid neighbour of a group with the smallest sum w (scale * xx[l] - x)^2 (ggml's
// iq1_find_best_neighbour2); its levels go to L.
int nearest_iq1(const Lattice& lat, const uint16_t* nb, const float* xb, const float* w, float scale,
                const float* xx, int8_t* L) {
  float best_d2 = FLT_MAX;
  int best = nb[1];
  for (int j = 1; j <= nb[0]; ++j) {
    const uint8_t* p = lat.point(nb[j]);
    float d2 = 0;
    for (int i = 0; i < 8; ++i) {
      const float diff = scale * xx[p[i]] - xb[i];
      d2 += w[i] * diff * diff;
    }
    if (d2 < best_d2) best_d2 = d2, best = nb[j];
  }
  const uint8_t* p = lat.point(best);
  for (int i = 0; i < 8; ++i) L[i] = static_cast<int8_t>(p[i]);
  return best;
}

// Block element indices sorted by value (ggml's qsort there is glibc's stable merge sort).
template <int N>
void sort_by_value(const float* xb, int* order) {
  std::iota(order, order + N, 0);
  std::stable_sort(order, order + N, [xb](int a, int b) { return xb[a] < xb[b]; });
}

// Grid indices of the groups of levels L (groups of 8, shifts per group in xx[k]); groups off the
// grid take their best neighbour. Returns whether all were on the grid.
bool to_grid(const Lattice& lat, int ngroups, const float* xb, const float* w, float scale,
             const float* const* xx, int8_t* L, uint16_t* index) {
  bool all_on = true;
  for (int k = 0; k < ngroups; ++k) {
    uint32_t u = 0;
    for (int j = 0; j < 8; ++j) u |= static_cast<uint32_t>(L[8 * k + j]) << (2 * j);
    int gi = lat.map[u];
    if (gi < 0) {
      all_on = false;
      gi = nearest_iq1(lat, lat.neighbours(u), xb + 8 * k, w + 8 * k, scale, xx[k], L + 8 * k);
    }
    index[k] = static_cast<uint16_t>(gi);
  }
  return all_on;
}

// Least-squares scale of the grid groups `index` (levels xx[k][l]); ggml keeps the old scale unless
// both sums are positive.
void refit_iq1(const Lattice& lat, int ngroups, const float* xb, const float* w, const float* const* xx,
               const uint16_t* index, float& scale) {
  float sumqx = 0, sumq2 = 0;
  for (int k = 0; k < ngroups; ++k) {
    const uint8_t* p = lat.point(index[k]);
    for (int j = 0; j < 8; ++j) {
      const float q = xx[k][p[j]];
      sumqx += w[8 * k + j] * q * xb[8 * k + j];
      sumq2 += w[8 * k + j] * q * q;
    }
  }
  if (sumqx > 0 && sumq2 > 0) scale = sumqx / sumq2;
}

void assign_levels(const int* order, int n, int i1, int i2, int8_t* L) {
  for (int j = 0; j < n; ++j) L[order[j]] = static_cast<int8_t>(j < i1 ? 0 : j < i2 ? 1 : 2);
}

float sum_squares(const float* x) {
  float s = 0;
  for (int i = 0; i < QK_K; ++i) s += x[i] * x[i];
  return s;
}

}  // namespace

void iq1_s_row(const float* x, BlockIQ1_S* y, int64_t n, const float* qw) {
  TM_ASSERT(qw, "IQ1_S needs an importance vector");
  const Lattice& lat = lattice(kLatIQ1S);
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = 2 * sum_squares(xbl) / QK_K;
    BlockIQ1_S& b = y[ibl];
    std::memset(&b, 0, sizeof b);
    float scales[8], max_scale = 0;
    int shifts[8];
    for (int ib = 0; ib < 8; ++ib) {
      const float* xb = xbl + 32 * ib;
      float w[32];
      for (int i = 0; i < 32; ++i) w[i] = qw[QK_K * ibl + 32 * ib + i] * std::sqrt(sigma2 + xb[i] * xb[i]);
      float max = std::fabs(xb[0]);
      for (int i = 1; i < 32; ++i) max = std::max(max, std::fabs(xb[i]));
      scales[ib] = 0, shifts[ib] = 1;
      if (max < 1e-12f) continue;
      int order[32];
      sort_by_value<32>(xb, order);
      float sumx[33], sumw[33];
      sumx[0] = sumw[0] = 0;
      for (int j = 0; j < 32; ++j) {
        sumx[j + 1] = sumx[j] + w[order[j]] * xb[order[j]];
        sumw[j + 1] = sumw[j] + w[order[j]];
      }
      float best = -FLT_MAX, scale = max;
      int bi1 = -1, bi2 = -1, shift = 0;
      for (int i1 = 0; i1 <= 32; ++i1)
        for (int i2 = i1; i2 <= 32; ++i2)
          for (int s = 0; s < 2; ++s) {
            const float* v = s == 0 ? kPlus : kMinus;
            const float sumqx =
                (sumx[i1] - sumx[0]) * v[0] + (sumx[i2] - sumx[i1]) * v[1] + (sumx[32] - sumx[i2]) * v[2];
            const float sumq2 = (sumw[i1] - sumw[0]) * v[0] * v[0] + (sumw[i2] - sumw[i1]) * v[1] * v[1] +
                                (sumw[32] - sumw[i2]) * v[2] * v[2];
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
              scale = sumqx / sumq2;
              best = scale * sumqx;
              bi1 = i1, bi2 = i2, shift = s == 0 ? 1 : -1;
            }
          }
      if (bi1 < 0 || bi2 < 0 || shift == 0) continue;
      int8_t L[32];
      assign_levels(order, 32, bi1, bi2, L);
      if (scale < 0) {
        for (int j = 0; j < 32; ++j) L[j] = static_cast<int8_t>(2 - L[j]);
        scale = -scale, shift = -shift;
      }
      const float* v = shift == 1 ? kPlus : kMinus;
      const float* xx[4] = {v, v, v, v};
      uint16_t index[4];
      if (!to_grid(lat, 4, xb, w, scale, xx, L, index)) refit_iq1(lat, 4, xb, w, xx, index, scale);
      uint16_t h = 0;
      for (int k = 0; k < 4; ++k) {
        b.qs[4 * ib + k] = static_cast<uint8_t>(index[k] & 255);
        h = static_cast<uint16_t>(h | ((index[k] >> 8) << (3 * k)));
      }
      b.qh[ib] = h;
      scales[ib] = scale, shifts[ib] = shift;
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0) continue;
    const float d = max_scale / 15;
    b.d = fp32_to_fp16(d * 1.125f);
    const float id = 1 / d;
    for (int ib = 0; ib < 8; ++ib) {
      int l = std::clamp(nearest_int(0.5f * (id * scales[ib] - 1)), 0, 7);
      if (shifts[ib] == -1) l |= 8;
      b.qh[ib] = static_cast<uint16_t>(b.qh[ib] | (l << 12));
    }
  }
}

void iq1_m_row(const float* x, BlockIQ1_M* y, int64_t n, const float* qw) {
  const Lattice& lat = lattice(kLatIQ1S);
  static constexpr uint8_t kMasks[4] = {0x00, 0x80, 0x08, 0x88};  // shift bits of the two groups
  // Shift kind k: bit 1 = first half minus, bit 0 = second half minus.
  auto shift_of = [](int k, int half) { return (half == 0 ? k < 2 : k % 2 == 0) ? kPlus : kMinus; };
  for (int64_t ibl = 0; ibl < n / QK_K; ++ibl) {
    const float* xbl = x + QK_K * ibl;
    const float sigma2 = 2 * sum_squares(xbl) / QK_K;
    BlockIQ1_M& b = y[ibl];
    std::memset(&b, 0, sizeof b);
    auto weights = [&](int ib, float* w) {
      const float* xb = xbl + 16 * ib;
      for (int i = 0; i < 16; ++i)
        w[i] = qw ? qw[QK_K * ibl + 16 * ib + i] * std::sqrt(sigma2 + xb[i] * xb[i]) : xb[i] * xb[i];
    };
    float scales[16], max_scale = 0;
    int shifts[16];
    for (int ib = 0; ib < 16; ++ib) {
      const float* xb = xbl + 16 * ib;
      float w[16];
      weights(ib, w);
      float max = std::fabs(xb[0]);
      for (int i = 1; i < 16; ++i) max = std::max(max, std::fabs(xb[i]));
      scales[ib] = 0, shifts[ib] = 0;
      if (max < 1e-7f) continue;
      int order[16];
      sort_by_value<16>(xb, order);
      // Prefix sums per half block (each half has its own shift); since v0 - v1 = v1 - v2 = -1, a
      // split's sum of w x q is T v2 - P(i1) - P(i2), as in ggml.
      float px[2][17], pw[2][17];
      px[0][0] = px[1][0] = pw[0][0] = pw[1][0] = 0;
      for (int j = 0; j < 16; ++j) {
        const int i = order[j], h = i < 8 ? 0 : 1;
        px[h][j + 1] = px[h][j] + w[i] * xb[i];
        px[1 - h][j + 1] = px[1 - h][j];
        pw[h][j + 1] = pw[h][j] + w[i];
        pw[1 - h][j + 1] = pw[1 - h][j];
      }
      const float txs[2] = {px[0][16], px[1][16]}, tws[2] = {pw[0][16], pw[1][16]};
      const float p2 = kPlus[2], m2 = kMinus[2];
      const float cp1 = kPlus[0] * kPlus[0] - kPlus[1] * kPlus[1], cp2 = kPlus[1] * kPlus[1] - kPlus[2] * kPlus[2];
      const float cm1 = kMinus[0] * kMinus[0] - kMinus[1] * kMinus[1],
                  cm2 = kMinus[1] * kMinus[1] - kMinus[2] * kMinus[2];
      float best = -FLT_MAX, scale = max;
      int bi1 = -1, bi2 = -1, bk = -1;
      for (int i1 = 0; i1 <= 16; ++i1)
        for (int i2 = i1; i2 <= 16; ++i2) {
          float qxp[2], qxm[2], q2p[2], q2m[2];
          for (int h = 0; h < 2; ++h) {
            const float sx = px[h][i1] + px[h][i2];
            qxp[h] = txs[h] * p2 - sx;
            qxm[h] = txs[h] * m2 - sx;
            q2p[h] = tws[h] * p2 * p2 + pw[h][i1] * cp1 + pw[h][i2] * cp2;
            q2m[h] = tws[h] * m2 * m2 + pw[h][i1] * cm1 + pw[h][i2] * cm2;
          }
          const float sumqx[4] = {qxp[0] + qxp[1], qxp[0] + qxm[1], qxm[0] + qxp[1], qxm[0] + qxm[1]};
          const float sumq2[4] = {q2p[0] + q2p[1], q2p[0] + q2m[1], q2m[0] + q2p[1], q2m[0] + q2m[1]};
          for (int k = 0; k < 4; ++k)
            if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best * sumq2[k]) {
              scale = sumqx[k] / sumq2[k];
              best = scale * sumqx[k];
              bi1 = i1, bi2 = i2, bk = k;
            }
        }
      if (bi1 < 0 || bi2 < 0 || bk < 0) continue;
      int8_t L[16];
      assign_levels(order, 16, bi1, bi2, L);
      if (scale < 0) {
        for (int j = 0; j < 16; ++j) L[j] = static_cast<int8_t>(2 - L[j]);
        scale = -scale;
        bk = 3 - bk;
      }
      const float* xx[2] = {shift_of(bk, 0), shift_of(bk, 1)};
      uint16_t index[2];
      if (!to_grid(lat, 2, xb, w, scale, xx, L, index)) refit_iq1(lat, 2, xb, w, xx, index, scale);
      b.qs[2 * ib] = static_cast<uint8_t>(index[0] & 255);
      b.qs[2 * ib + 1] = static_cast<uint8_t>(index[1] & 255);
      b.qh[ib] = static_cast<uint8_t>((index[0] >> 8) | ((index[1] >> 8) << 4));
      scales[ib] = scale, shifts[ib] = bk;
      max_scale = std::max(max_scale, scale);
    }
    if (max_scale == 0) continue;
    // Block scale codes, then the super-block scale refitted over every block's levels.
    uint16_t sc[4] = {};
    float d = max_scale / 15;
    const float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int ib = 0; ib < 16; ++ib) {
      const int l = std::clamp(nearest_int(0.5f * (id * scales[ib] - 1)), 0, 7);
      sc[ib / 4] = static_cast<uint16_t>(sc[ib / 4] | (l << (3 * (ib % 4))));
      b.qh[ib] = static_cast<uint8_t>(b.qh[ib] | kMasks[shifts[ib]]);
      const float* xb = xbl + 16 * ib;
      float w[16];
      weights(ib, w);
      for (int k = 0; k < 2; ++k) {
        const float* xx = shift_of(shifts[ib], k);
        const uint8_t* p = lat.point(b.qs[2 * ib + k] + ((b.qh[ib] << (8 - 4 * k)) & 0x700));
        for (int j = 0; j < 8; ++j) {
          const float q = xx[p[j]] * static_cast<float>(2 * l + 1);
          sumqx += w[8 * k + j] * q * xb[8 * k + j];
          sumq2 += w[8 * k + j] * q * q;
        }
      }
    }
    if (sumq2 > 0) d = sumqx / sumq2;
    const uint16_t s = fp32_to_fp16(d * 1.1125f);
    sc[0] = static_cast<uint16_t>(sc[0] | ((s & 0x000f) << 12));
    sc[1] = static_cast<uint16_t>(sc[1] | ((s & 0x00f0) << 8));
    sc[2] = static_cast<uint16_t>(sc[2] | ((s & 0x0f00) << 4));
    sc[3] = static_cast<uint16_t>(sc[3] | (s & 0xf000));
    std::memcpy(b.scales, sc, sizeof sc);
  }
}

}  // namespace tmill::kquant
