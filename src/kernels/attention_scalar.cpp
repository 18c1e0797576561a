// The scalar attention kernel: any block size, head size and KV type. The oracle for the SIMD ones.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "core/log.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

// Element i of a K or V tile (K: i = d * bs + t, V: i = t * hd + d); int8 and fp8 tiles scale by token t,
// Q4 tiles by token t and the group of dimension d.
float load(const uint8_t* tile, int type, int64_t i, int64_t t, int64_t bs, int64_t hd, bool is_v) {
  switch (type) {
    case kKvF32: {
      float f;
      std::memcpy(&f, tile + i * 4, 4);
      return f;
    }
    case kKvF16: {
      uint16_t h;
      std::memcpy(&h, tile + i * 2, 2);
      return fp16_to_fp32(h);
    }
    case kKvBF16: {
      uint16_t h;
      std::memcpy(&h, tile + i * 2, 2);
      return bf16_to_fp32(h);
    }
    case kKvQ4: {
      const int64_t d = is_v ? i - t * hd : i / bs, gs = kv_q4_group(hd), ng = hd / gs;
      const uint8_t byte = is_v ? tile[t * (hd / 2) + d / 2] : tile[d * (bs / 2) + t / 2];
      const int q = ((is_v ? d : t) & 1) ? byte >> 4 : byte & 15;
      uint16_t h;
      std::memcpy(&h, tile + hd * bs / 2 + (is_v ? t * ng + d / gs : (d / gs) * bs + t) * 2, 2);
      return fp16_to_fp32(h) * static_cast<float>(q - 8);
    }
    default: {  // a byte code and a per-token scale
      float s;
      std::memcpy(&s, tile + hd * bs + t * 4, 4);
      if (type == kKvF8E4M3) return s * fp8_e4m3_to_fp32(tile[i]);
      if (type == kKvF8E5M2) return s * fp8_e5m2_to_fp32(tile[i]);
      return s * static_cast<float>(reinterpret_cast<const int8_t*>(tile)[i]);
    }
  }
}

}  // namespace

void attention_scalar(const AttnArgs& a) {
  TM_ASSERT(a.n_kv == 1, "the scalar attention kernel takes one KV head (run_attention splits runs)");
  constexpr int64_t kMaxGroup = 64;
  if (a.group > kMaxGroup) {  // (its per-head state lives on the stack: wider groups go in chunks)
    for (int64_t g0 = 0; g0 < a.group; g0 += kMaxGroup)
      attention_scalar(attn_group_chunk(a, g0, a.group - g0 < kMaxGroup ? a.group - g0 : kMaxGroup));
    return;
  }
  const int64_t hd = a.head_dim, bs = a.block_size, G = a.group;
  float m[kMaxGroup], l[kMaxGroup];
  for (int64_t g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
  }
  std::memset(a.out, 0, sizeof(float) * static_cast<size_t>(G * hd));
  for (int64_t b = a.ctx_begin / bs; b * bs < a.n_ctx; ++b) {
    const int64_t n = a.n_ctx - b * bs < bs ? a.n_ctx - b * bs : bs;
    const int64_t t0 = a.ctx_begin > b * bs ? a.ctx_begin - b * bs : 0;  // a window's first block starts inside
    const int64_t tile = kv_tile(a.block_table[b], a.n_head_kv, a.kv_head);
    const uint8_t* kt = a.k_base + tile * a.tile_bytes;
    const uint8_t* vt = a.v_base + tile * a.tile_bytes;
    for (int64_t g = 0; g < G; ++g) {
      const float* qg = a.q + g * hd;
      float s[1024];
      float mx = m[g];
      for (int64_t t = t0; t < n; ++t) {
        float dot = 0.0f;
        for (int64_t d = 0; d < hd; ++d) dot += qg[d] * load(kt, a.kv_type, d * bs + t, t, bs, hd, false);
        s[t] = dot * a.scale;
        if (a.softcap > 0) s[t] = a.softcap * std::tanh(s[t] / a.softcap);
        if (a.alibi) s[t] += a.alibi[g] * static_cast<float>(b * bs + t - (a.n_ctx - 1));
        if (s[t] > mx) mx = s[t];
      }
      // rescale what was accumulated under the previous maximum
      const float corr = std::exp(m[g] - mx);
      float* og = a.out + g * hd;
      for (int64_t d = 0; d < hd; ++d) og[d] *= corr;
      l[g] *= corr;
      m[g] = mx;
      for (int64_t t = t0; t < n; ++t) {
        const float p = std::exp(s[t] - mx);
        l[g] += p;
        for (int64_t d = 0; d < hd; ++d) og[d] += p * load(vt, a.kv_type, t * hd + d, t, bs, hd, true);
      }
    }
  }
  for (int64_t g = 0; g < G; ++g) {
    float inv = 1.0f / l[g];
    if (a.sinks) inv = sink_norm(m[g], l[g], a.sinks[g]);
    for (int64_t d = 0; d < hd; ++d) a.out[g * hd + d] *= inv;
  }
}

namespace {
bool covers_any(const AttnArgs& a) { return a.n_kv == 1; }  // any shape, one KV head at a time
}  // namespace

void add_attention_scalar(KernelTable& t) {
  t.attention_covers = covers_any;
  for (AttnFn& fn : t.attention) fn = attention_scalar;
}

}  // namespace tmill::kern
