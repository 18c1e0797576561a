#include "model/mamba1.h"

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "model/mamba2.h"

namespace tmill {

void mamba1_scan(const ModelConfig& c, const LayerWeights& L, const ForwardBatch& batch, const KvStorage& kv,
                 int64_t layer, const float* xc, const float* xdb, int64_t ld_xdb, const float* dt, const float* zx,
                 float* y, ThreadPool* pool) {
  const int64_t DI = c.ssm_d_inner, DS = c.ssm_d_state, R = c.ssm_dt_rank, K = c.ssm_d_conv;
  const int64_t CD = c.ssm_conv_dim();  // (= d_inner: no groups)
  // (sequence, block of channels): the channels of a sequence are independent, token after token
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (DI + kBlock - 1) / kBlock;
  const auto items = static_cast<int64_t>(batch.seqs.size()) * blocks;
  auto body = [&](int64_t i0, int64_t i1) {
    for (int64_t item = i0; item < i1; ++item) {
      const SeqSlice& s = batch.seqs[static_cast<size_t>(item / blocks)];
      if (s.n_tokens == 0) continue;
      const int64_t c0 = (item % blocks) * kBlock, c1 = std::min(DI, c0 + kBlock);
      float* states = kv.seq_state(layer, s.state_slot) + (K - 1) * CD;
      for (int64_t t = s.token_begin; t < s.token_begin + s.n_tokens; ++t) {
        const float* B = xdb + t * ld_xdb + R;
        const float* C = B + DS;
        for (int64_t i = c0; i < c1; ++i) {
          const float d = ssm_softplus(dt[t * DI + i] + L.ssm_dt_b[static_cast<size_t>(i)]);
          const float x = xc[t * DI + i];
          float v = ssm_scan_row_decay(states + i * DS, L.ssm_a.data() + i * DS, B, C, d, x * d, DS);
          v += x * L.ssm_d[static_cast<size_t>(i)];
          const float z = zx[t * 2 * DI + DI + i];
          y[t * DI + i] = v * (z / (1.0f + std::exp(-z)));
        }
      }
    }
  };
  if (pool && items > 1) pool->parallel_for(items, 1, [&](int64_t a, int64_t b, int) { body(a, b); });
  else body(0, items);
}

}  // namespace tmill
