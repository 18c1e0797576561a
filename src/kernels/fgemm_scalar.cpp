// Portable F32 / F16 / BF16 products on row-major weights (CPUs without AVX2). Four partial sums
// per dot product (columns i mod 4) keep the dependency chains short without changing results
// much against the index-order oracle.
#include <cstring>

#include "core/fp16.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

template <int Type>
float load_w(const uint8_t* row, int64_t c) {
  if (Type == 0) {
    float f;
    std::memcpy(&f, row + 4 * c, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, row + 2 * c, 2);
  return Type == 1 ? fp16_to_fp32(h) : bf16_to_fp32(h);
}

template <int Type>
void fgemm(const void* w, size_t row_bytes, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
           int64_t r0, int64_t r1, int64_t T) {
  const int64_t kc = 256;  // decode a slice of the row once, reuse it for every token
  float buf[kc];
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = static_cast<const uint8_t*>(w) + static_cast<size_t>(r) * row_bytes;
    for (int64_t t = 0; t < T; ++t) y[t * ldy + r] = 0;
    for (int64_t c0 = 0; c0 < cols; c0 += kc) {
      const int64_t n = cols - c0 < kc ? cols - c0 : kc;
      for (int64_t c = 0; c < n; ++c) buf[c] = load_w<Type>(row, c0 + c);
      for (int64_t t = 0; t < T; ++t) {
        const float* xt = x + t * ldx + c0;
        float s[4] = {0, 0, 0, 0};
        int64_t c = 0;
        for (; c + 4 <= n; c += 4)
          for (int i = 0; i < 4; ++i) s[i] += buf[c + i] * xt[c + i];
        for (; c < n; ++c) s[0] += buf[c] * xt[c];
        y[t * ldy + r] += (s[0] + s[1]) + (s[2] + s[3]);
      }
    }
  }
}

}  // namespace

void add_fgemm_scalar(KernelTable& t) {
  for_each_kind<kFloatF32, kFloatF16, kFloatBF16>([&](auto k) { t.fgemm[k.value] = fgemm<decltype(k)::value>; });
}

}  // namespace tmill::kern
