#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/log.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "model/forward.h"
#include "model/reference.h"

namespace tmill {

void PreparedMoe::collect(const LayerWeights& L, std::vector<std::pair<const Matrix*, PreparedMatrix*>>& jobs) {
  const size_t n = L.up_exps.size();
  gate.resize(n);
  up.resize(n);
  down.resize(n);
  jobs.emplace_back(&L.ffn_gate_inp, &router);
  for (size_t e = 0; e < n; ++e) {
    if (!L.gate_exps.empty()) jobs.emplace_back(&L.gate_exps[e], &gate[e]);  // (nemotron_h_moe: none)
    jobs.emplace_back(&L.up_exps[e], &up[e]);
    jobs.emplace_back(&L.down_exps[e], &down[e]);
  }
  if (L.has_shared_expert()) {
    jobs.insert(jobs.end(), {{&L.up_shexp, &up_sh}, {&L.down_shexp, &down_sh}});
    if (L.gate_shexp.valid()) jobs.emplace_back(&L.gate_shexp, &gate_sh);
    shared = true;
    if (!L.gate_inp_shexp.empty()) gate_inp_shexp = &L.gate_inp_shexp;
  }
  if (!L.exp_probs_b.empty()) selection_bias = L.exp_probs_b.data();
  if (!L.down_exps_s.empty()) down_scale = L.down_exps_s.data();
  if (!L.ffn_gate_inp_b.empty()) {
    router_b = L.ffn_gate_inp_b.data();
    gate_b = L.gate_exps_b.data();
    up_b = L.up_exps_b.data();
    down_b = L.down_exps_b.data();
  }
}

uint64_t PreparedMoe::bytes() const {
  auto prepared = [](const PreparedMatrix& p) { return p.own_bytes() ? p.own_bytes() : p.source().bytes(); };
  uint64_t b = prepared(router) + prepared(gate_sh) + prepared(up_sh) + prepared(down_sh);
  for (size_t e = 0; e < up.size(); ++e) b += prepared(gate[e]) + prepared(up[e]) + prepared(down[e]);
  if (gate_inp_shexp) b += gate_inp_shexp->size() * sizeof(float);
  if (selection_bias) b += up.size() * sizeof(float);
  return b;
}

void moe_route_token(const float* logits, int64_t n_expert, int64_t k, bool norm, int32_t* experts, float* weights,
                     float* p, bool softmax_topk) {
  moe_route_token(logits, n_expert, k, ModelConfig::MoeGate{norm, softmax_topk}, nullptr, experts, weights, p);
}

void moe_route_token(const float* logits, int64_t n_expert, int64_t k, const ModelConfig::MoeGate& gate,
                     const float* selection_bias, int32_t* experts, float* weights, float* p) {
  // the reference's own softmax and sigmoid, so routing matches the oracle bit for bit
  std::copy(logits, logits + n_expert, p);
  if (gate.sigmoid)
    for (int64_t e = 0; e < n_expert; ++e) p[e] = 1.0f / (1.0f + std::exp(-p[e]));
  else if (!gate.softmax_topk)
    ref::softmax(p, n_expert);
  // the choice reads score + selection bias (glm4moe), the weights the score
  float* choice = p;
  if (selection_bias || gate.groups > 1 || gate.select_by_logit) {
    choice = p + n_expert;
    const float* src = gate.select_by_logit ? logits : p;  // llama4: the raw logits choose
    for (int64_t e = 0; e < n_expert; ++e) choice[e] = selection_bias ? src[e] + selection_bias[e] : src[e];
  }
  // top-k by repeated selection (k is small: 1..8 of 8..256 experts); taken ones are marked -inf
  // (scores are finite: probabilities, raw logits of softmax_topk, or biased sigmoids)
  constexpr float kTaken = -std::numeric_limits<float>::infinity();
  if (gate.groups > 1) {  // grouped routing: the experts outside the best groups are marked taken
    const int64_t per = n_expert / gate.groups;
    float score[64];  // (groups <= 64: checked at load)
    bool kept[64] = {};
    for (int64_t g = 0; g < gate.groups; ++g) {  // the sum of the group's two best, as the reference
      float a = kTaken, b = kTaken;
      for (int64_t e = g * per; e < (g + 1) * per; ++e) {
        if (choice[e] > a) b = a, a = choice[e];
        else if (choice[e] > b) b = choice[e];
      }
      score[g] = a + b;
    }
    for (int64_t i = 0; i < gate.groups_used; ++i) {
      int64_t best = -1;
      for (int64_t g = 0; g < gate.groups; ++g)
        if (!kept[g] && (best < 0 || score[g] > score[best])) best = g;
      kept[best] = true;
    }
    for (int64_t g = 0; g < gate.groups; ++g)
      if (!kept[g]) std::fill(choice + g * per, choice + (g + 1) * per, kTaken);
  }
  float wsum = 0.0f;
  for (int64_t j = 0; j < k; ++j) {
    int32_t best = -1;
    for (int64_t e = 0; e < n_expert; ++e)
      if (choice[e] != kTaken && (best < 0 || choice[e] > choice[best])) best = static_cast<int32_t>(e);
    experts[j] = best;
    weights[j] = p[best];
    wsum += p[best];
    choice[best] = kTaken;
  }
  if (gate.softmax_topk) ref::softmax(weights, k);  // over the chosen logits, in the reference's order
  if (gate.norm)
    for (int64_t j = 0; j < k; ++j) weights[j] /= std::max(wsum, 6.103515625e-5f);
  if (gate.scale != 1.0f)
    for (int64_t j = 0; j < k; ++j) weights[j] *= gate.scale;
  // ascending expert order: the order each token's outputs are summed in
  for (int64_t a = 1; a < k; ++a)
    for (int64_t b = a; b > 0 && experts[b - 1] > experts[b]; --b) {
      std::swap(experts[b - 1], experts[b]);
      std::swap(weights[b - 1], weights[b]);
    }
}

void swiglu_oai_rows(float* g, const float* u, const float* bg, const float* bu, int64_t m, int64_t F, float* tmp) {
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  for (int64_t r = 0; r < m; ++r) {
    float* gr = g + r * F;
    const float* ur = u + r * F;
    for (int64_t i = 0; i < F; ++i) gr[i] = std::min(gr[i] + bg[i], kLimit);
    exp_shift_scale(gr, 0.0f, -kAlpha, tmp, F);  // exp(-alpha x)
    for (int64_t i = 0; i < F; ++i) gr[i] = gr[i] / (1.0f + tmp[i]) * (std::clamp(ur[i] + bu[i], -kLimit, kLimit) + 1.0f);
  }
}

void MoeFfn::run(const ModelConfig& c, const PreparedMoe& w, const float* x, float* y, int64_t ld, int64_t n,
                 ThreadPool* pool, ActivationObserver* observer, const float* route_x) {
  const float* rx = route_x ? route_x : x;
  const int64_t E = c.n_embd, F = c.n_ff_exp, X = c.n_expert, K = c.n_expert_used;
  const auto NK = static_cast<size_t>(n * K);
  logits_.resize(static_cast<size_t>(n * X));
  const int n_threads = pool ? pool->size() : 1;
  probs_.resize(static_cast<size_t>(2 * X * n_threads));  // moe_route_token's scratch, one per thread
  expert_.resize(NK);
  weight_.resize(NK);
  slot_.resize(NK);
  count_.assign(static_cast<size_t>(X), 0);
  offset_.resize(static_cast<size_t>(X) + 1);
  // 1. route every token
  // (one token per product: the float GEMV path whatever the batch, so a token's routing is the same
  // bits alone or batched; the router is small next to the experts). Each token's softmax and top-k
  // run right after its product, on the same thread.
  auto pick = [&](int64_t t, int thread) {
    if (w.router_b) add_inplace(logits_.data() + t * X, w.router_b, X);
    moe_route_token(logits_.data() + t * X, X, K, c.moe_gate(), w.selection_bias, expert_.data() + t * K,
                    weight_.data() + t * K, probs_.data() + static_cast<int64_t>(thread) * 2 * X);
  };
  auto route = [&](int64_t t0, int64_t t1, int thread) {
    for (int64_t t = t0; t < t1; ++t) {
      matmul(w.router, rx + t * ld, ld, logits_.data() + t * X, X, 1, nullptr);
      pick(t, thread);
    }
  };
  if (n == 1) {
    matmul(w.router, rx, ld, logits_.data(), X, 1, pool);  // rows split over the pool, same bits
    pick(0, 0);
  } else if (pool) {
    pool->parallel_for(n, 1, route);
  } else {
    route(0, n, 0);
  }
  for (int64_t t = 0; t < n * K; ++t) ++count_[expert_[t]];
  // 2. group the (token, expert) pairs by expert: expert e's tokens are rows offset_[e].. of xg_
  offset_[0] = 0;
  active_.clear();
  for (int64_t e = 0; e < X; ++e) {
    offset_[e + 1] = offset_[e] + count_[e];
    if (count_[e]) active_.push_back(static_cast<int32_t>(e));
  }
  xg_.resize(NK * E);
  hg_.resize(NK * F);
  ug_.resize(NK * F);
  yg_.resize(NK * E);
  std::vector<int32_t>& fill = count_;  // reused as the running row index per expert
  for (int64_t e = 0; e < X; ++e) fill[e] = offset_[e];
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < K; ++j) slot_[t * K + j] = fill[expert_[t * K + j]]++;
  // the copies (n * K rows: 1 MiB per layer for OLMoE's 16-stream step) and the combination below
  // are split over the pool from kSplitTokens tokens on, so the other threads do not wait on them
  const bool before = c.moe_weight_before;  // llama4: each pair's weight scales its input row instead
  auto gather = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t j = 0; j < K; ++j) {
        float* row = xg_.data() + static_cast<int64_t>(slot_[t * K + j]) * E;
        std::memcpy(row, x + t * ld, static_cast<size_t>(E) * sizeof(float));
        if (before)
          for (int64_t i = 0; i < E; ++i) row[i] *= weight_[t * K + j];
      }
  };
  constexpr int64_t kSplitTokens = 8;
  if (pool && n >= kSplitTokens) pool->parallel_for(n, 4, gather);
  else gather(0, n, 0);
  // nemotron_h_moe's experts have no gate: down(act(up x)), the arch's activation (ReLU squared)
  const bool ungated = c.arch.moe_ungated;
  auto ungated_act = [&](float* h, int64_t count) {
    TM_ASSERT(c.arch.ffn_act == FfnActivation::ReluSqr, "ungated experts take ReLU squared");
    for (int64_t i = 0; i < count; ++i) h[i] = h[i] > 0.0f ? h[i] * h[i] : 0.0f;
  };
  // 3. shared expert (reads x, so before y is written)
  const bool shared = w.shared;
  if (shared) {
    const int64_t S = c.n_ff_shexp;
    hs_.resize(static_cast<size_t>(n * S));
    us_.resize(static_cast<size_t>(n * S));
    ys_.resize(static_cast<size_t>(n * E));
    gsh_.resize(static_cast<size_t>(n));
    const float* gv = w.gate_inp_shexp ? w.gate_inp_shexp->data() : nullptr;  // glm4moe's has no gate
    for (int64_t t = 0; t < n; ++t) {
      if (!gv) {
        gsh_[t] = 1.0f;
        continue;
      }
      float g = 0.0f;
      for (int64_t i = 0; i < E; ++i) g += gv[i] * x[t * ld + i];
      gsh_[t] = 1.0f / (1.0f + std::exp(-g));
    }
    if (ungated) {  // nemotron_h_moe: down(act(up x))
      matmul(w.up_sh, x, ld, hs_.data(), S, n, pool);
      ungated_act(hs_.data(), n * S);
      matmul(w.down_sh, hs_.data(), S, ys_.data(), E, n, pool);
    } else {
      const MatmulOutput gu[] = {{&w.gate_sh, hs_.data(), S}, {&w.up_sh, us_.data(), S}};
      matmul_many(gu, 2, x, ld, n, pool);
      matmul_swiglu(w.down_sh, hs_.data(), S, us_.data(), S, ys_.data(), E, n, pool);
    }
  }
  // 4. each active expert once, over its tokens. Few tokens (decode, small batches): the experts are
  // split over the pool, each one's products on one thread -- one fork/join per layer instead of two
  // per expert, which on a loaded machine cost more than the products (rows are independent, so the
  // bits are the same either way). Many tokens: each expert's rows split over the pool.
  const bool oai = w.gate_b != nullptr;  // gpt-oss: biases and the clamped SwiGLU, no fused product
  const bool gelu = c.arch.ffn_act == FfnActivation::GeluTanh;
  if (oai) tmp_.resize(static_cast<size_t>(F * n_threads));
  auto expert = [&](int32_t e, ThreadPool* p, int thread) {
    const int64_t r0 = offset_[e], m = offset_[e + 1] - offset_[e];
    if (ungated) {
      if (observer) observer->on_expert_matmul_input(w.up[e].source().name, e, X, xg_.data() + r0 * E, m, E);
      matmul(w.up[e], xg_.data() + r0 * E, E, hg_.data() + r0 * F, F, m, p);
      ungated_act(hg_.data() + r0 * F, m * F);
      if (observer) observer->on_expert_matmul_input(w.down[e].source().name, e, X, hg_.data() + r0 * F, m, F);
      matmul(w.down[e], hg_.data() + r0 * F, F, yg_.data() + r0 * E, E, m, p);
      return;
    }
    const MatmulOutput gu[] = {{&w.gate[e], hg_.data() + r0 * F, F}, {&w.up[e], ug_.data() + r0 * F, F}};
    if (observer) {  // as the dense FFN: gate and up see the rows, down sees SwiGLU's output
      for (const PreparedMatrix* pm : {&w.gate[e], &w.up[e]})
        observer->on_expert_matmul_input(pm->source().name, e, X, xg_.data() + r0 * E, m, E);
    }
    matmul_many(gu, 2, xg_.data() + r0 * E, E, m, p);
    if (oai) {
      swiglu_oai_rows(hg_.data() + r0 * F, ug_.data() + r0 * F, w.gate_b + e * F, w.up_b + e * F, m, F,
                      tmp_.data() + thread * F);
      if (observer) observer->on_expert_matmul_input(w.down[e].source().name, e, X, hg_.data() + r0 * F, m, F);
      matmul(w.down[e], hg_.data() + r0 * F, F, yg_.data() + r0 * E, E, m, p);
      for (int64_t r = 0; r < m; ++r) add_inplace(yg_.data() + (r0 + r) * E, w.down_b + e * E, E);
      return;
    }
    if (observer || gelu) {  // (gemma4's GeGLU experts: the activation apart)
      if (gelu) gelu_mul(hg_.data() + r0 * F, ug_.data() + r0 * F, m * F);
      else silu_mul(hg_.data() + r0 * F, ug_.data() + r0 * F, m * F);
      if (observer) observer->on_expert_matmul_input(w.down[e].source().name, e, X, hg_.data() + r0 * F, m, F);
      matmul(w.down[e], hg_.data() + r0 * F, F, yg_.data() + r0 * E, E, m, p);
      return;
    }
    matmul_swiglu(w.down[e], hg_.data() + r0 * F, F, ug_.data() + r0 * F, F, yg_.data() + r0 * E, E, m, p);
  };
  const auto n_active = static_cast<int64_t>(active_.size());
  if (n_threads > 1 && !observer && n <= 16 && (n_active >= 2 * n_threads || n_active % n_threads == 0)) {
    pool->parallel_for(n_active, 1, [&](int64_t a0, int64_t a1, int thread) {
      for (int64_t a = a0; a < a1; ++a) expert(active_[a], nullptr, thread);
    });
  } else {
    for (int32_t e : active_) expert(e, pool, 0);
  }
  // 5. y = sum of the weighted expert outputs (ascending expert), + the (gated) shared expert
  auto combine = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      float* yt = y + t * ld;
      std::fill(yt, yt + E, 0.0f);
      for (int64_t j = 0; j < K; ++j) {
        float wj = before ? 1.0f : weight_[t * K + j];
        if (w.down_scale) wj *= w.down_scale[expert_[t * K + j]];  // gemma4: the expert's own scale
        axpy(yt, yg_.data() + static_cast<int64_t>(slot_[t * K + j]) * E, wj, E);  // multiply, then add
      }
      if (shared) axpy(yt, ys_.data() + t * E, gsh_[t], E);
    }
  };
  if (pool && n >= kSplitTokens) pool->parallel_for(n, 4, combine);
  else combine(0, n, 0);
}

}  // namespace tmill
