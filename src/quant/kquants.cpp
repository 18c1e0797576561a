// K-quant quantizers, following ggml's reference algorithms: without an importance vector the
// quantize_row_*_ref searches, with one the importance-weighted *_impl searches that llama.cpp uses
// for imatrix quantization. Layouts: quant/blocks.h.
//
// Common shape of Q2_K/Q4_K/Q5_K: fit each sub-block independently (scale + min), quantize the
// sub-block scales and mins to 4 or 6 bits against a per-super-block fp16 d / dmin, then requantize
// every element against the scales actually stored. Q3_K/Q6_K do the same with symmetric scales.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "quant/kquants.h"
#include "quant/scale_search.h"

namespace tmill::kquant {
namespace {
using namespace qsearch;

// Two bits per element, 128 elements per 32 bytes: byte l holds elements l, l+32, l+64, l+96.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < QK_K; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                           (L[j + l + 96] << 6));
}

float sum_sq(const float* x, int n) {
  float s = 0;
  for (int l = 0; l < n; ++l) s += x[l] * x[l];
  return s;
}

// Requantizes one affine sub-block of `len` elements against stored scale d*sc and min dmin*m.
void requant_affine(const float* x, uint8_t* L, int len, float d, float dm, int nmax) {
  for (int ii = 0; ii < len; ++ii) {
    const int l = nearest_int((x[ii] + dm) / d);
    L[ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
  }
}

}  // namespace

// ---------------------------------------------------------------- Q2_K
void q2_K_row(const float* x, BlockQ2_K* y, int64_t n, const float* qw) {
  const int64_t nb = n / QK_K;
  uint8_t L[QK_K], Laux[16], Ls[16], Lm[16];
  float weights[16], mins[16], scales[16], sw[16];
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    if (!qw) {
      float max_scale = 0, max_min = 0;
      for (int j = 0; j < 16; ++j) {
        for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
        scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
        max_scale = std::max(max_scale, scales[j]);
        max_min = std::max(max_min, mins[j]);
      }
      if (max_scale > 0) {
        const float iscale = 15.f / max_scale;
        for (int j = 0; j < 16; ++j) y[i].scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
        y[i].d = fp32_to_fp16(max_scale / 15.f);
      } else {
        for (int j = 0; j < 16; ++j) y[i].scales[j] = 0;
        y[i].d = fp32_to_fp16(0.f);
      }
      if (max_min > 0) {
        const float iscale = 15.f / max_min;
        for (int j = 0; j < 16; ++j) y[i].scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
        y[i].dmin = fp32_to_fp16(max_min / 15.f);
      } else {
        y[i].dmin = fp32_to_fp16(0.f);
      }
    } else {
      const float sigma2 = sum_sq(x, QK_K) / QK_K;
      const float* w = qw + QK_K * i;
      for (int j = 0; j < 16; ++j) {
        sw[j] = 0;
        for (int l = 0; l < 16; ++l) weights[l] = w[16 * j + l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
        for (int l = 0; l < 16; ++l) sw[j] += weights[l];
        scales[j] = make_qkx3_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
      }
      const float dm = make_qp_quants(16, 15, scales, Ls, sw);
      const float mm = make_qp_quants(16, 15, mins, Lm, sw);
      y[i].d = fp32_to_fp16(dm);
      y[i].dmin = fp32_to_fp16(mm);
      for (int j = 0; j < 16; ++j) y[i].scales[j] = static_cast<uint8_t>(Ls[j] | (Lm[j] << 4));
    }
    const float d_all = fp16_to_fp32(y[i].d), m_all = fp16_to_fp32(y[i].dmin);
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * static_cast<float>(y[i].scales[j] & 0xF);
      if (!d) continue;
      const float dm = m_all * static_cast<float>(y[i].scales[j] >> 4);
      requant_affine(x + 16 * j, L + 16 * j, 16, d, dm, 3);
    }
    pack_2bit(L, y[i].qs);
  }
}

