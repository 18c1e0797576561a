// Scalar IEEE half and bfloat16 conversions (round to nearest even), bit-exact with F16C
// hardware and ggml. `static inline` on purpose: ISA-specific files may include this header
// without an ODR clash (each translation unit keeps its own copy).
#pragma once

#include <cstdint>
#include <cstring>

namespace tmill {

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
static inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

static inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;  // mant * 2^-24
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

static inline uint16_t fp32_to_fp16(float f) {
  uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // inf / nan (keep nan quiet and non-zero)
    return static_cast<uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? (0x200u | ((a >> 13) & 0x3ffu)) : 0u));
  }
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (a < 0x38800000u) {  // result is subnormal or zero: let the FPU round at 2^-24 granularity
    const float t = f32_from_bits(a) + 0.5f;
    return static_cast<uint16_t>(sign | (f32_bits(t) - 0x3f000000u));
  }
  const uint32_t odd = (a >> 13) & 1u;
  a += 0xc8000fffu + odd;  // rebias exponent by -112 and round to nearest even
  return static_cast<uint16_t>(sign | (a >> 13));
}

static inline float bf16_to_fp32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

// FP8 as Hugging Face FP8 checkpoints store it (torch.float8_e4m3fn, float8_e5m2): E4M3 "fn" (exponent
// bias 7, subnormals, no infinities, S.1111.111 the NaN) and E5M2 (FP16's upper byte). Exact.
static inline float fp8_e4m3_to_fp32(uint8_t b) {
  const uint32_t s = static_cast<uint32_t>(b >> 7) << 31, e = (b >> 3) & 15u, m = b & 7u;
  if (e == 15 && m == 7) return f32_from_bits(s | 0x7fc00000u);
  if (e == 0) return f32_from_bits(s | f32_bits(static_cast<float>(m) * 0.001953125f));  // m / 8 * 2^-6
  return f32_from_bits(s | ((e + 120u) << 23) | (m << 20));
}
static inline float fp8_e5m2_to_fp32(uint8_t b) { return fp16_to_fp32(static_cast<uint16_t>(b << 8)); }

static inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 64u);  // quiet nan
  return static_cast<uint16_t>((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

}  // namespace tmill
