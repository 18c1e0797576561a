#include "quant/scale_search.h"

#include <algorithm>
#include <cmath>

#include "core/log.h"

namespace tmill::qsearch {
namespace {

// Weight of value x in the symmetric fits: explicit weights win, else by rmse_type.
inline float sym_weight(const float* qw, int i, float x, int rmse_type) {
  if (qw) return qw[i];
  switch (rmse_type) {
    case 1: return x * x;
    case 2: return 1.0f;
    case 3: return std::fabs(x);
    default: return std::sqrt(std::fabs(x));
  }
}

inline int clamp_int(int v, int lo, int hi) { return std::max(lo, std::min(hi, v)); }

}  // namespace

float make_qx_quants(int n, int nmax, const float* x, int8_t* L, int rmse_type, const float* qw) {
  // The extreme value (largest magnitude, first one on ties) defines the initial scale; its sign is
  // kept so that it maps exactly onto level -nmax (the asymmetric end of [-nmax, nmax)).
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.f;
  }
  float iscale = -static_cast<float>(nmax) / max;
  if (rmse_type == 0) {
    for (int i = 0; i < n; ++i)
      L[i] = static_cast<int8_t>(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
    return 1 / iscale;
  }
  const bool return_early = rmse_type < 0;
  if (return_early) rmse_type = -rmse_type;
  constexpr int kMaxN = 32;
  TM_ASSERT(n <= kMaxN, "make_qx_quants: group too large");
  float w[kMaxN] = {};
  for (int i = 0; i < n; ++i) w[i] = sym_weight(qw, i, x[i], rmse_type);

  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    sumlx += w[i] * x[i] * l;
    suml2 += w[i] * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;

  // The best least-squares scale maximizes sumlx^2 / suml2; sweep nmax +- 0.9 in steps of 0.1.
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      sumlx += w[i] * x[i] * l;
      suml2 += w[i] * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i)
        L[i] = static_cast<int8_t>(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float make_q3_quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.f;
  }
  const float iscale = -static_cast<float>(nmax) / max;
  if (!do_rmse) {
    for (int i = 0; i < n; ++i)
      L[i] = static_cast<int8_t>(clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1) + nmax);
    return 1 / iscale;
  }
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  // Coordinate descent: move one level at a time to its optimum given the others, keeping the change
  // when it raises sumlx^2 / suml2 (i.e. lowers the weighted error of the refitted scale).
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx > 0) {
        float sl2 = suml2 - w * L[i] * L[i];
        const int new_l = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

namespace {

// Shared body of make_qkx2_quants / make_qkx3_quants. kGuard selects the qkx3 behaviour (weights
// default to x^2, refit levels computed with a clamp before rounding, max <= min treated as flat).
// Templated so the inner loops carry no per-element branches; the arithmetic (and so every result)
// is the same as the straightforward loops.
template <bool kUseMad, bool kGuard>
float affine_search(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                    uint8_t* Laux, float rmin, float rdelta, int nstep) {
  constexpr int kMaxN = 32;
  TM_ASSERT(n <= kMaxN, "affine_search: group too large");
  float w[kMaxN] = {};
  for (int i = 0; i < n; ++i) w[i] = weights ? weights[i] : x[i] * x[i];
  auto err = [](float diff) { return kUseMad ? std::fabs(diff) : diff * diff; };
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (kGuard ? max <= min : max == min) {
    std::fill(L, L + n, uint8_t{0});
    *the_min = -min;
    return 0.f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(clamp_int(l, 0, nmax));
    best_error += w[i] * err(scale * L[i] + min - x[i]);
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l;
      if (kGuard) {
        const float v = iscale * (x[i] - min);
        l = v > 0 ? nearest_int(std::min(v, static_cast<float>(nmax))) : 0;
      } else {
        l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
      }
      Laux[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    // Weighted least squares for x ~ scale * l + offset; the offset may not be positive.
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) cur_error += w[i] * err(this_scale * Laux[i] + this_min - x[i]);
      if (cur_error < best_error) {
        std::copy(Laux, Laux + n, L);
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

}  // namespace

float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
  return use_mad ? affine_search<true, false>(n, nmax, x, weights, L, the_min, Laux, rmin, rdelta, nstep)
                 : affine_search<false, false>(n, nmax, x, weights, L, the_min, Laux, rmin, rdelta, nstep);
}

float make_qkx3_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
  return use_mad ? affine_search<true, true>(n, nmax, x, weights, L, the_min, Laux, rmin, rdelta, nstep)
                 : affine_search<false, true>(n, nmax, x, weights, L, the_min, Laux, rmin, rdelta, nstep);
}

float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* quant_weights) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (max < kGroupMaxEps) {
    std::fill(L, L + n, uint8_t{0});
    return 0.f;
  }
  // First choose the best of 9 candidate inverse scales by weighted squared error ...
  float iscale = static_cast<float>(nmax) / max;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(nearest_int(iscale * x[i]));
  const float scale0 = 1 / iscale;
  float best_mse = 0;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale0 * L[i];
    best_mse += quant_weights[i] * diff * diff;
  }
  for (int is = -4; is <= 4; ++is) {
    if (is == 0) continue;
    const float iscale_is = (0.1f * static_cast<float>(is) + static_cast<float>(nmax)) / max;
    const float scale_is = 1 / iscale_is;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::min(nmax, nearest_int(iscale_is * x[i]));
      const float diff = x[i] - scale_is * l;
      mse += quant_weights[i] * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = iscale_is;
    }
  }
  // ... then refine the levels by coordinate descent on the refitted scale.
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::min(nmax, nearest_int(iscale * x[i]));
    L[i] = static_cast<uint8_t>(l);
    const float w = quant_weights[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = quant_weights[i];
      float slx = sumlx - w * x[i] * L[i];
      float sl2 = suml2 - w * L[i] * L[i];
      if (slx > 0 && sl2 > 0) {
        const int new_l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
        if (new_l != L[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<uint8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

}  // namespace tmill::qsearch