// ---------------------------------------------------------------- Q3_K
void q3_K_row(const float* x, BlockQ3_K* y, int64_t n, const float* qw) {
  const int64_t nb = n / QK_K;
  int8_t L[QK_K], Ls[16];
  float scales[16], weight[16], sw[16];
  uint8_t packed[16];
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    if (!qw) {
      float max_scale = 0, amax = 0;
      for (int j = 0; j < 16; ++j) {
        scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j, true);
        if (std::fabs(scales[j]) > amax) {
          amax = std::fabs(scales[j]);
          max_scale = scales[j];
        }
      }
      if (max_scale) {
        const float iscale = -32.f / max_scale;
        for (int j = 0; j < 16; ++j) {
          const int l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
          packed[j] = static_cast<uint8_t>(std::max(-32, std::min(31, l)) + 32);
        }
        pack_q3k_scales(packed, y[i].scales);
        y[i].d = fp32_to_fp16(1 / iscale);
      } else {
        std::memset(y[i].scales, 0, 12);
        y[i].d = fp32_to_fp16(0.f);
      }
    } else {
      const float sigma2 = 2 * sum_sq(x, QK_K) / QK_K;
      const float* w = qw + QK_K * i;
      for (int j = 0; j < 16; ++j) {
        for (int l = 0; l < 16; ++l) weight[l] = w[16 * j + l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
        float sumw = 0;
        for (int l = 0; l < 16; ++l) sumw += weight[l];
        sw[j] = sumw;
        scales[j] = make_qx_quants(16, 4, x + 16 * j, L + 16 * j, 1, weight);
      }
      const float d_block = make_qx_quants(16, 32, scales, Ls, 1, sw);
      for (int j = 0; j < 16; ++j) packed[j] = static_cast<uint8_t>(Ls[j]);
      pack_q3k_scales(packed, y[i].scales);
      y[i].d = fp32_to_fp16(d_block);
    }
    const float d_all = fp16_to_fp32(y[i].d);
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * static_cast<float>(q3k_scale(j, y[i].scales));
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<int8_t>(std::max(-4, std::min(3, l)) + 4);
      }
    }
    // High bit of element j goes to hmask[j % 32], bit j / 32; the low two bits pack as in Q2_K.
    std::memset(y[i].hmask, 0, QK_K / 8);
    uint8_t low[QK_K];
    for (int j = 0; j < QK_K; ++j) {
      int l = L[j];
      if (l > 3) {
        y[i].hmask[j % 32] |= static_cast<uint8_t>(1 << (j / 32));
        l -= 4;
      }
      low[j] = static_cast<uint8_t>(l);
    }
    pack_2bit(low, y[i].qs);
  }
}

