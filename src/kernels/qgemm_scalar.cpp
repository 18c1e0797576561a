// Portable kernels over the packed layouts (kernels/kernel_abi.h): activation quantizers and the
// quantized GEMM for every packed kind. Used on CPUs without AVX2 and as the readable
// specification the SIMD versions follow (same integer math, same per-block float scaling).
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/kernel_table.h"
#include "quant/blocks.h"

namespace tmill::kern {
namespace {

float f16(const uint8_t* p, int i) {
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return fp16_to_fp32(h);
}
template <class V>
V ld(const uint8_t* p, int64_t i) {
  V v;
  std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(V)), sizeof(V));
  return v;
}
template <class V>
void st(uint8_t* p, int64_t i, V v) {
  std::memcpy(p + i * static_cast<int64_t>(sizeof(V)), &v, sizeof(V));
}

// Dot of the 32 levels stored as nibble chunks (row r) with 32 int8 activations; `h`/`h2` add the
// fifth bits (Q5) or the high 2 bits (Q6_K) when non-null.
int dot_nibbles(const uint8_t* n, const uint8_t* h, const uint8_t* h2, int r, const int8_t* x) {
  int s = 0;
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 4; ++i) {
      const uint8_t byte = n[(c * 16 + r) * 4 + i];
      int lo = byte & 0xF, hi = byte >> 4;
      if (h) {
        lo |= ((h[r * 4 + i] >> c) & 1) << 4;
        hi |= ((h[r * 4 + i] >> (c + 4)) & 1) << 4;
      }
      if (h2) {
        lo |= ((h2[r * 4 + i] >> (2 * c)) & 3) << 4;
        hi |= ((h2[(16 + r) * 4 + i] >> (2 * c)) & 3) << 4;
      }
      s += lo * x[4 * c + i] + hi * x[16 + 4 * c + i];
    }
  return s;
}

// Dot of the 32 non-linear levels (IQ4_NL / IQ4_XS indices, MXFP4 codes with `values` =
// kMxfp4Values; nibble chunks, row r) with 32 int8 activations; `offset` is added to every level
// (128: the unsigned bytes a SIMD kernel multiplies).
int dot_iq4(const uint8_t* n, int r, const int8_t* x, int offset, const int8_t* values = kIq4nlValues) {
  int s = 0;
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 4; ++i) {
      const uint8_t byte = n[(c * 16 + r) * 4 + i];
      s += (values[byte & 0xF] + offset) * x[4 * c + i] + (values[byte >> 4] + offset) * x[16 + 4 * c + i];
    }
  return s;
}

// Q2_K / Q3_K: the unsigned level (0..3, or 0..7 with the third bit) of element e (0..255) of row r.
template <int Kind>
int level_k23(const uint8_t* gb, int r, int e) {
  const int s = e / 32, k = (e % 32) / 16, c = (e % 16) / 4, i = e % 4;
  const uint8_t* slice = gb + (Kind == kPackQ2_K ? 320 + 128 * s : 288 + 192 * s);
  int q = (slice[64 * k + r * 4 + i] >> (2 * c)) & 3;
  if (Kind == kPackQ3_K) q |= ((slice[128 + r * 4 + i] >> (4 * k + c)) & 1) << 2;
  return q;
}

// The loops both GEMMs share: for each real row r of the groups [g0, g1) and token t < T, the weight
// blocks in order into one float: block(gb, rec, r, t, acc) adds block b's part, gb being its
// group-block and rec the tile's record of it (record_bytes per token).
template <int Kind, class Block>
void gemm_blocks(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act, int T, float* y,
                 int64_t ldy, int64_t rows, int64_t record_bytes, Block&& block) {
  const int64_t gbb = kGroupBlockBytes[Kind];
  for (int64_t g = g0; g < g1; ++g) {
    for (int r = 0; r < kRows && g * kRows + r < rows; ++r) {
      for (int t = 0; t < T; ++t) {
        float acc = 0;
        for (int64_t b = 0; b < nb; ++b) block(w + (g * nb + b) * gbb, act + b * T * record_bytes, r, t, acc);
        y[t * ldy + g * kRows + r] = acc;
      }
    }
  }
}

