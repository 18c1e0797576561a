// K-quant row quantizers (internal to quant/; use quantize_row from quant/quant.h).
// n is a multiple of QK_K; qw (importance, n entries) may be null.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace tmill::kquant {

void q2_K_row(const float* x, BlockQ2_K* y, int64_t n, const float* qw);
void q3_K_row(const float* x, BlockQ3_K* y, int64_t n, const float* qw);
void q4_K_row(const float* x, BlockQ4_K* y, int64_t n, const float* qw);
void q5_K_row(const float* x, BlockQ5_K* y, int64_t n, const float* qw);
void q6_K_row(const float* x, BlockQ6_K* y, int64_t n, const float* qw);
void q8_K_row(const float* x, BlockQ8_K* y, int64_t n);
// Non-linear 4-bit types (iq4quants.cpp); n a multiple of 32 (IQ4_NL) or QK_K (IQ4_XS).
void iq4_nl_row(const float* x, BlockIQ4_NL* y, int64_t n, const float* qw);
void iq4_xs_row(const float* x, BlockIQ4_XS* y, int64_t n, const float* qw);
// MXFP4 (mxfp4quants.cpp); n a multiple of 32. ggml has no importance-weighted search for it.
void mxfp4_row(const float* x, BlockMXFP4* y, int64_t n);
// Lattice i-quants (iq_lattice_quants.cpp, iq1_quants.cpp); n a multiple of QK_K. IQ2_XXS, IQ2_XS
// and IQ1_S require qw (as ggml does); the others fall back to weights from x without it.
void iq2_xxs_row(const float* x, BlockIQ2_XXS* y, int64_t n, const float* qw);
void iq2_xs_row(const float* x, BlockIQ2_XS* y, int64_t n, const float* qw);
void iq2_s_row(const float* x, BlockIQ2_S* y, int64_t n, const float* qw);
void iq3_xxs_row(const float* x, BlockIQ3_XXS* y, int64_t n, const float* qw);
void iq3_s_row(const float* x, BlockIQ3_S* y, int64_t n, const float* qw);
void iq1_s_row(const float* x, BlockIQ1_S* y, int64_t n, const float* qw);
void iq1_m_row(const float* x, BlockIQ1_M* y, int64_t n, const float* qw);
// Lattice i-quants (dequantize_iq.cpp): nb super-blocks of IqKind `kind` (quant/iq_decode.h).
void dequantize_iq(int kind, const void* src, float* y, int64_t nb);

}  // namespace tmill::kquant