// ---------------------------------------------------------------- Q4_K / Q5_K
namespace {

// Sub-block scales and mins (8 per super-block) for Q4_K (nmax 15) and Q5_K (nmax 31), stored into
// d, dmin and the 12 packed scale bytes; leaves the per-element levels in L (requantized).
void fit_k4_scales(const float* x, const float* qw, int nmax, uint8_t* L, uint16_t* d_out,
                   uint16_t* dmin_out, uint8_t* packed_scales) {
  uint8_t Laux[32], ls[8], lm[8];
  float weights[32], mins[8], scales[8], sw[8];
  if (!qw) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      const float av_x = std::sqrt(sum_sq(x + 32 * j, 32) / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
      scales[j] = nmax == 15
          ? make_qkx2_quants(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -1.f, 0.1f, 20, false)
          : make_qkx2_quants(32, 31, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.5f, 0.1f, 15, false);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; ++j) {
      // (A negative fitted scale wraps through uint8_t and saturates at 63, as in ggml.)
      ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
      lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    }
    *d_out = fp32_to_fp16(max_scale / 63.f);
    *dmin_out = fp32_to_fp16(max_min / 63.f);
  } else {
    const float sigma2 = 2 * sum_sq(x, QK_K) / QK_K;
    for (int j = 0; j < 8; ++j) {
      for (int l = 0; l < 32; ++l) weights[l] = qw[32 * j + l] * std::sqrt(sigma2 + x[32 * j + l] * x[32 * j + l]);
      float sumw = 0;
      for (int l = 0; l < 32; ++l) sumw += weights[l];
      sw[j] = sumw;
      scales[j] = make_qkx3_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, false);
    }
    const float d_block = make_qp_quants(8, 63, scales, ls, sw);
    const float m_block = make_qp_quants(8, 63, mins, lm, sw);
    for (int j = 0; j < 8; ++j) {
      ls[j] = std::min<uint8_t>(63, ls[j]);
      lm[j] = std::min<uint8_t>(63, lm[j]);
    }
    *d_out = fp32_to_fp16(d_block);
    *dmin_out = fp32_to_fp16(m_block);
  }
  pack_scale_min_k4(ls, lm, packed_scales);
  const float d_all = fp16_to_fp32(*d_out), m_all = fp16_to_fp32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, packed_scales, &sc, &m);
    const float d = d_all * sc;
    if (!d) continue;
    requant_affine(x + 32 * j, L + 32 * j, 32, d, m_all * m, nmax);
  }
}

}  // namespace

void q4_K_row(const float* x, BlockQ4_K* y, int64_t n, const float* qw) {
  const int64_t nb = n / QK_K;
  uint8_t L[QK_K];
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    fit_k4_scales(x, qw ? qw + QK_K * i : nullptr, 15, L, &y[i].d, &y[i].dmin, y[i].scales);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < QK_K; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
}

void q5_K_row(const float* x, BlockQ5_K* y, int64_t n, const float* qw) {
  const int64_t nb = n / QK_K;
  uint8_t L[QK_K];
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    fit_k4_scales(x, qw ? qw + QK_K * i : nullptr, 31, L, &y[i].d, &y[i].dmin, y[i].scales);
    uint8_t* qh = y[i].qh;
    uint8_t* ql = y[i].qs;
    std::memset(qh, 0, QK_K / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int p = 0; p < QK_K; p += 64, ql += 32) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[p + j], l2 = L[p + j + 32];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
      m1 = static_cast<uint8_t>(m1 << 2);
      m2 = static_cast<uint8_t>(m2 << 2);
    }
  }
}

// ---------------------------------------------------------------- Q6_K
void q6_K_row(const float* x, BlockQ6_K* y, int64_t n, const float* qw) {
  const int64_t nb = n / QK_K;
  int8_t L[QK_K];
  float scales[16];
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      const float* w = qw ? qw + QK_K * i + 16 * ib : nullptr;
      scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1, w);
      if (std::fabs(scales[ib]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(BlockQ6_K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = fp32_to_fp16(1 / iscale);
    for (int ib = 0; ib < 16; ++ib) y[i].scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    const float d_all = fp16_to_fp32(y[i].d);
    for (int j = 0; j < 16; ++j) {
      const float d = d_all * static_cast<float>(y[i].scales[j]);
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int a = L[j + l], b = L[j + l + 32], c = L[j + l + 64], e = L[j + l + 96];
        ql[l] = static_cast<uint8_t>((a & 0xF) | ((c & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((b & 0xF) | ((e & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((a >> 4) | ((b >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6));
      }
    }
  }
}

// ---------------------------------------------------------------- Q8_K
void q8_K_row(const float* x, BlockQ8_K* y, int64_t n) {
  const int64_t nb = n / QK_K;
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    float max = 0, amax = 0;
    for (int j = 0; j < QK_K; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (!amax) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    // -127 (not -128) so that every level fits symmetric int8 kernels.
    const float iscale = -127.f / max;
    for (int j = 0; j < QK_K; ++j) y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < QK_K / 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[16 * j + ii];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

}  // namespace tmill::kquant
