#include "model/mamba2.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "core/log.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace tmill {

std::vector<float> ssm_conv_kernel_t(const ModelConfig& c, const LayerWeights& L) {
  const int64_t CD = c.ssm_conv_dim(), K = c.ssm_d_conv;
  std::vector<float> t(static_cast<size_t>(K * CD));
  for (int64_t ch = 0; ch < CD; ++ch)
    for (int64_t j = 0; j < K; ++j) t[static_cast<size_t>(j * CD + ch)] = L.conv_kernel[static_cast<size_t>(ch * K + j)];
  return t;
}

void ssm_causal_conv(const ModelConfig& c, const LayerWeights& L, const ForwardBatch& batch, const KvStorage& kv,
                     int64_t layer, const SsmStep& step, const float* in, int64_t ld_in, ThreadPool* pool) {
  const int64_t CD = c.ssm_conv_dim(), K = c.ssm_d_conv;
  TM_ASSERT(kv.layout().state_floats == c.ssm_state_floats(), "no sequence state in the KV layout");
  // Sequence by sequence, its channels split over the pool (a prompt is one sequence): the inputs
  // before the step come from the state (zero at position 0, where the whole state is reset), the
  // step's own from `in`; each channel's range then keeps its last K - 1 inputs in the state.
  for (const SeqSlice& s : batch.seqs) {
    if (s.n_tokens == 0) continue;
    float* state = kv.seq_state(layer, s.state_slot);
    if (s.pos_begin == 0) std::fill(state, state + c.ssm_state_floats(), 0.0f);
    const int64_t n = s.n_tokens;
    auto row = [&](int64_t r) {  // the inputs of the step's token r (negative: before the step)
      return r < 0 ? state + (K - 1 + r) * CD : in + (s.token_begin + r) * ld_in;
    };
    auto body = [&](int64_t c0, int64_t c1) {
      for (int64_t t = 0; t < n; ++t) {  // token by token, the range's channels contiguous
        float* o = step.conv + (s.token_begin + t) * CD;
        std::fill(o + c0, o + c1, 0.0f);
        for (int64_t j = 0; j < K; ++j) {  // llama.cpp's order: the oldest input first, then the bias
          const float* x = row(t - (K - 1) + j);
          const float* kj = step.kernel_t + j * CD;
          for (int64_t ch = c0; ch < c1; ++ch) o[ch] += x[ch] * kj[ch];
        }
        if (!L.ssm_conv_b.empty())
          for (int64_t ch = c0; ch < c1; ++ch) o[ch] += L.ssm_conv_b[static_cast<size_t>(ch)];
        silu_mul(o + c0, step.ones + c0, c1 - c0);
      }
      for (int64_t j = 0; j < K - 1; ++j) {  // the new state: the last K - 1 inputs, oldest first
        const float* x = row(n - (K - 1) + j);
        std::copy(x + c0, x + c1, state + j * CD + c0);
      }
    };
    if (pool && CD >= 256) pool->parallel_for(CD, 256, [&](int64_t a, int64_t b, int) { body(a, b); });
    else body(0, CD);
  }
}

void mamba2_mix(const ModelConfig& c, const LayerWeights& L, const ForwardBatch& batch, const KvStorage& kv,
                int64_t layer, const SsmStep& step, const float* zx, float* y, int64_t n, ThreadPool* pool) {
  const int64_t DI = c.ssm_d_inner, CD = c.ssm_conv_dim(), IN = c.ssm_in_dim(), K = c.ssm_d_conv;
  const int64_t H = c.ssm_n_head, HD = c.ssm_head_dim(), G = c.ssm_n_group, DS = c.ssm_d_state;
  const int64_t per_group = H / G;
  auto parallel = [&](int64_t count, const std::function<void(int64_t, int64_t)>& fn) {
    if (pool && count > 1) pool->parallel_for(count, 1, [&](int64_t a, int64_t b, int) { fn(a, b); });
    else fn(0, count);
  };
  const auto n_seqs = static_cast<int64_t>(batch.seqs.size());
  // 1. The convolution (its inputs: xBC, after z in each row).
  ssm_causal_conv(c, L, batch, kv, layer, step, zx + DI, IN, pool);
  // 2. The scan, per (sequence, head), token after token.
  parallel(n_seqs * H, [&](int64_t i0, int64_t i1) {
    for (int64_t item = i0; item < i1; ++item) {
      const SeqSlice& s = batch.seqs[static_cast<size_t>(item / H)];
      const int64_t h = item % H, g = h / per_group;
      if (s.n_tokens == 0) continue;
      float* S = kv.seq_state(layer, s.state_slot) + (K - 1) * CD + h * HD * DS;
      const float A = L.ssm_a[static_cast<size_t>(h)], D = L.ssm_d[static_cast<size_t>(h)];
      for (int64_t t = s.token_begin; t < s.token_begin + s.n_tokens; ++t) {
        const float* xbc = step.conv + t * CD;
        const float* x = xbc + h * HD;
        const float* B = xbc + DI + g * DS;
        const float* C = xbc + DI + G * DS + g * DS;
        const float dt = ssm_softplus(zx[t * IN + DI + CD + h] + L.ssm_dt_b[static_cast<size_t>(h)]);
        const float dA = std::exp(dt * A);
        float* yo = y + t * DI + h * HD;
        for (int64_t i = 0; i < HD; ++i) yo[i] = ssm_scan_row(S + i * DS, B, C, dA, x[i] * dt, DS) + x[i] * D;
      }
    }
  });
  // 3. The gate and the grouped norm, row by row.
  parallel(n, [&](int64_t t0, int64_t t1) {
    const int64_t W = DI / G;
    for (int64_t t = t0; t < t1; ++t) {
      float* yo = y + t * DI;
      const float* z = zx + t * IN;
      for (int64_t i = 0; i < DI; ++i) yo[i] *= z[i] / (1.0f + std::exp(-z[i]));
      if (!L.ssm_norm.empty())  // (falcon-h1 may have none)
        for (int64_t g = 0; g < G; ++g)
          rmsnorm_rows(yo + g * W, W, L.ssm_norm.data() + g * W, yo + g * W, W, 1, W, c.rms_eps);
    }
  });
}

}  // namespace tmill
