// Scalar dequantizers of the lattice i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M): the
// integer decoding of quant/iq_decode.h, then each type's float formula in ggml's operation order, so
// the values are bit-identical to ggml's dequantize_row_* (tests/unit/quant/iq_lattice_test.cpp checks
// them against llama.cpp's on random blocks).
#include "core/fp16.h"
#include "quant/iq_decode.h"
#include "quant/kquants.h"
#include "quant/quant.h"

namespace tmill {

int iq_kind(DType t) {
  switch (t) {
    case DType::IQ2_XXS: return kIqIQ2_XXS;
    case DType::IQ2_XS: return kIqIQ2_XS;
    case DType::IQ2_S: return kIqIQ2_S;
    case DType::IQ3_XXS: return kIqIQ3_XXS;
    case DType::IQ3_S: return kIqIQ3_S;
    case DType::IQ1_S: return kIqIQ1_S;
    case DType::IQ1_M: return kIqIQ1_M;
    default: return -1;
  }
}

namespace kquant {

void dequantize_iq(int kind, const void* src, float* y, int64_t nb) {
  const auto* p = static_cast<const uint8_t*>(src);
  IqDecoded o;
  for (int64_t i = 0; i < nb; ++i, p += kIqBlockBytes[kind], y += QK_K) {
    iq_decode(kind, p, o);
    const float d = fp16_to_fp32(o.d);
    if (iq_is_iq1(kind)) {
      // ggml: dl * (grid + delta), dl = d * (2s + 1), delta = +-0.125
      for (int e = 0; e < QK_K; ++e) {
        const float dl = d * static_cast<float>(o.sc[e / 16]);
        const float delta = (o.sgn[e / 8] & 1) ? -0.125f : 0.125f;
        y[e] = dl * (static_cast<float>(static_cast<int8_t>(o.mag[e])) + delta);
      }
      continue;
    }
    for (int e = 0; e < QK_K; ++e) {
      const int s = (o.sc[e / 16] - 1) / 2;  // the stored scale
      float db;
      switch (kind) {
        case kIqIQ2_XXS: case kIqIQ2_XS: case kIqIQ2_S: db = d * (0.5f + static_cast<float>(s)) * 0.25f; break;
        case kIqIQ3_XXS: db = d * (0.5f + static_cast<float>(s)) * 0.5f; break;
        default: db = d * static_cast<float>(o.sc[e / 16]); break;  // IQ3_S: d * (1 + 2s)
      }
      const float v = db * static_cast<float>(o.mag[e]);
      y[e] = ((o.sgn[e / 8] >> (e % 8)) & 1) ? -v : v;
    }
  }
}

}  // namespace kquant
}  // namespace tmill
