// Quantizers for the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1) and the float types,
// plus the type dispatch (quantize_row / quantize_tensor).
//
// Without an importance vector these reproduce ggml's quantize_row_*_ref bit for bit:
//   Q8_0/Q8_1: d = amax / 127, q = round-half-away(x / d)
//   Q4_0/Q5_0: d = m / -8 (or -16) where m is the signed value of largest magnitude, so m maps to
//              level 0 exactly; q = min(15|31, trunc(x / d + 8.5|16.5))
//   Q4_1/Q5_1: d = (max - min) / 15|31, m = min, q = trunc((x - min) / d + 0.5)
// With an importance vector they use llama.cpp's weighted searches (weights qw * sqrt(sigma2 + x^2)
// where sigma2 is the mean square of the whole row).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "quant/blocks.h"
#include "quant/kquants.h"
#include "quant/quant.h"
#include "quant/scale_search.h"

namespace tmill {
namespace {
using qsearch::make_qkx3_quants;
using qsearch::make_qx_quants;

// Signed value of largest magnitude (the first one on ties) and that magnitude.
inline void signed_absmax(const float* x, int n, float* max, float* amax) {
  *max = 0;
  *amax = 0;
  for (int j = 0; j < n; ++j) {
    if (*amax < std::fabs(x[j])) {
      *amax = std::fabs(x[j]);
      *max = x[j];
    }
  }
}

inline void min_max(const float* x, int n, float* mn, float* mx) {
  *mn = FLT_MAX;
  *mx = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < *mn) *mn = x[j];
    if (x[j] > *mx) *mx = x[j];
  }
}

// Packs 32 five-bit levels: low nibbles as Q4 (element j low, j+16 high), bit 4 into qh bit j.
inline void pack_q5(const uint8_t* L, uint8_t* qs, uint8_t* qh_out) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((L[j] & 0x0F) | ((L[j + 16] & 0x0F) << 4));
    qh |= static_cast<uint32_t>((L[j] >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((L[j + 16] >> 4) & 1) << (j + 16);
  }
  std::memcpy(qh_out, &qh, 4);
}

float row_sigma2(const float* x, int64_t n) {
  float sum_x2 = 0;
  for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
  return sum_x2 / static_cast<float>(n);
}

