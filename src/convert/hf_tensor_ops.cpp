#include "convert/hf_tensor_ops.h"

#include <algorithm>
#include <cstring>

#include "core/fp16.h"

namespace tmill {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::optional<DType> float_dtype(StDType t) {
  switch (t) {
    case StDType::F32: return DType::F32;
    case StDType::F16: return DType::F16;
    case StDType::BF16: return DType::BF16;
    default: return std::nullopt;
  }
}

namespace {

float load_float(const uint8_t* p, StDType t) {
  if (t == StDType::F32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return t == StDType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
}

void store_float(float v, DType t, uint8_t* p) {
  if (t == DType::F32) {
    std::memcpy(p, &v, 4);
    return;
  }
  const uint16_t h = t == DType::F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
  std::memcpy(p, &h, 2);
}

}  // namespace

Status gather(const Gather& g, DType out, uint8_t* dst, size_t nbytes) {
  const SafetensorsTensor& t = *g.src.tensor;
  const size_t in_esz = st_dtype_size(t.dtype), out_esz = out == DType::F32 ? 4 : 2;
  if (nbytes != static_cast<size_t>(g.n * g.rows * g.cols) * out_esz) return Error{"internal: tensor size mismatch"};
  const bool raw = float_dtype(t.dtype) == out;  // same type: copy bits
  constexpr int64_t kTile = 32;                    // tiles keep the transposed reads in cache
  for (int64_t e = 0; e < g.n; ++e) {
    const uint8_t* src = t.data + static_cast<size_t>(e * g.A * g.B) * in_esz;
    uint8_t* dm = dst + static_cast<size_t>(e * g.rows * g.cols) * out_esz;
    for (int64_t r0 = 0; r0 < g.rows; r0 += kTile) {
      for (int64_t c0 = 0; c0 < g.cols; c0 += kTile) {
        for (int64_t r = r0; r < std::min(r0 + kTile, g.rows); ++r) {
          const int64_t hr = g.r0 + r * g.step;
          for (int64_t c = c0; c < std::min(c0 + kTile, g.cols); ++c) {
            const uint8_t* s = src + static_cast<size_t>(g.transpose ? c * g.B + hr : hr * g.B + c) * in_esz;
            uint8_t* d = dm + static_cast<size_t>(r * g.cols + c) * out_esz;
            if (raw) std::memcpy(d, s, out_esz);
            else store_float(load_float(s, t.dtype), out, d);
          }
        }
      }
    }
  }
  return {};
}

Status repack_mxfp4(const Mxfp4Rows& m, uint8_t* dst, size_t nbytes) {
  if (nbytes != static_cast<size_t>(m.n * m.rows * m.G) * 17) return Error{"internal: tensor size mismatch"};
  const uint8_t* blocks = m.blocks.tensor->data;
  const uint8_t* scales = m.scales.tensor->data;
  for (int64_t e = 0; e < m.n; ++e) {
    for (int64_t r = 0; r < m.rows; ++r) {
      const int64_t hr = (e * m.R + m.r0 + r * m.step) * m.G;
      for (int64_t g = 0; g < m.G; ++g) {
        const uint8_t* in = blocks + static_cast<size_t>(hr + g) * 16;
        uint8_t* o = dst + static_cast<size_t>((e * m.rows + r) * m.G + g) * 17;
        o[0] = scales[hr + g];
        auto nib = [in](int k) { return static_cast<uint8_t>((in[k >> 1] >> ((k & 1) * 4)) & 0x0F); };
        for (int j = 0; j < 16; ++j) o[1 + j] = static_cast<uint8_t>(nib(j) | (nib(j + 16) << 4));
      }
    }
  }
  return {};
}

}  // namespace tmill
