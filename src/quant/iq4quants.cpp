// IQ4_NL / IQ4_XS quantizers: the scale search of ggml's quantize_iq4_nl / quantize_iq4_xs (the
// functions llama-quantize calls), so our files have llama.cpp's quality. Per 32-element block:
// weights w = x^2 (or imatrix * sqrt(sigma2 + x^2), sigma2 = 2 * mean square of the (super-)block);
// the start scale maps the signed extreme value onto level -127, then 15 scales around it
// ((k + (-127)) / max, k = -7..7) are tried and the one with the best weighted least-squares fit kept.
// IQ4_XS then stores the 8 block scales as 6-bit multiples of the super-block scale d = -max / 32
// and re-picks the levels for the rounded scales.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/kquants.h"
#include "quant/scale_search.h"

namespace tmill::kquant {
namespace {
using qsearch::kGroupMaxEps;
using qsearch::nearest_int;

constexpr int kTries = 7;

// Index of the level nearest to v, exactly as ggml's best_index_int8 (binary search, then the lower
// neighbour only if strictly nearer, in float), without its unpredictable branches: the search
// ends at ml = the number of levels 1..14 that are <= v (0 below the table, 14 above it), and the
// final comparison then also returns 0 / 15 for v at or beyond the ends.
inline int nearest_level(float v) {
  const int8_t* t = kIq4nlValues;
  int ml = 0;
  for (int k = 1; k < 15; ++k) ml += v >= static_cast<float>(t[k]);
  return v - static_cast<float>(t[ml]) < static_cast<float>(t[ml + 1]) - v ? ml : ml + 1;
}

// Best scale for one block of 32 (levels into L); 0 for an all-(near-)zero block.
float block_scale(const float* x, const float* w, uint8_t* L) {
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0;
  const float v0 = kIq4nlValues[0];
  float d = -max / v0;
  float id = 1 / d;
  float sumqx = 0, sumq2 = 0;
  for (int j = 0; j < 32; ++j) {
    const int l = nearest_level(id * x[j]);
    L[j] = static_cast<uint8_t>(l);
    const float q = kIq4nlValues[l];
    sumqx += w[j] * q * x[j];
    sumq2 += w[j] * q * q;
  }
  d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
  float best = d * sumqx;
  for (int k = -kTries; k <= kTries; ++k) {
    id = (static_cast<float>(k) + v0) / max;
    sumqx = sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const float q = kIq4nlValues[nearest_level(id * x[j])];
      sumqx += w[j] * q * x[j];
      sumq2 += w[j] * q * q;
    }
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Weights of block b of a (super-)block of n elements starting at x.
void block_weights(const float* x, int n, const float* qw, int b, float* w) {
  const float* xb = x + 32 * b;
  if (!qw) {
    for (int j = 0; j < 32; ++j) w[j] = xb[j] * xb[j];
    return;
  }
  float sigma2 = 0;
  for (int j = 0; j < n; ++j) sigma2 += x[j] * x[j];
  sigma2 *= 2.f / static_cast<float>(n);
  for (int j = 0; j < 32; ++j) w[j] = qw[32 * b + j] * std::sqrt(sigma2 + xb[j] * xb[j]);
}

void pack_nibbles(const uint8_t* L, uint8_t* qs, int n) {
  for (int b = 0; b < n / 32; ++b)
    for (int j = 0; j < 16; ++j) qs[16 * b + j] = static_cast<uint8_t>(L[32 * b + j] | (L[32 * b + 16 + j] << 4));
}

}  // namespace

void iq4_nl_row(const float* x, BlockIQ4_NL* y, int64_t n, const float* qw) {
  for (int64_t i = 0; i < n / QK4_NL; ++i, x += QK4_NL) {
    float w[32];
    uint8_t L[32];
    block_weights(x, 32, qw ? qw + QK4_NL * i : nullptr, 0, w);
    std::memset(L, 0, sizeof(L));
    const float d = block_scale(x, w, L);
    y[i].d = fp32_to_fp16(d);
    // Re-pick the levels for the scale found (a zero block gets level 8, the one nearest 0, as in ggml).
    const float id = d != 0 ? 1 / d : 0.f;
    for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(nearest_level(id * x[j]));
    pack_nibbles(L, y[i].qs, 32);
  }
}

void iq4_xs_row(const float* x, BlockIQ4_XS* y, int64_t n, const float* qw) {
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    const float* qwi = qw ? qw + QK_K * i : nullptr;
    float scales[8];
    uint8_t L[QK_K];
    std::memset(L, 0, sizeof(L));
    float max_scale = 0, amax_scale = 0;
    for (int b = 0; b < 8; ++b) {
      float w[32];
      block_weights(x, QK_K, qwi, b, w);
      scales[b] = block_scale(x + 32 * b, w, L + 32 * b);
      if (std::fabs(scales[b]) > amax_scale) {
        amax_scale = std::fabs(scales[b]);
        max_scale = scales[b];
      }
    }
    const float d = -max_scale / 32;
    y[i].d = fp32_to_fp16(d);
    y[i].scales_h = 0;
    std::memset(y[i].scales_l, 0, sizeof(y[i].scales_l));
    const float id = d != 0 ? 1 / d : 0.f;
    for (int b = 0; b < 8; ++b) {
      int l = nearest_int(id * scales[b]);
      l = l < -32 ? -32 : l > 31 ? 31 : l;
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0 ? 1 / dl : 0.f;
      for (int j = 0; j < 32; ++j) L[32 * b + j] = static_cast<uint8_t>(nearest_level(idl * x[32 * b + j]));
      l += 32;
      y[i].scales_l[b / 2] = static_cast<uint8_t>(y[i].scales_l[b / 2] | ((l & 0xF) << (4 * (b % 2))));
      y[i].scales_h = static_cast<uint16_t>(y[i].scales_h | ((l >> 4) << (2 * b)));
    }
    pack_nibbles(L, y[i].qs, QK_K);
  }
}

}  // namespace tmill::kquant
