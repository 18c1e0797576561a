#include "model/gated_delta_net.h"

#include <cmath>
#include <functional>

#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace tmill {

void gated_delta_net_mix(const ModelConfig& c, const LayerWeights& L, const ForwardBatch& batch, const KvStorage& kv,
                         int64_t layer, const SsmStep& step, const float* in, float* y, int64_t n, ThreadPool* pool) {
  const int64_t CD = c.ssm_conv_dim(), DI = c.ssm_d_inner, W = gdn_in_dim(c), K = c.ssm_d_conv;
  const int64_t H = c.ssm_n_head, HK = c.ssm_n_group, D = c.ssm_d_state;
  auto parallel = [&](int64_t count, const std::function<void(int64_t, int64_t)>& fn) {
    if (pool && count > 1) pool->parallel_for(count, 1, [&](int64_t a, int64_t b, int) { fn(a, b); });
    else fn(0, count);
  };
  // 1. The convolution of qkv, then q and k L2-normed per key head.
  ssm_causal_conv(c, L, batch, kv, layer, step, in, W, pool);
  float* qkv = step.conv;
  parallel(n, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = 0; h < 2 * HK; ++h) {  // the q heads, then the k heads
        float* x = qkv + t * CD + h * D;
        float ss = 0.0f;
        for (int64_t i = 0; i < D; ++i) ss += x[i] * x[i];
        const float r = 1.0f / std::sqrt(ss + c.rms_eps);
        for (int64_t i = 0; i < D; ++i) x[i] *= r;
      }
  });
  // 2. The delta rule, per (sequence, value head), token after token.
  const auto n_seqs = static_cast<int64_t>(batch.seqs.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  parallel(n_seqs * H, [&](int64_t i0, int64_t i1) {
    for (int64_t item = i0; item < i1; ++item) {
      const SeqSlice& s = batch.seqs[static_cast<size_t>(item / H)];
      const int64_t h = item % H, hk = c.gdn_key_head(h);
      if (s.n_tokens == 0) continue;
      float* S = kv.seq_state(layer, s.state_slot) + (K - 1) * CD + h * D * D;  // row j: value dim j
      for (int64_t t = s.token_begin; t < s.token_begin + s.n_tokens; ++t) {
        const float* q = qkv + t * CD + hk * D;
        const float* k = qkv + t * CD + (HK + hk) * D;
        const float* v = qkv + t * CD + 2 * HK * D + h * D;
        const float* row = in + t * W;
        const float decay =
            std::exp(ssm_softplus(row[CD + DI + H + h] + L.ssm_dt_b[static_cast<size_t>(h)]) * L.ssm_a[static_cast<size_t>(h)]);
        const float b = 1.0f / (1.0f + std::exp(-row[CD + DI + h]));
        delta_rule_step(S, q, k, v, decay, b, scale, y + t * DI + h * D, D);
      }
    }
  });
  // 3. The norm per head and the gate.
  parallel(n, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = y + t * DI;
      rmsnorm_rows(o, D, L.ssm_norm.data(), o, D, H, D, c.rms_eps);
      const float* z = in + t * W + CD;
      for (int64_t i = 0; i < DI; ++i) o[i] *= z[i] / (1.0f + std::exp(-z[i]));
    }
  });
}

}  // namespace tmill