template <int Kind>
void gemm_legacy(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act, int T, float* y,
                 int64_t ldy, int64_t rows) {
  const bool has_min = Kind == kPackQ4_1 || Kind == kPackQ5_1;
  gemm_blocks<Kind>(w, nb, g0, g1, act, T, y, ldy, rows, kQ8RecordBytes,
                    [T](const uint8_t* gb, const uint8_t* rec, int r, int t, float& acc) {
    const auto* x = reinterpret_cast<const int8_t*>(rec + 32 * t);
    const float dx = ld<float>(rec + T * 32, t);
    const int32_t bias = ld<int32_t>(rec + T * 36, t);
    int s = 0;
    switch (Kind) {
      case kPackQ8_0:
        for (int c = 0; c < 8; ++c)
          for (int i = 0; i < 4; ++i) s += gb[32 + (c * 16 + r) * 4 + i] * x[4 * c + i];
        break;
      case kPackQ4_0: s = dot_nibbles(gb + 32, nullptr, nullptr, r, x); break;
      case kPackQ4_1: s = dot_nibbles(gb + 64, nullptr, nullptr, r, x); break;
      case kPackQ5_0: s = dot_nibbles(gb + 96, gb + 32, nullptr, r, x); break;
      case kPackQ5_1: s = dot_nibbles(gb + 128, gb + 64, nullptr, r, x); break;
      case kPackIQ4_NL: s = dot_iq4(gb + 32, r, x, 128); break;  // + bias (-128 * sum x): the signed dot
      case kPackMXFP4: s = dot_iq4(gb + 16, r, x, 128, kMxfp4Values); break;
    }
    if (Kind == kPackMXFP4) {
      acc += static_cast<float>(s + bias) * dx * mxfp4_half_scale(gb[r]);  // E8M0 bytes
    } else if (has_min) {
      acc += static_cast<float>(s) * dx * f16(gb, r);
      acc += f16(gb + 32, r) * (dx * static_cast<float>(bias));
    } else {
      acc += static_cast<float>(s + bias) * dx * f16(gb, r);
    }
  });
}

template <int Kind>
void gemm_kquant(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act, int T, float* y,
                 int64_t ldy, int64_t rows) {
  gemm_blocks<Kind>(w, nb, g0, g1, act, T, y, ldy, rows, kQ8KRecordBytes,
                    [T](const uint8_t* gb, const uint8_t* rec, int r, int t, float& acc) {
    const auto* x = reinterpret_cast<const int8_t*>(rec + 256 * t);
    const float dx = ld<float>(rec + T * 256, t);
    if (Kind == kPackQ2_K || Kind == kPackQ3_K) {
      // Per 16-column sub-block j: the integer dot of the unsigned levels, times the row's scale.
      // The record's bias16_j = -32 * (sum of x over j) gives Q3_K's zero point 4 (bias16 / 8) and
      // Q2_K's min term (sum of x = -bias16 / 32, times the 4-bit min).
      int s = 0, ms = 0;
      for (int j = 0; j < 16; ++j) {
        int dot = 0;
        for (int e = 16 * j; e < 16 * j + 16; ++e) dot += level_k23<Kind>(gb, r, e) * x[e];
        const int32_t bias = ld<int32_t>(rec + T * 276, t * 16 + j);
        if (Kind == kPackQ2_K) {
          const uint8_t sm = gb[64 + ((j / 2) * 16 + r) * 2 + j % 2];
          s += (sm & 0xF) * dot;
          ms += (sm >> 4) * (-bias / 32);
        } else {
          s += static_cast<int8_t>(gb[32 + j * 16 + r]) * (dot + bias / 8);
        }
      }
      if (Kind == kPackQ2_K) acc += dx * (f16(gb, r) * static_cast<float>(s) - f16(gb + 32, r) * static_cast<float>(ms));
      else acc += dx * f16(gb, r) * static_cast<float>(s);
    } else if (Kind == kPackIQ4_XS) {
      // Signed levels; per sub-block sum of x * values, times the row's signed sub-block scale.
      int s = 0;
      for (int j = 0; j < 8; ++j) s += static_cast<int8_t>(gb[32 + j * 16 + r]) * dot_iq4(gb + 160 + 256 * j, r, x + 32 * j, 0);
      acc += dx * f16(gb, r) * static_cast<float>(s);
    } else if (Kind == kPackQ6_K) {
      int s = 0;
      for (int sl = 0; sl < 8; ++sl) {
        // dot_nibbles mixes both 16-element halves; split them to apply two scales.
        int lo = 0, hi = 0;
        const uint8_t* n = gb + 288 + 384 * sl;
        const uint8_t* h2 = gb + 544 + 384 * sl;
        for (int c = 0; c < 4; ++c)
          for (int i = 0; i < 4; ++i) {
            const uint8_t byte = n[(c * 16 + r) * 4 + i];
            const int ql = (byte & 0xF) | (((h2[r * 4 + i] >> (2 * c)) & 3) << 4);
            const int qh = (byte >> 4) | (((h2[(16 + r) * 4 + i] >> (2 * c)) & 3) << 4);
            lo += ql * x[32 * sl + 4 * c + i];
            hi += qh * x[32 * sl + 16 + 4 * c + i];
          }
        const int j = 2 * sl;
        lo += ld<int32_t>(rec + T * 276, t * 16 + j);
        hi += ld<int32_t>(rec + T * 276, t * 16 + j + 1);
        s += lo * static_cast<int8_t>(gb[32 + j * 16 + r]) + hi * static_cast<int8_t>(gb[32 + (j + 1) * 16 + r]);
      }
      acc += dx * f16(gb, r) * static_cast<float>(s);
    } else {
      int s = 0, ms = 0;
      for (int j = 0; j < 8; ++j) {
        const uint8_t* h = Kind == kPackQ5_K ? gb + 576 + 320 * j : nullptr;
        const uint8_t* n = gb + 320 + (Kind == kPackQ5_K ? 320 : 256) * j;
        s += gb[64 + j * 16 + r] * dot_nibbles(n, h, nullptr, r, x + 32 * j);
        const int m = gb[192 + ((j / 2) * 16 + r) * 2 + (j % 2)];
        ms += m * ld<int16_t>(rec + T * 260, t * 8 + j);
      }
      acc += dx * (f16(gb, r) * static_cast<float>(s) - f16(gb + 32, r) * static_cast<float>(ms));
    }
  });
}

}  // namespace