void q8_0_row(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK8_0) {
    float amax = 0;
    for (int j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < QK8_0; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void q8_1_row(const float* x, BlockQ8_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK8_1) {
    float amax = 0;
    for (int j = 0; j < QK8_1; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < QK8_1; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
      sum += y[i].qs[j];
    }
    y[i].s = fp32_to_fp16(static_cast<float>(sum) * d);
  }
}

void q4_0_row(const float* x, BlockQ4_0* y, int64_t n, const float* qw) {
  const int64_t nb = n / QK4_0;
  if (!qw) {
    for (int64_t i = 0; i < nb; ++i, x += QK4_0) {
      float max, amax;
      signed_absmax(x, QK4_0, &max, &amax);
      const float d = max / -8;
      const float id = d ? 1.0f / d : 0.0f;
      y[i].d = fp32_to_fp16(d);
      for (int j = 0; j < QK4_0 / 2; ++j) {
        const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
        const int q1 = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
        y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
      }
    }
    return;
  }
  const float sigma2 = row_sigma2(x, n);
  float weight[QK4_0];
  int8_t L[QK4_0];
  for (int64_t i = 0; i < nb; ++i, x += QK4_0, qw += QK4_0) {
    for (int j = 0; j < QK4_0; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + x[j] * x[j]);
    y[i].d = fp32_to_fp16(make_qx_quants(QK4_0, 8, x, L, 1, weight));
    for (int j = 0; j < 16; ++j) y[i].qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
  }
}

void q4_1_row(const float* x, BlockQ4_1* y, int64_t n, const float* qw) {
  const int64_t nb = n / QK4_1;
  if (!qw) {
    for (int64_t i = 0; i < nb; ++i, x += QK4_1) {
      float mn, mx;
      min_max(x, QK4_1, &mn, &mx);
      const float d = (mx - mn) / 15;
      const float id = d ? 1.0f / d : 0.0f;
      y[i].d = fp32_to_fp16(d);
      y[i].m = fp32_to_fp16(mn);
      for (int j = 0; j < QK4_1 / 2; ++j) {
        const int q0 = std::min(15, static_cast<int>((x[j] - mn) * id + 0.5f));
        const int q1 = std::min(15, static_cast<int>((x[j + 16] - mn) * id + 0.5f));
        y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
      }
    }
    return;
  }
  const float sigma2 = row_sigma2(x, n);
  float weight[QK4_1];
  uint8_t L[QK4_1], Laux[QK4_1];
  for (int64_t i = 0; i < nb; ++i, x += QK4_1, qw += QK4_1) {
    for (int j = 0; j < QK4_1; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + x[j] * x[j]);
    float the_min;
    const float d = make_qkx3_quants(QK4_1, 15, x, weight, L, &the_min, Laux, -0.9f, 0.05f, 36, false);
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(-the_min);
    for (int j = 0; j < 16; ++j) y[i].qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
  }
}

void q5_0_row(const float* x, BlockQ5_0* y, int64_t n, const float* qw) {
  const int64_t nb = n / QK5_0;
  uint8_t L[QK5_0];
  if (!qw) {
    for (int64_t i = 0; i < nb; ++i, x += QK5_0) {
      float max, amax;
      signed_absmax(x, QK5_0, &max, &amax);
      const float d = max / -16;
      const float id = d ? 1.0f / d : 0.0f;
      y[i].d = fp32_to_fp16(d);
      for (int j = 0; j < QK5_0; ++j) L[j] = static_cast<uint8_t>(std::min(31, static_cast<int>(x[j] * id + 16.5f)));
      pack_q5(L, y[i].qs, y[i].qh);
    }
    return;
  }
  const float sigma2 = row_sigma2(x, n);
  float weight[QK5_0];
  int8_t Ls[QK5_0];
  for (int64_t i = 0; i < nb; ++i, x += QK5_0, qw += QK5_0) {
    for (int j = 0; j < QK5_0; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + x[j] * x[j]);
    y[i].d = fp32_to_fp16(make_qx_quants(QK5_0, 16, x, Ls, 1, weight));
    for (int j = 0; j < QK5_0; ++j) L[j] = static_cast<uint8_t>(Ls[j]);
    pack_q5(L, y[i].qs, y[i].qh);
  }
}

void q5_1_row(const float* x, BlockQ5_1* y, int64_t n, const float* qw) {
  const int64_t nb = n / QK5_1;
  uint8_t L[QK5_1];
  if (!qw) {
    for (int64_t i = 0; i < nb; ++i, x += QK5_1) {
      float mn, mx;
      min_max(x, QK5_1, &mn, &mx);
      const float d = (mx - mn) / 31;
      const float id = d ? 1.0f / d : 0.0f;
      y[i].d = fp32_to_fp16(d);
      y[i].m = fp32_to_fp16(mn);
      for (int j = 0; j < QK5_1; ++j) L[j] = static_cast<uint8_t>(std::min(31, static_cast<int>((x[j] - mn) * id + 0.5f)));
      pack_q5(L, y[i].qs, y[i].qh);
    }
    return;
  }
  const float sigma2 = row_sigma2(x, n);
  float weight[QK5_1];
  uint8_t Laux[QK5_1];
  for (int64_t i = 0; i < nb; ++i, x += QK5_1, qw += QK5_1) {
    for (int j = 0; j < QK5_1; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + x[j] * x[j]);
    float the_min;
    const float d = make_qkx3_quants(QK5_1, 31, x, weight, L, &the_min, Laux, -0.9f, 0.05f, 36, false);
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(-the_min);
    pack_q5(L, y[i].qs, y[i].qh);
  }
}

}  // namespace

bool can_quantize(DType t) { return can_dequantize(t); }

bool quantize_needs_importance(DType t) { return t == DType::IQ2_XXS || t == DType::IQ2_XS || t == DType::IQ1_S; }

