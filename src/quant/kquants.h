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

}  // namespace tmill::kquant
