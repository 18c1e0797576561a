#include "kernels/attention.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"

namespace tmill {
namespace {

inline float load(const uint8_t* base, DType t, int64_t i) {
  switch (t) {
    case DType::F32: {
      float f;
      std::memcpy(&f, base + i * 4, 4);
      return f;
    }
    case DType::F16: {
      uint16_t h;
      std::memcpy(&h, base + i * 2, 2);
      return fp16_to_fp32(h);
    }
    default: {
      uint16_t h;
      std::memcpy(&h, base + i * 2, 2);
      return bf16_to_fp32(h);
    }
  }
}

inline void store(uint8_t* base, DType t, int64_t i, float f) {
  switch (t) {
    case DType::F32: std::memcpy(base + i * 4, &f, 4); break;
    case DType::F16: {
      uint16_t h = fp32_to_fp16(f);
      std::memcpy(base + i * 2, &h, 2);
      break;
    }
    default: {
      uint16_t h = fp32_to_bf16(f);
      std::memcpy(base + i * 2, &h, 2);
      break;
    }
  }
}

}  // namespace

void paged_kv_store(const PagedKvView& kv, const int32_t* block_table, int64_t pos, const float* k, const float* v) {
  const int64_t block = block_table[pos / kv.block_size], slot = pos % kv.block_size;
  const size_t es = kv.dtype == DType::F32 ? 4 : 2;
  for (int64_t h = 0; h < kv.n_head_kv; ++h) {
    const int64_t off = ((block * kv.n_head_kv + h) * kv.block_size + slot) * kv.head_dim;
    uint8_t* kd = const_cast<uint8_t*>(kv.k) + off * static_cast<int64_t>(es);
    uint8_t* vd = const_cast<uint8_t*>(kv.v) + off * static_cast<int64_t>(es);
    for (int64_t d = 0; d < kv.head_dim; ++d) {
      store(kd, kv.dtype, d, k[h * kv.head_dim + d]);
      store(vd, kv.dtype, d, v[h * kv.head_dim + d]);
    }
  }
}

void paged_attention_group(const float* q, int64_t group, int64_t kv_head, const PagedKvView& kv,
                           const int32_t* block_table, int64_t n_ctx, float scale, float* out) {
  const int64_t hd = kv.head_dim, bs = kv.block_size;
  const size_t es = kv.dtype == DType::F32 ? 4 : 2;
  std::vector<float> m(static_cast<size_t>(group), -INFINITY), l(static_cast<size_t>(group), 0.0f);
  std::vector<float> s(static_cast<size_t>(group * bs));
  std::memset(out, 0, sizeof(float) * static_cast<size_t>(group * hd));
  for (int64_t b = 0; b * bs < n_ctx; ++b) {
    const int64_t n = n_ctx - b * bs < bs ? n_ctx - b * bs : bs;
    const int64_t tile = (static_cast<int64_t>(block_table[b]) * kv.n_head_kv + kv_head) * bs * hd;
    const uint8_t* kt = kv.k + tile * static_cast<int64_t>(es);
    const uint8_t* vt = kv.v + tile * static_cast<int64_t>(es);
    for (int64_t g = 0; g < group; ++g) {
      const float* qg = q + g * hd;
      float mx = m[g];
      for (int64_t t = 0; t < n; ++t) {
        float dot = 0.0f;
        for (int64_t d = 0; d < hd; ++d) dot += qg[d] * load(kt, kv.dtype, t * hd + d);
        s[g * bs + t] = dot * scale;
        if (s[g * bs + t] > mx) mx = s[g * bs + t];
      }
      // rescale what was accumulated under the previous maximum
      const float corr = std::exp(m[g] - mx);
      float* og = out + g * hd;
      if (corr != 1.0f) {
        for (int64_t d = 0; d < hd; ++d) og[d] *= corr;
        l[g] *= corr;
      }
      m[g] = mx;
      for (int64_t t = 0; t < n; ++t) {
        const float p = std::exp(s[g * bs + t] - mx);
        l[g] += p;
        for (int64_t d = 0; d < hd; ++d) og[d] += p * load(vt, kv.dtype, t * hd + d);
      }
    }
  }
  for (int64_t g = 0; g < group; ++g) {
    const float inv = 1.0f / l[g];
    for (int64_t d = 0; d < hd; ++d) out[g * hd + d] *= inv;
  }
}

}  // namespace tmill