size_t quantize_row(DType t, const float* src, void* dst, int64_t n, const float* importance) {
  const DTypeInfo& info = dtype_info(t);
  TM_ASSERT(n % info.block_size == 0, "quantize_row: n is not a multiple of the block size");
  const int64_t nb = n / info.block_size;
  switch (t) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
    case DType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
      break;
    }
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
      break;
    }
    case DType::Q4_0: q4_0_row(src, static_cast<BlockQ4_0*>(dst), n, importance); break;
    case DType::Q4_1: q4_1_row(src, static_cast<BlockQ4_1*>(dst), n, importance); break;
    case DType::Q5_0: q5_0_row(src, static_cast<BlockQ5_0*>(dst), n, importance); break;
    case DType::Q5_1: q5_1_row(src, static_cast<BlockQ5_1*>(dst), n, importance); break;
    case DType::Q8_0: q8_0_row(src, static_cast<BlockQ8_0*>(dst), nb); break;
    case DType::Q8_1: q8_1_row(src, static_cast<BlockQ8_1*>(dst), nb); break;
    case DType::Q2_K: kquant::q2_K_row(src, static_cast<BlockQ2_K*>(dst), n, importance); break;
    case DType::Q3_K: kquant::q3_K_row(src, static_cast<BlockQ3_K*>(dst), n, importance); break;
    case DType::Q4_K: kquant::q4_K_row(src, static_cast<BlockQ4_K*>(dst), n, importance); break;
    case DType::Q5_K: kquant::q5_K_row(src, static_cast<BlockQ5_K*>(dst), n, importance); break;
    case DType::Q6_K: kquant::q6_K_row(src, static_cast<BlockQ6_K*>(dst), n, importance); break;
    case DType::Q8_K: kquant::q8_K_row(src, static_cast<BlockQ8_K*>(dst), n); break;
    case DType::IQ4_NL: kquant::iq4_nl_row(src, static_cast<BlockIQ4_NL*>(dst), n, importance); break;
    case DType::IQ4_XS: kquant::iq4_xs_row(src, static_cast<BlockIQ4_XS*>(dst), n, importance); break;
    case DType::MXFP4: kquant::mxfp4_row(src, static_cast<BlockMXFP4*>(dst), n); break;
    case DType::IQ2_XXS: kquant::iq2_xxs_row(src, static_cast<BlockIQ2_XXS*>(dst), n, importance); break;
    case DType::IQ2_XS: kquant::iq2_xs_row(src, static_cast<BlockIQ2_XS*>(dst), n, importance); break;
    case DType::IQ2_S: kquant::iq2_s_row(src, static_cast<BlockIQ2_S*>(dst), n, importance); break;
    case DType::IQ3_XXS: kquant::iq3_xxs_row(src, static_cast<BlockIQ3_XXS*>(dst), n, importance); break;
    case DType::IQ3_S: kquant::iq3_s_row(src, static_cast<BlockIQ3_S*>(dst), n, importance); break;
    case DType::IQ1_S: kquant::iq1_s_row(src, static_cast<BlockIQ1_S*>(dst), n, importance); break;
    case DType::IQ1_M: kquant::iq1_m_row(src, static_cast<BlockIQ1_M*>(dst), n, importance); break;
    default: TM_ASSERT(false, "quantize_row: unsupported type (check can_quantize first)");
  }
  return static_cast<size_t>(nb * info.type_size);
}

void quantize_row_q8_K(const float* src, void* dst, int64_t n) {
  kquant::q8_K_row(src, static_cast<BlockQ8_K*>(dst), n);
}

size_t quantize_tensor(DType t, const float* src, void* dst, int64_t rows, int64_t cols,
                       const float* importance, ThreadPool* pool) {
  const auto row_bytes = static_cast<size_t>(cols / dtype_info(t).block_size * dtype_info(t).type_size);
  auto* out = static_cast<uint8_t*>(dst);
  auto work = [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r)
      quantize_row(t, src + r * cols, out + static_cast<size_t>(r) * row_bytes, cols, importance);
  };
  // ~16K elements per chunk (as llama.cpp), at least one row.
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols));
  if (pool && pool->size() > 1 && rows > grain) pool->parallel_for(rows, grain, work);
  else work(0, rows, 0);
  return row_bytes * static_cast<size_t>(rows);
}

void dequantize_tensor(DType t, const void* src, float* dst, int64_t n_elements, ThreadPool* pool) {
  const DTypeInfo& info = dtype_info(t);
  TM_ASSERT(n_elements % info.block_size == 0, "dequantize_tensor: size is not a multiple of the block size");
  const int64_t nb = n_elements / info.block_size;
  const auto* in = static_cast<const uint8_t*>(src);
  auto work = [&](int64_t b0, int64_t b1, int) {
    dequantize_row(t, in + static_cast<size_t>(b0 * info.type_size), dst + b0 * info.block_size,
                   (b1 - b0) * info.block_size);
  };
  const int64_t grain = std::max<int64_t>(1, 65536 / info.block_size);
  if (pool && pool->size() > 1 && nb > grain) pool->parallel_for(nb, grain, work);
  else work(0, nb, 0);
}

}  // namespace tmill
