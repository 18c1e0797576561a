// Portable GEMM for the lattice i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) on row-major
// weights in the file layout, with Q8K activation records (kernels/kernel_abi.h): the readable
// specification the SIMD versions follow, integer sums per super-block and the same float steps.
#include <cstring>

#include "core/fp16.h"
#include "kernels/kernel_table.h"
#include "quant/iq_decode.h"

namespace tmill::kern {
namespace {

static_assert(kIqGemmKinds == kIqKinds, "kernel table and quant/iq_decode.h disagree on the i-quant kinds");

// One tile of T <= kTile tokens.
template <int K>
void iq_tile(const uint8_t* w, size_t row_bytes, int64_t nb, int64_t r0, int64_t r1, const uint8_t* act, int T,
             float* y, int64_t ldy) {
  IqDecoded o;
  int lv[QK_K];
  for (int64_t r = r0; r < r1; ++r) {
    float acc[kTile] = {};
    for (int64_t b = 0; b < nb; ++b) {
      iq_decode(K, w + static_cast<size_t>(r) * row_bytes + static_cast<size_t>(b) * kIqBlockBytes[K], o);
      for (int i = 0; i < QK_K; ++i) lv[i] = iq_level(K, o, i);
      const float d = fp16_to_fp32(o.d);
      const uint8_t* rec = act + b * T * kQ8KRecordBytes;
      for (int t = 0; t < T; ++t) {
        const auto* x = reinterpret_cast<const int8_t*>(rec + 256 * t);
        float dx;
        std::memcpy(&dx, rec + T * 256 + 4 * t, 4);
        int S = 0;
        for (int j = 0; j < 16; ++j) {
          int s = 0;
          for (int i = 16 * j; i < 16 * j + 16; ++i) s += lv[i] * x[i];
          S += o.sc[j] * s;
        }
        acc[t] += (d * dx) * static_cast<float>(S);
      }
    }
    for (int t = 0; t < T; ++t) y[t * ldy + r] = kIqFactor[K] * acc[t];
  }
}

template <int K>
void iq_gemm(const uint8_t* w, size_t row_bytes, int64_t nb, int64_t r0, int64_t r1, const uint8_t* act,
             size_t tile_bytes, int64_t n, float* y, int64_t ldy) {
  for (int64_t i = 0; i * kTile < n; ++i) {
    const int T = static_cast<int>(n - i * kTile < kTile ? n - i * kTile : kTile);
    iq_tile<K>(w, row_bytes, nb, r0, r1, act + static_cast<size_t>(i) * tile_bytes, T, y + i * kTile * ldy, ldy);
  }
}

}  // namespace

void add_iq_gemm_scalar(KernelTable& t) {
  for_each_kind<kIqIQ2_XXS, kIqIQ2_XS, kIqIQ2_S, kIqIQ3_XXS, kIqIQ3_S, kIqIQ1_S, kIqIQ1_M>(
      [&](auto k) { t.iq_gemm[k.value] = iq_gemm<decltype(k)::value>; });
}

}  // namespace tmill::kern