void quant_act_q8_scalar(const float* x, int64_t ldx, int T, int64_t cols, int offset, uint8_t* records) {
  for_each_record(x, ldx, T, cols, 32, kQ8RecordBytes, records, [&](const float* xs, int t, uint8_t* rec) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(xs[i]));
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      const int q = static_cast<int>(std::lrintf(xs[i] * id));
      rec[32 * t + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
      sum += q;
    }
    st<float>(rec + T * 32, t, amax / 127.0f);
    st<int32_t>(rec + T * 36, t, -offset * sum);
  });
}

void quant_act_q8k_scalar(const float* x, int64_t ldx, int T, int64_t cols, uint8_t* records) {
  for_each_record(x, ldx, T, cols, 256, kQ8KRecordBytes, records, [&](const float* xs, int t, uint8_t* rec) {
    float amax = 0;
    for (int i = 0; i < 256; ++i) amax = std::fmax(amax, std::fabs(xs[i]));
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    auto* q = reinterpret_cast<int8_t*>(rec + 256 * t);
    for (int i = 0; i < 256; ++i) q[i] = static_cast<int8_t>(std::lrintf(xs[i] * id));
    st<float>(rec + T * 256, t, amax / 127.0f);
    for (int j = 0; j < 16; ++j) {
      int s = 0;
      for (int i = 0; i < 16; ++i) s += q[16 * j + i];
      st<int32_t>(rec + T * 276, t * 16 + j, -32 * s);
      if (j % 2 == 0) {
        for (int i = 16; i < 32; ++i) s += q[16 * j + i];
        st<int16_t>(rec + T * 260, t * 8 + j / 2, static_cast<int16_t>(s));
      }
    }
  });
}

void add_qgemm_scalar(KernelTable& t) {
  t.quant_act_q8 = quant_act_q8_scalar;
  t.quant_act_q8k = quant_act_q8k_scalar;
  for_each_kind<kPackQ8_0, kPackQ4_0, kPackQ4_1, kPackQ5_0, kPackQ5_1, kPackIQ4_NL, kPackMXFP4>(
      [&](auto k) { t.qgemm[k.value] = gemm_legacy<decltype(k)::value>; });
  for_each_kind<kPackQ4_K, kPackQ5_K, kPackQ6_K, kPackIQ4_XS, kPackQ2_K, kPackQ3_K>(
      [&](auto k) { t.qgemm[k.value] = gemm_kquant<decltype(k)::value>; });
}

}  // namespace tmill::kern
