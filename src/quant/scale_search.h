// Scale searches shared by the quantizers (internal to quant/). They follow the searches of ggml's
// reference quantizers so our files have llama.cpp's quality:
//   symmetric (x ~ d * (L - nmax)):       make_qx_quants, make_q3_quants
//   affine    (x ~ d * L - m, m >= 0):   make_qkx2_quants, make_qkx3_quants
//   positive scales of scales:           make_qp_quants
// All return the (float) scale; L receives the chosen integer levels.
#pragma once

#include <cstdint>
#include <cstring>

namespace tmill::qsearch {

// Rounds to the nearest integer, ties to even, exactly like ggml's nearest_int (adding 1.5 * 2^23
// moves the value's integer part into the mantissa). Valid for |x| <= 4194303.
inline int nearest_int(float x) {
  const float v = x + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// Groups whose largest magnitude is below this are stored as all-zero.
inline constexpr float kGroupMaxEps = 1e-15f;

// Symmetric levels L in [0, 2*nmax) (stored as l + nmax) for n values. rmse_type 0: plain
// round-to-nearest from the extreme value; 1: least-squares refit with weights qw (or x^2 when qw is
// null) over a sweep of 18 candidate scales; negative: one refit only, averaged with the initial scale.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, int rmse_type, const float* qw);

// Q3_K's symmetric search: L in [-nmax, nmax) returned shifted by +nmax; with do_rmse, coordinate
// descent on the x^2-weighted error.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse);

// Affine levels L in [0, nmax] with a non-positive offset: x ~ scale * L - the_min (the_min >= 0).
// Tries nstep+1 scales (nmax + rmin + rdelta * i) / (max - min) and keeps the weighted least-squares
// fit (use_mad: absolute instead of squared error) with the lowest error. Laux is scratch of n bytes.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad);
// As make_qkx2_quants, with weights = x^2 when `weights` is null and a guard against levels out of
// range while refitting (used by the importance-weighted paths).
float make_qkx3_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad);

// Non-negative x (sub-block scales or mins) to levels L in [0, nmax] with weights; returns the
// super-block scale.
float make_qp_quants(int n, int nmax, const float* x, uint8_t* L, const float* quant_weights);

}  // namespace tmill::qsearch
