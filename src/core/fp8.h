// FP8 encoding for the KV cache (--kv-cache-dtype fp8_e4m3 / fp8_e5m2), the same code on the host and
// in the CUDA kernels (nvcc compiles it __host__ __device__; the CPU's emulator of CUDA and the CPU
// kernels as plain C++), so both caches hold the same bytes. Integer operations only: no rounding mode,
// no library call. Decoding: core/fp16.h fp8_e4m3_to_fp32 / fp8_e5m2_to_fp32 (exact), or the FP16 bit
// patterns below, which SIMD and CUDA code widen with their half-precision conversions.
//   E4M3 "fn" (torch.float8_e4m3fn, NVIDIA's E4M3): exponent bias 7, 3 mantissa bits, subnormals, no
//     infinities, S.1111.111 the NaN; largest finite 448.
//   E5M2: FP16's upper byte (bias 15, 2 mantissa bits, infinities); largest finite 57344.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TM_FP8_HD __host__ __device__ __forceinline__
#else
#define TM_FP8_HD inline
#endif

namespace tmill {

inline constexpr float kFp8E4M3Max = 448.0f, kFp8E5M2Max = 57344.0f;

namespace fp8_detail {
// v >> s rounded to nearest, ties to even; s in 1..31 (a larger shift is 0).
TM_FP8_HD uint32_t shift_rne(uint32_t v, int s) {
  if (s > 31) return 0;
  const uint32_t q = v >> s, r = v & ((1u << s) - 1u), half = 1u << (s - 1);
  return q + (r > half || (r == half && (q & 1u)) ? 1u : 0u);
}

// f to an 8-bit float with E exponent bits (bias 2^(E-1) - 1) and M mantissa bits, nearest-even,
// magnitudes past the largest finite code (max_code) saturating to it; NaN to 0x7f (a NaN of both).
template <int E, int M>
TM_FP8_HD uint8_t encode(float f, uint32_t max_code) {
  uint32_t u;
  memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 24) & 0x80u;
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return 0x7f;
  if (u < 0x00800000u) return static_cast<uint8_t>(sign);  // zero and FP32 subnormals: far below FP8's
  constexpr int kBias = (1 << (E - 1)) - 1;
  const int e = static_cast<int>(u >> 23) - 127;
  const uint32_t mant = u & 0x7fffffu;
  uint32_t code;
  if (e < 1 - kBias) {
    // an FP8 subnormal: m * 2^(1 - bias - M), m = (1.mant * 2^e) / 2^(1 - bias - M) rounded; m = 2^M
    // is the smallest normal's code, as it should be
    code = shift_rne(mant | 0x800000u, 23 - M + (1 - kBias) - e);
  } else {
    code = shift_rne((static_cast<uint32_t>(e + kBias) << 23) | mant, 23 - M);  // a mantissa carry bumps the exponent
  }
  return static_cast<uint8_t>(sign | (code > max_code ? max_code : code));
}
}  // namespace fp8_detail

TM_FP8_HD uint8_t fp32_to_fp8_e4m3(float f) { return fp8_detail::encode<4, 3>(f, 0x7eu); }
TM_FP8_HD uint8_t fp32_to_fp8_e5m2(float f) { return fp8_detail::encode<5, 2>(f, 0x7bu); }

// The FP16 bit pattern of an E4M3 code's value / 256 (exact, subnormals included: both formats' fields
// line up once the exponent biases' difference, 8, is taken out of the value), and of an E5M2 code's
// value. The NaN code widens to a finite number; the cache never holds it.
TM_FP8_HD uint16_t fp8_e4m3_f16_bits_div256(uint8_t b) {
  return static_cast<uint16_t>(((b & 0x80u) << 8) | ((b & 0x7fu) << 7));
}
TM_FP8_HD uint16_t fp8_e5m2_f16_bits(uint8_t b) { return static_cast<uint16_t>(b << 8); }

}  // namespace tmill
