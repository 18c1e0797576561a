// The attention kernel tests' paged KV cache and float64 oracle: a cache of random K/V for n_ctx
// positions in scrambled blocks, and softmax(q K^T * scale + bias) V over the values it holds.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/attention.h"

namespace tmill::test {

struct PagedCache {
  PagedKvView view;
  std::vector<uint8_t> k, v;
  std::vector<int32_t> table;
};

inline PagedCache make_paged_cache(DType t, int64_t n_head_kv, int64_t hd, int64_t bs, int64_t n_ctx, std::mt19937& rng) {
  PagedCache c;
  const int64_t blocks = (n_ctx + bs - 1) / bs;
  const int64_t pool = blocks * 2 + 3;
  const size_t tb = kv_tile_bytes(t, hd, bs);
  c.k.assign(static_cast<size_t>(pool * n_head_kv) * tb, 0);
  c.v.assign(c.k.size(), 0);
  c.view = {c.k.data(), c.v.data(), t, n_head_kv, bs, hd};
  for (int64_t b = 0; b < blocks; ++b) c.table.push_back(static_cast<int32_t>((b * 5 + 2) % pool));  // scrambled
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> k(static_cast<size_t>(n_head_kv * hd)), v(k.size());
  for (int64_t p = 0; p < n_ctx; ++p) {
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    paged_kv_store(c.view, c.table.data(), p, k.data(), v.data());
  }
  return c;
}

// In double precision, for `group` query heads q of KV head `head` over positions [mask.begin, n_ctx):
// scores q.k * scale, soft-capped (mask.softcap > 0), plus slope * (p - (n_ctx - 1)) (mask.alibi), with
// each head's sink logit in the denominator (mask.sinks).
inline std::vector<double> naive_attention(const PagedCache& c, const float* q, int64_t group, int64_t head, int64_t n_ctx,
                                           float scale, AttnMask mask = {}) {
  const int64_t hd = c.view.head_dim;
  std::vector<double> out(static_cast<size_t>(group * hd), 0.0);
  std::vector<float> k(hd), v(hd);
  for (int64_t g = 0; g < group; ++g) {
    std::vector<double> s(n_ctx, 0.0);
    double mx = mask.sinks ? mask.sinks[g] : -1e300;
    for (int64_t p = mask.begin; p < n_ctx; ++p) {
      paged_kv_load(c.view, c.table.data(), p, head, k.data(), v.data());
      double d = 0;
      for (int64_t i = 0; i < hd; ++i) d += double(q[g * hd + i]) * k[i];
      s[p] = d * scale;
      if (mask.softcap > 0) s[p] = mask.softcap * std::tanh(s[p] / mask.softcap);
      if (mask.alibi) s[p] += double(mask.alibi[g]) * double(p - (n_ctx - 1));
      mx = std::max(mx, s[p]);
    }
    double sum = mask.sinks ? std::exp(mask.sinks[g] - mx) : 0.0;
    for (int64_t p = mask.begin; p < n_ctx; ++p) sum += (s[p] = std::exp(s[p] - mx));
    for (int64_t p = mask.begin; p < n_ctx; ++p) {
      paged_kv_load(c.view, c.table.data(), p, head, k.data(), v.data());
      for (int64_t i = 0; i < hd; ++i) out[g * hd + i] += s[p] / sum * v[i];
    }
  }
  return out;
}

}  // namespace tmill::test
