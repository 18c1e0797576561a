// MXFP4 quantizer: what ggml's quantize_row_mxfp4_ref (the function llama-quantize calls for MXFP4)
// writes, byte for byte. Per 32-element block the shared exponent is e = floor(log2(amax)) - 2 + 127,
// which puts amax in [4, 8) times the block's unit 2^(e - 127), i.e. within reach of E2M1's largest
// magnitude 6; each element then takes the code whose value is nearest (first code on ties, so +0
// before -0 and the smaller magnitude between two neighbours).
#include <algorithm>
#include <cmath>

#include "quant/blocks.h"
#include "quant/kquants.h"

namespace tmill::kquant {
namespace {

int nearest_code(float x, float d) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kMxfp4Values[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

}  // namespace

void mxfp4_row(const float* x, BlockMXFP4* y, int64_t n) {
  for (int64_t i = 0; i < n / QK_MXFP4; ++i, x += QK_MXFP4) {
    float amax = 0.0f;
    for (int j = 0; j < QK_MXFP4; ++j) amax = std::max(amax, std::fabs(x[j]));
    // ggml converts the float straight to uint8_t; below 2^-125 that is negative and for an infinite
    // amax infinite (both undefined in C): we clamp to 0 and 255. Every finite amax >= 2^-125 gives
    // ggml's byte.
    float e = 0.0f;
    if (amax > 0.0f) e = std::clamp(std::floor(std::log2(amax)) - 2.0f + 127.0f, 0.0f, 255.0f);
    y[i].e = static_cast<uint8_t>(e);
    const float d = mxfp4_half_scale(y[i].e);
    for (int j = 0; j < QK_MXFP4 / 2; ++j)
      y[i].qs[j] = static_cast<uint8_t>(nearest_code(x[j], d) | (nearest_code(x[j + QK_MXFP4 / 2], d) << 4));
  }
}

}  // namespace tmill::kquant
