// An independent float64 implementation of the transformer math, used only to check that the
// float32 reference forward computes the right thing (not just the same thing as itself).
#pragma once

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "model/model.h"
#include "quant/quant.h"

namespace tmill::test {

class F64Forward {
 public:
  // n_ctx: the context length that picks LongRoPE's short or long factors (as ReferenceForward's max_seq).
  explicit F64Forward(const Model& m, int64_t n_ctx = 64) : m_(m), c_(m.config()), ff_(m.weights().rope_freq_factors(c_, n_ctx)) {
    kc_.resize(2 * c_.n_layer);  // (falcon-h1: a layer's mixer histories after the n_layer attention ones)
    vc_.resize(2 * c_.n_layer);
  }

  std::vector<double> forward(int32_t token, int64_t pos) {
    const auto& w = m_.weights();
    std::vector<double> x = row(w.token_embd, token);
    for (double& e : x) e *= c_.embd_scale;  // gemma: sqrt(n_embd)
    if (w.pos_embd.valid()) {  // gpt2, starcoder: + the position's learned embedding
      const auto p = row(w.pos_embd, static_cast<int32_t>(pos));
      for (size_t i = 0; i < x.size(); ++i) x[i] += p[i];
    }
    if (!w.embd_norm.empty()) x = norm(x, w.embd_norm, w.embd_norm_b);  // bloom
    // gemma4's per-layer inputs: (norm(proj x / sqrt(n_embd)) + row * sqrt(PL)) / sqrt(2), per layer
    const int64_t PL = c_.n_embd_per_layer;
    std::vector<double> pl;
    if (PL > 0) {
      pl = mv(w.per_layer_model_proj, x);
      const auto tok = row(w.per_layer_tok_embd, token);
      for (int64_t l = 0; l < c_.n_layer; ++l) {
        std::vector<double> s(pl.begin() + l * PL, pl.begin() + (l + 1) * PL);
        for (double& e : s) e /= std::sqrt(static_cast<double>(c_.n_embd));
        s = rms(s, w.per_layer_proj_norm);
        for (int64_t i = 0; i < PL; ++i) pl[l * PL + i] = (s[i] + tok[l * PL + i] * std::sqrt(static_cast<double>(PL))) / std::sqrt(2.0);
      }
    }
    for (int64_t l = 0; l < c_.n_layer; ++l) {
      const LayerWeights& L = w.layers[l];
      // (gemma4: each layer its own head size, K/V heads and RoPE dims)
      hd_ = c_.head_dim_of(l), rot_ = c_.n_rot_of(l);
      const bool roped = c_.has_rope(l);  // smollm3: NoPE layers
      const RopeParams& rp = c_.ropes[roped ? static_cast<size_t>(c_.layer_attn[static_cast<size_t>(l)].rope) : 0];
      const double rs = c_.residual_scale;  // granite
      const LayerAttention& la = c_.layer_attn[static_cast<size_t>(l)];
      const int64_t first = la.window > 0 ? std::max<int64_t>(0, pos + 1 - la.window)
                            : la.chunk > 0 ? pos / la.chunk * la.chunk  // llama4's chunks
                                           : 0;
      auto xb = L.attn_norm.empty() ? x : norm(x, L.attn_norm, L.attn_norm_b);  // olmo2: no pre-norm
      // the parallel FFN's input: the attention's, or its own norm of the layer's input (gptneox, falcon-40b)
      const auto xn = c_.arch.parallel_block && !L.ffn_norm.empty() ? norm(x, L.ffn_norm, L.ffn_norm_b) : xb;
      if (c_.is_conv(l)) {  // lfm2: out_proj(c * sum_j kernel_j * (b * x)(pos - K + 1 + j)), zero before 0
        const int64_t E = c_.n_embd, K = c_.shortconv_l;
        const auto bcx = mv(L.conv_in, xb);
        std::vector<double> bx(E), y(E);
        for (int64_t i = 0; i < E; ++i) bx[i] = bcx[i] * bcx[2 * E + i];
        kc_[l].push_back(bx);  // (the layer's inputs, one per position)
        for (int64_t i = 0; i < E; ++i) {
          double acc = 0;
          for (int64_t j = 0; j < K; ++j)
            if (pos - K + 1 + j >= 0) acc += kc_[l][pos - K + 1 + j][i] * L.conv_kernel[i * K + j];
          y[i] = bcx[E + i] * acc;
        }
        const auto o = mv(L.conv_out, y);
        for (size_t i = 0; i < x.size(); ++i) x[i] += rs * o[i];
        ffn(L, l, x, rs);
        continue;
      }
      if (!c_.has_mixer(l)) {  // nemotron_h: an FFN alone, on the layer's attn_norm (deci: on its own ffn_norm)
        ffn(L, l, x, rs, L.ffn_norm.empty() ? &xb : nullptr);
        continue;
      }
      if (c_.is_linear_attn(l)) {  // deci's "linear attention": attn_output over the normed input
        auto o = mv(L.wo, xb);
        for (size_t i = 0; i < o.size() && !L.bo.empty(); ++i) o[i] += L.bo[i];
        for (size_t i = 0; i < x.size(); ++i) x[i] += rs * o[i];
        ffn(L, l, x, rs);
        continue;
      }
      if (c_.is_gdn(l)) {  // qwen35: a gated delta net
        const auto o = mv(L.conv_out, delta_net(L, l, xb, pos));
        for (size_t i = 0; i < x.size(); ++i) x[i] += rs * o[i];
        ffn(L, l, x, rs);
        continue;
      }
      if (c_.is_ssm(l) && c_.arch.mamba1) {  // mamba, jamba: a Mamba-1 mixer, its recurrence in float64
        const auto o = mv(L.conv_out, mamba1(L, l, xb, pos));
        for (size_t i = 0; i < x.size(); ++i) x[i] += rs * o[i];
        ffn(L, l, x, rs);  // (mamba: none)
        continue;
      }
      if (c_.is_ssm(l) && !c_.arch.parallel_ssm) {  // granitehybrid: a Mamba-2 mixer, in its attention-like (dual) form
        const auto o = mv(L.conv_out, mamba2_dual(L, l, xb, pos));
        for (size_t i = 0; i < x.size(); ++i) x[i] += rs * o[i];
        ffn(L, l, x, rs);
        continue;
      }
      if (c_.is_mla()) {  // deepseek2: K and V decompressed per head from the cached latent
        auto o = mla_attention(L, l, xb, pos, rp, roped);
        for (size_t i = 0; i < x.size(); ++i) x[i] += rs * o[i];
        ffn(L, l, x, rs);
        continue;
      }
      // gemma4: the last layers compute no K/V (they read an earlier layer's: llama.cpp's rule, the layer
      // before the first of them for full layers, the one before that for sliding ones)
      const bool own_kv = c_.kv_shared_from == 0 || l < c_.kv_shared_from;
      const int64_t kvl = own_kv ? l : c_.kv_shared_from - (la.window > 0 ? 2 : 1);
      auto q = mv(L.wq, xb);
      std::vector<double> k, v;
      if (own_kv) k = mv(L.wk, xb), v = mv(L.wv, xb);
      std::vector<double> gate;  // qwen35: per head, the queries then as many gates; afmoe: attn_gate x
      if (L.wq_gate.valid()) gate = mv(L.wq_gate, xb);
      if (c_.arch.attn_output_gate) {
        const int64_t hd = c_.head_dim;
        std::vector<double> qq;
        for (int64_t h = 0; h < c_.n_head; ++h) {
          qq.insert(qq.end(), q.begin() + 2 * h * hd, q.begin() + 2 * h * hd + hd);
          gate.insert(gate.end(), q.begin() + 2 * h * hd + hd, q.begin() + 2 * h * hd + 2 * hd);
        }
        q = qq;
      }
      if (!L.bq.empty())
        for (size_t i = 0; i < q.size(); ++i) q[i] += L.bq[i];
      if (!L.bk.empty())
        for (size_t i = 0; i < k.size(); ++i) k[i] += L.bk[i], v[i] += L.bv[i];
      if (c_.clamp_kqv > 0)  // mpt, olmo
        for (auto* y : {&q, &k, &v})
          for (double& e : *y) e = std::clamp<double>(e, -c_.clamp_kqv, c_.clamp_kqv);
      if (c_.arch.qk_norm_full) {  // olmoe: one norm over all of q / k, then RoPE per head
        q = norm(q, L.q_norm);
        k = norm(k, L.k_norm);
      }
      const std::vector<float> none;
      const int64_t nq = c_.n_head_of(l);  // (deci: query heads per layer)
      for (int64_t h = 0; h < nq; ++h) head_norm_rope(q, h, c_.arch.qk_norm_full ? none : L.q_norm, pos, rp, roped);
      // mistral3: 1 + s ln(floor(pos / n_orig) + 1); llama4: on the NoPE layers, pos + 1
      if (c_.attn_temp_scale != 0 && !(c_.attn_temp_nope_only && roped))
        for (double& e : q)
          e *= 1 + c_.attn_temp_scale * std::log(std::floor(static_cast<double>(pos + (c_.attn_temp_nope_only ? 1 : 0)) /
                                                            c_.attn_temp_floor) + 1);
      for (int64_t h = 0; h < (own_kv ? c_.n_head_kv_of(l) : 0); ++h)
        head_norm_rope(k, h, c_.arch.qk_norm_full ? none : L.k_norm, pos, rp, roped);
      if (c_.arch.v_norm && own_kv) {  // gemma4: V heads scaled to unit RMS
        const std::vector<float> ones(static_cast<size_t>(hd_), 1.0f);
        for (int64_t h = 0; h < c_.n_head_kv_of(l); ++h) head_norm_rope(v, h, ones, pos, rp, false);
      }
      if (c_.kq_l2_norm && roped) {  // llama4: q / k heads scaled to unit RMS after RoPE
        const int64_t hd = c_.head_dim;
        for (auto* v : {&q, &k})
          for (size_t h0 = 0; h0 < v->size(); h0 += static_cast<size_t>(hd)) {
            double ss = 0;
            for (int64_t i = 0; i < hd; ++i) ss += (*v)[h0 + i] * (*v)[h0 + i];
            const double sc = 1.0 / std::sqrt(ss / hd + c_.rms_eps);
            for (int64_t i = 0; i < hd; ++i) (*v)[h0 + i] *= sc;
          }
      }
      if (own_kv) {
        kc_[l].push_back(k);
        vc_[l].push_back(v);
      }
      std::vector<double> att(c_.q_dim(), 0.0);
      const int64_t hd = hd_;
      for (int64_t h = 0; h < nq; ++h) {
        const int64_t kvh = h / (nq / c_.n_head_kv_of(l));
        // sinks (gpt-oss): an extra logit in the denominator
        std::vector<double> s(pos + 1 - first);
        double mx = L.attn_sinks.empty() ? -1e300 : L.attn_sinks[h];
        for (int64_t t = first; t <= pos; ++t) {
          double d = 0;
          for (int64_t i = 0; i < hd; ++i) d += q[h * hd + i] * kc_[kvl][t][kvh * hd + i];
          double& e = s[t - first];
          e = d * static_cast<double>(c_.attn_scale);
          if (c_.attn_softcap > 0) e = c_.attn_softcap * std::tanh(e / c_.attn_softcap);
          if (!c_.alibi.empty()) e += static_cast<double>(c_.alibi[static_cast<size_t>(h)]) * static_cast<double>(t - pos);
          mx = std::max(mx, e);
        }
        double sum = L.attn_sinks.empty() ? 0.0 : std::exp(L.attn_sinks[h] - mx);
        for (auto& e : s) sum += (e = std::exp(e - mx));
        for (int64_t t = first; t <= pos; ++t)
          for (int64_t i = 0; i < hd; ++i) att[h * hd + i] += s[t - first] / sum * vc_[kvl][t][kvh * hd + i];
      }
      for (size_t i = 0; i < gate.size(); ++i) att[i] /= 1 + std::exp(-gate[i]);  // qwen35, afmoe: times sigmoid(gate)
      auto o = mv(L.wo, att);
      if (!L.bo.empty())  // attn_output.bias (gpt-oss)
        for (size_t i = 0; i < o.size(); ++i) o[i] += L.bo[i];
      if (c_.arch.parallel_ssm) {  // falcon-h1: + the Mamba-2 mixer of the same normed input
        const auto m = mv(L.conv_out, mamba2_dual(L, l, xb, pos));
        for (size_t i = 0; i < o.size(); ++i) o[i] += m[i];
      }
      if (!L.attn_post_norm.empty()) o = norm(o, L.attn_post_norm);
      for (size_t i = 0; i < x.size(); ++i) x[i] += rs * o[i];
      ffn(L, l, x, rs, c_.arch.parallel_block ? &xn : nullptr);  // cohere: the FFN reads the attention's input
      if (PL > 0) {  // gemma4: x += norm(proj(gelu(inp_gate x) * input_l))
        auto g = mv(L.per_layer_inp_gate, x);
        for (int64_t i = 0; i < PL; ++i) g[i] = gelu(g[i]) * pl[l * PL + i];
        const auto o = rms(mv(L.per_layer_proj, g), L.per_layer_post_norm);
        for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      }
      for (double& e : x) e *= L.out_scale;  // gemma4's layer_output_scale (1: none)
    }
    auto logits = mv(w.output, norm(x, w.output_norm, w.output_norm_b));
    for (size_t i = 0; i < w.output_b.size(); ++i) logits[i] += w.output_b[i];  // phi2
    for (double& e : logits) e /= c_.logit_scale;  // granite
    if (c_.final_softcap > 0)
      for (double& e : logits) e = c_.final_softcap * std::tanh(e / c_.final_softcap);
    return logits;
  }

 private:
  // The FFN block of layer l on the residual stream x (dense, or the experts).
  void ffn(const LayerWeights& L, int64_t l, std::vector<double>& x, double rs,
           const std::vector<double>* parallel_input = nullptr) {
    if (!c_.has_ffn(l)) return;  // (nemotron_h's mixer and attention layers)
    const auto xb = parallel_input ? *parallel_input : L.ffn_norm.empty() ? x : norm(x, L.ffn_norm, L.ffn_norm_b);
    if (c_.layer_is_moe(l) && c_.arch.moe_beside_dense) {  // gemma4 (26B-A4B): experts beside the dense FFN
      auto d = rms(swiglu(L.w_gate, L.w_up, L.w_down, xb), L.post_ffw_norm_1);
      const auto xm = rms(x, L.pre_ffw_norm_2);
      auto xr = rms(x, L.ffn_gate_inp_s);
      for (double& e : xr) e /= std::sqrt(static_cast<double>(c_.n_embd));
      auto p = mv(L.ffn_gate_inp, xr);
      const double mx = *std::max_element(p.begin(), p.end());
      double sum = 0;
      for (double& e : p) sum += (e = std::exp(e - mx));
      std::vector<int64_t> idx(p.size());
      for (size_t e = 0; e < idx.size(); ++e) idx[e] = static_cast<int64_t>(e);
      std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
      double wsum = 0;
      for (int64_t j = 0; j < c_.n_expert_used; ++j) wsum += p[idx[j]];
      std::vector<double> m(x.size(), 0.0);
      for (int64_t j = 0; j < c_.n_expert_used; ++j) {
        const int64_t e = idx[j];
        const double wt = p[e] / wsum * (L.down_exps_s.empty() ? 1.0 : L.down_exps_s[e]);
        const auto o = swiglu(L.gate_exps[e], L.up_exps[e], L.down_exps[e], xm);
        for (size_t i = 0; i < m.size(); ++i) m[i] += wt * o[i];
      }
      m = rms(m, L.post_ffw_norm_2);
      for (size_t i = 0; i < d.size(); ++i) d[i] += m[i];
      d = norm(d, L.ffn_post_norm);
      for (size_t i = 0; i < x.size(); ++i) x[i] += rs * d[i];
      return;
    }
    if (c_.layer_is_moe(l)) {
      // softmax (or sigmoid: glm4moe) over the router logits, the k largest (by score + selection
      // bias: glm4moe), (renormalized, scaled), weighted sum of experts
      auto p = mv(L.ffn_gate_inp, xb);
      if (!L.ffn_gate_inp_b.empty())
        for (size_t e = 0; e < p.size(); ++e) p[e] += L.ffn_gate_inp_b[e];
      const bool oss = c_.arch.moe_softmax_topk;  // gpt-oss: top-k logits, softmax over those
      if (c_.moe_sigmoid) {
        for (auto& e : p) e = 1 / (1 + std::exp(-e));
      } else if (!oss) {
        double mx = *std::max_element(p.begin(), p.end()), sum = 0;
        for (auto& e : p) sum += (e = std::exp(e - mx));
        for (auto& e : p) e /= sum;
      }
      std::vector<double> choice(p);
      if (c_.moe_select_by_logit) choice = mv(L.ffn_gate_inp, xb);  // llama4: the raw logits choose
      if (!L.exp_probs_b.empty())
        for (size_t e = 0; e < p.size(); ++e) choice[e] += L.exp_probs_b[e];
      if (c_.moe_groups > 1) {  // DeepSeek-V3: only the groups of the best top-2 sums
        const int64_t G = c_.moe_groups, per = c_.n_expert / G;
        std::vector<std::pair<double, int64_t>> gs;
        for (int64_t g = 0; g < G; ++g) {
          std::vector<double> v(choice.begin() + g * per, choice.begin() + (g + 1) * per);
          std::sort(v.rbegin(), v.rend());
          gs.emplace_back(-(v[0] + v[1]), g);
        }
        std::stable_sort(gs.begin(), gs.end(), [](auto& a, auto& b) { return a.first < b.first; });
        for (int64_t i = c_.moe_groups_used; i < G; ++i)
          for (int64_t e = gs[i].second * per; e < (gs[i].second + 1) * per; ++e) choice[e] = -1e300;
      }
      std::vector<int64_t> idx(p.size());
      for (size_t e = 0; e < idx.size(); ++e) idx[e] = static_cast<int64_t>(e);
      std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return choice[a] > choice[b]; });
      const int64_t K = c_.n_expert_used;
      if (oss) {
        const double top = p[idx[0]];
        double sum = 0;
        for (int64_t j = 0; j < K; ++j) sum += std::exp(p[idx[j]] - top);
        std::vector<double> w(p.size());
        for (int64_t j = 0; j < K; ++j) w[idx[j]] = std::exp(p[idx[j]] - top) / sum;
        for (int64_t j = 0; j < K; ++j) p[idx[j]] = w[idx[j]];
      }
      double wsum = 0;
      for (int64_t j = 0; j < K; ++j) wsum += p[idx[j]];
      // the experts' (and shared experts') sum, RMS-normed by ffn_post_norm when the layer has one (afmoe)
      const std::vector<double> x_in = x;
      for (int64_t j = 0; j < K; ++j) {
        const int64_t e = idx[j];
        const double wt = (c_.arch.moe_norm_topk ? p[e] / wsum : p[e]) * c_.moe_weights_scale;
        if (c_.moe_weight_before) {  // llama4: the weight scales the expert's input
          std::vector<double> xw(xb);
          for (double& v : xw) v *= wt;
          auto d = swiglu(L.gate_exps.empty() ? Matrix{} : L.gate_exps[e], L.up_exps[e], L.down_exps[e], xw);
          for (size_t i = 0; i < x.size(); ++i) x[i] += rs * d[i];
          continue;
        }
        auto d = oss ? oai_expert(L, e, xb) : swiglu(L.gate_exps.empty() ? Matrix{} : L.gate_exps[e], L.up_exps[e], L.down_exps[e], xb);
        for (size_t i = 0; i < x.size(); ++i) x[i] += rs * wt * d[i];
      }
      if (L.has_shared_expert()) {  // qwen2moe: gated by sigmoid(gate_inp_shexp . x); glm4moe: not
        double g = 1;
        if (!L.gate_inp_shexp.empty()) {
          g = 0;
          for (size_t i = 0; i < xb.size(); ++i) g += L.gate_inp_shexp[i] * xb[i];
          g = 1 / (1 + std::exp(-g));
        }
        auto d = swiglu(L.gate_shexp, L.up_shexp, L.down_shexp, xb);
        for (size_t i = 0; i < x.size(); ++i) x[i] += rs * g * d[i];
      }
      if (!L.ffn_post_norm.empty()) {
        std::vector<double> sum(x.size());
        for (size_t i = 0; i < x.size(); ++i) sum[i] = (x[i] - x_in[i]) / rs;
        sum = norm(sum, L.ffn_post_norm);
        for (size_t i = 0; i < x.size(); ++i) x[i] = x_in[i] + rs * sum[i];
      }
      return;
    }
    std::vector<double> d;
    if (c_.arch.ffn_ungated) {  // starcoder2: down(gelu(up x + b_up)) + b_down
      auto u = mv(L.w_up, xb);
      for (size_t i = 0; i < u.size(); ++i) {
        const double a = L.ffn_up_b.empty() ? u[i] : u[i] + L.ffn_up_b[i];
        if (c_.arch.ffn_act == FfnActivation::ReluSqr) {  // arcee
          u[i] = a > 0 ? a * a : 0;
          continue;
        }
        if (c_.arch.ffn_act == FfnActivation::XIelu) {  // apertus (ggml_xielu's parameters, in double)
          const auto& p = c_.xielu[static_cast<size_t>(l)];
          u[i] = a > 0 ? p.ap * a * a + p.beta * a : (std::expm1(std::min<double>(a, p.eps)) - a) * p.an + p.beta * a;
          continue;
        }
        u[i] = 0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
      }
      d = mv(L.w_down, u);
      if (!L.ffn_down_b.empty())
        for (size_t i = 0; i < d.size(); ++i) d[i] += L.ffn_down_b[i];
    } else if (!L.ffn_gate_b.empty()) {  // jais: down(silu(gate x + b) * (up x + b)) + b
      auto g = mv(L.w_gate, xb), u = mv(L.w_up, xb);
      for (size_t i = 0; i < g.size(); ++i) {
        const double a = g[i] + L.ffn_gate_b[i];
        g[i] = a / (1 + std::exp(-a)) * (u[i] + L.ffn_up_b[i]);
      }
      d = mv(L.w_down, g);
      for (size_t i = 0; i < d.size(); ++i) d[i] += L.ffn_down_b[i];
    } else {
      d = swiglu(L.w_gate, L.w_up, L.w_down, xb);
    }
    if (!L.ffn_post_norm.empty()) d = norm(d, L.ffn_post_norm);
    for (size_t i = 0; i < x.size(); ++i) x[i] += rs * d[i];
  }
  // deepseek2's latent attention, decompressed: head h's key is [attn_k_b_h^T c | k_pe] and its value
  // attn_v_b_h c, c the normed latent of each cached position.
  std::vector<double> mla_attention(const LayerWeights& L, int64_t l, const std::vector<double>& xb, int64_t pos,
                                    const RopeParams& rp, bool roped) {
    const int64_t R = c_.mla_kv_rank, nope = c_.mla_nope, nr = c_.n_rot, qh = nope + nr, V = c_.mla_v;
    auto q = L.wq_a.valid() ? mv(L.wq, norm(mv(L.wq_a, xb), L.q_a_norm)) : mv(L.wq, xb);
    auto kv = mv(L.wkv_a, xb);
    std::vector<double> lat(kv.begin(), kv.begin() + R), pe(kv.begin() + R, kv.end());
    lat = norm(lat, L.kv_a_norm);
    if (roped) rope(pe.data(), pos, rp);
    std::vector<double> cached(lat);
    cached.insert(cached.end(), pe.begin(), pe.end());
    kc_[l].push_back(cached);
    const double temp = c_.attn_temp_scale != 0
                            ? 1 + c_.attn_temp_scale * std::log(std::floor(static_cast<double>(pos) / c_.attn_temp_floor) + 1)
                            : 1.0;
    std::vector<double> att(static_cast<size_t>(c_.n_head * V), 0.0);
    for (int64_t h = 0; h < c_.n_head; ++h) {
      double* qp = q.data() + h * qh;
      if (roped) rope(qp + nope, pos, rp);
      std::vector<std::vector<double>> kb(static_cast<size_t>(R)), vb(static_cast<size_t>(V));
      for (int64_t r = 0; r < R; ++r) kb[r] = row(L.wk_b[h], r);
      for (int64_t r = 0; r < V; ++r) vb[r] = row(L.wv_b[h], r);
      std::vector<double> s(static_cast<size_t>(pos + 1));
      double mx = -1e300;
      for (int64_t t = 0; t <= pos; ++t) {
        const auto& ct = kc_[l][t];
        double d = 0;
        for (int64_t j = 0; j < nope; ++j) {
          double kj = 0;
          for (int64_t r = 0; r < R; ++r) kj += kb[r][j] * ct[r];
          d += qp[j] * kj;
        }
        for (int64_t j = 0; j < nr; ++j) d += qp[nope + j] * ct[R + j];
        s[t] = d * temp * static_cast<double>(c_.attn_scale);
        mx = std::max(mx, s[t]);
      }
      double sum = 0;
      for (auto& e : s) sum += (e = std::exp(e - mx));
      for (int64_t t = 0; t <= pos; ++t) {
        const auto& ct = kc_[l][t];
        for (int64_t i = 0; i < V; ++i) {
          double vi = 0;
          for (int64_t r = 0; r < R; ++r) vi += vb[i][r] * ct[r];
          att[h * V + i] += s[t] / sum * vi;
        }
      }
    }
    return mv(L.wo, att);
  }
  std::vector<double> swiglu(const Matrix& gate, const Matrix& up, const Matrix& down, const std::vector<double>& x) {
    if (!gate.valid()) {  // nemotron_h_moe's ungated experts: ReLU squared
      auto u = mv(up, x);
      for (double& e : u) e = e > 0 ? e * e : 0;
      return mv(down, u);
    }
    auto g = mv(gate, x), u = mv(up, x);
    const bool gelu = c_.arch.ffn_act == FfnActivation::GeluTanh;
    for (size_t i = 0; i < g.size(); ++i) {
      const double a = g[i];
      g[i] = (gelu ? 0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a))) : a / (1 + std::exp(-a))) * u[i];
    }
    return mv(down, g);
  }
  // gpt-oss's expert: down(swiglu_oai(gate x + bg, up x + bu)) + bd, alpha 1.702, limit 7
  std::vector<double> oai_expert(const LayerWeights& L, int64_t e, const std::vector<double>& x) {
    const int64_t F = c_.n_ff_exp, E = c_.n_embd;
    auto g = mv(L.gate_exps[e], x), u = mv(L.up_exps[e], x);
    for (int64_t i = 0; i < F; ++i) {
      const double a = std::min(g[i] + L.gate_exps_b[e * F + i], 7.0);
      const double b = std::clamp(u[i] + L.up_exps_b[e * F + i], -7.0, 7.0);
      g[i] = a / (1 + std::exp(-1.702 * a)) * (b + 1);
    }
    auto d = mv(L.down_exps[e], g);
    for (int64_t i = 0; i < E; ++i) d[i] += L.down_exps_b[e * E + i];
    return d;
  }
  std::vector<double> row(const Matrix& m, int64_t r) {
    std::vector<float> f(m.cols);
    dequantize_row(m.type, m.row(r), f.data(), m.cols);
    return {f.begin(), f.end()};
  }
  std::vector<double> mv(const Matrix& m, const std::vector<double>& x) {
    std::vector<double> y(m.rows);
    for (int64_t r = 0; r < m.rows; ++r) {
      auto w = row(m, r);
      double a = 0;
      for (int64_t c = 0; c < m.cols; ++c) a += w[c] * x[c];
      y[r] = a;
    }
    return y;
  }
  std::vector<double> norm(const std::vector<double>& x, const std::vector<float>& w, const std::vector<float>& b = {}) {
    if (c_.arch.layer_norm) {  // cohere, starcoder2: (x - mean) / sqrt(var + eps) * w (+ b)
      double mean = 0, var = 0;
      for (double e : x) mean += e;
      mean /= x.size();
      for (double e : x) var += (e - mean) * (e - mean);
      const double s = 1.0 / std::sqrt(var / x.size() + c_.rms_eps);
      std::vector<double> o(x.size());
      for (size_t i = 0; i < x.size(); ++i) o[i] = w[i] * (x[i] - mean) * s + (b.empty() ? 0.0 : b[i]);
      return o;
    }
    auto o = rms(x, w);
    for (size_t i = 0; i < b.size() && i < o.size(); ++i) o[i] += b[i];  // phimoe: RMS norms with biases
    return o;
  }
  void head_norm_rope(std::vector<double>& v, int64_t h, const std::vector<float>& nw, int64_t pos, const RopeParams& rp,
                      bool roped = true) {
    const int64_t hd = hd_;
    double* p = v.data() + h * hd;
    auto norm_head = [&] {
      if (nw.empty()) return;
      double ss = 0;
      for (int64_t i = 0; i < hd; ++i) ss += p[i] * p[i];
      const double s = 1.0 / std::sqrt(ss / hd + c_.rms_eps);
      for (int64_t i = 0; i < hd; ++i) p[i] = nw[i] * p[i] * s;
    };
    if (!c_.arch.qk_norm_after_rope) norm_head();
    if (roped) rope(p, pos, rp);
    if (c_.arch.qk_norm_after_rope) norm_head();  // hunyuan-dense
  }
  // Mamba-1 in float64 (model/mamba1.h): kc_ holds x's raw inputs, m1_h_[l] the states (d_inner x d_state).
  std::vector<double> mamba1(const LayerWeights& L, int64_t l, const std::vector<double>& xb, int64_t pos) {
    const int64_t DI = c_.ssm_d_inner, K = c_.ssm_d_conv, DS = c_.ssm_d_state, R = c_.ssm_dt_rank;
    const auto xz = mv(L.conv_in, xb);
    kc_[l].emplace_back(xz.begin(), xz.begin() + DI);
    m1_h_.resize(c_.n_layer);
    if (pos == 0) m1_h_[l].assign(DI * DS, 0.0);
    std::vector<double> xc(DI);
    for (int64_t ch = 0; ch < DI; ++ch) {
      double acc = L.ssm_conv_b[ch];
      for (int64_t j = 0; j < K; ++j)
        if (pos - K + 1 + j >= 0) acc += kc_[l][pos - K + 1 + j][ch] * L.conv_kernel[ch * K + j];
      xc[ch] = acc / (1 + std::exp(-acc));
    }
    auto xdb = mv(L.ssm_x, xc);
    if (c_.ssm_dt_b_c_rms || !L.ssm_dt_norm.empty()) {  // (falcon-mamba: no weights; jamba's)
      const std::vector<float>* wts[3] = {&L.ssm_dt_norm, &L.ssm_b_norm, &L.ssm_c_norm};
      int part = 0;
      for (const auto& [off, w] : {std::pair<int64_t, int64_t>{0, R}, {R, DS}, {R + DS, DS}}) {
        const std::vector<float>& wt = *wts[part++];
        double ss = 0;
        for (int64_t i = 0; i < w; ++i) ss += xdb[off + i] * xdb[off + i];
        for (int64_t i = 0; i < w; ++i) xdb[off + i] *= (wt.empty() ? 1.0 : wt[i]) / std::sqrt(ss / w + c_.rms_eps);
      }
    }
    const auto dt = mv(L.ssm_dt, std::vector<double>(xdb.begin(), xdb.begin() + R));
    std::vector<double> y(DI);
    for (int64_t i = 0; i < DI; ++i) {
      const double a = dt[i] + L.ssm_dt_b[i], d = a > 20 ? a : std::log1p(std::exp(a));
      double sum = 0;
      for (int64_t n = 0; n < DS; ++n) {
        double& h = m1_h_[l][i * DS + n];
        h = h * std::exp(d * L.ssm_a[i * DS + n]) + xdb[R + n] * xc[i] * d;
        sum += h * xdb[R + DS + n];
      }
      const double z = xz[DI + i];
      y[i] = (sum + xc[i] * L.ssm_d[i]) * z / (1 + std::exp(-z));
    }
    return y;
  }
  // Mamba-2 without a recurrence: with xBC_s the silu'd convolution of the inputs at s (kc_: the raw
  // inputs, vc_: [xBC_s | dt_s]), head h's output at t is
  //   y_t = sum_{s <= t} exp(A_h sum_{s < r <= t} dt_r) dt_s (C_t . B_s) x_s + D_h x_t,
  // then gated by silu(z_t) and RMS-normed per group.
  std::vector<double> mamba2_dual(const LayerWeights& L, int64_t l, const std::vector<double>& xb, int64_t pos) {
    const int64_t DI = c_.ssm_d_inner, CD = c_.ssm_conv_dim(), K = c_.ssm_d_conv, H = c_.ssm_n_head;
    const int64_t HD = c_.ssm_head_dim(), G = c_.ssm_n_group, DS = c_.ssm_d_state;
    const auto zx = mv(L.conv_in, xb);
    const int64_t m = c_.arch.parallel_ssm ? l + c_.n_layer : l;  // (falcon-h1: beside attention)
    kc_[m].emplace_back(zx.begin() + DI, zx.begin() + DI + CD);
    std::vector<double> cur(CD + H);
    for (int64_t ch = 0; ch < CD; ++ch) {
      double acc = L.ssm_conv_b.empty() ? 0 : L.ssm_conv_b[ch];
      for (int64_t j = 0; j < K; ++j)
        if (pos - K + 1 + j >= 0) acc += kc_[m][pos - K + 1 + j][ch] * L.conv_kernel[ch * K + j];
      cur[ch] = acc / (1 + std::exp(-acc));
    }
    for (int64_t h = 0; h < H; ++h) {
      const double d = zx[DI + CD + h] + L.ssm_dt_b[h];
      cur[CD + h] = d > 20 ? d : std::log1p(std::exp(d));
    }
    vc_[m].push_back(cur);
    std::vector<double> y(DI);
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);
      double decay_sum = 0;  // sum of dt over (s, t]
      for (int64_t s = pos; s >= 0; --s) {
        const auto& v = vc_[m][s];
        double cb = 0;
        for (int64_t j = 0; j < DS; ++j) cb += cur[DI + G * DS + g * DS + j] * v[DI + g * DS + j];
        const double wgt = std::exp(L.ssm_a[h] * decay_sum) * v[CD + h] * cb;
        for (int64_t i = 0; i < HD; ++i) y[h * HD + i] += wgt * v[h * HD + i];
        decay_sum += v[CD + h];
      }
      for (int64_t i = 0; i < HD; ++i) y[h * HD + i] += L.ssm_d[h] * cur[h * HD + i];
    }
    for (int64_t i = 0; i < DI; ++i) y[i] *= zx[i] / (1 + std::exp(-zx[i]));
    const int64_t W = DI / G;
    for (int64_t g = 0; g < G && !L.ssm_norm.empty(); ++g) {  // (falcon-h1 may have no norm)
      double ss = 0;
      for (int64_t i = 0; i < W; ++i) ss += y[g * W + i] * y[g * W + i];
      const double r = 1 / std::sqrt(ss / W + c_.rms_eps);
      for (int64_t i = 0; i < W; ++i) y[g * W + i] *= r * L.ssm_norm[g * W + i];
    }
    return y;
  }
  // The gated delta net (model/gated_delta_net.h) in float64: kc_ holds the convolution's raw inputs
  // (q, k, v before the convolution), vc_[l][0] the state S per value head (row j: value dimension j).
  std::vector<double> delta_net(const LayerWeights& L, int64_t l, const std::vector<double>& xb, int64_t pos) {
    const int64_t DI = c_.ssm_d_inner, CD = c_.ssm_conv_dim(), K = c_.ssm_d_conv, H = c_.ssm_n_head;
    const int64_t HK = c_.ssm_n_group, D = c_.ssm_d_state;
    const auto qkv = mv(L.conv_in, xb), z = mv(L.ssm_gate, xb), beta = mv(L.ssm_beta, xb), alpha = mv(L.ssm_alpha, xb);
    kc_[l].push_back(qkv);
    if (pos == 0) vc_[l].assign(1, std::vector<double>(static_cast<size_t>(H * D * D), 0.0));
    std::vector<double> x(CD);
    for (int64_t ch = 0; ch < CD; ++ch) {
      double acc = 0;
      for (int64_t j = 0; j < K; ++j)
        if (pos - K + 1 + j >= 0) acc += kc_[l][pos - K + 1 + j][ch] * L.conv_kernel[ch * K + j];
      x[ch] = acc / (1 + std::exp(-acc));
    }
    for (int64_t h = 0; h < 2 * HK; ++h) {  // q heads, k heads: unit length (eps inside the root)
      double ss = 0;
      for (int64_t i = 0; i < D; ++i) ss += x[h * D + i] * x[h * D + i];
      for (int64_t i = 0; i < D; ++i) x[h * D + i] /= std::sqrt(ss + c_.rms_eps);
    }
    std::vector<double>& S = vc_[l][0];
    std::vector<double> y(DI);
    for (int64_t h = 0; h < H; ++h) {
      const int64_t hk = c_.arch.gdn_grouped_heads ? h / (c_.ssm_n_head / HK) : h % HK;  // (value heads grouped or tiled)
      const double* q = x.data() + hk * D;
      const double* k = x.data() + (HK + hk) * D;
      const double* v = x.data() + 2 * HK * D + h * D;
      const double a = alpha[h] + L.ssm_dt_b[h];
      const double decay = std::exp((a > 20 ? a : std::log1p(std::exp(a))) * L.ssm_a[h]);
      const double b = 1 / (1 + std::exp(-beta[h]));
      double* Sh = S.data() + h * D * D;
      for (int64_t i = 0; i < D * D; ++i) Sh[i] *= decay;
      std::vector<double> d(D);
      for (int64_t j = 0; j < D; ++j) {
        double sk = 0;
        for (int64_t i = 0; i < D; ++i) sk += Sh[j * D + i] * k[i];
        d[j] = (v[j] - sk) * b;
      }
      for (int64_t j = 0; j < D; ++j) {
        double o = 0;
        for (int64_t i = 0; i < D; ++i) o += (Sh[j * D + i] += d[j] * k[i]) * q[i];
        y[h * D + j] = o / std::sqrt(static_cast<double>(D));
      }
      double ss = 0;
      for (int64_t j = 0; j < D; ++j) ss += y[h * D + j] * y[h * D + j];
      const double r = 1 / std::sqrt(ss / D + c_.rms_eps);
      for (int64_t j = 0; j < D; ++j) y[h * D + j] *= r * L.ssm_norm[j] * z[h * D + j] / (1 + std::exp(-z[h * D + j]));
    }
    return y;
  }
  // RoPE of the n_rot values at p
  void rope(double* p, int64_t pos, const RopeParams& rp) {
    // ggml_rope_ext: linear scaling multiplies positions; YaRN blends the scaled and unscaled angle
    // per pair (weight of the unscaled one: 1 below the correction dim of beta_fast, 0 above beta_slow's)
    // and scales cos/sin by 1 + 0.1 ln(factor)
    double ms = rp.attn_factor, lo = 0, hi = 0;
    if (rp.yarn) {
      ms *= 1 + 0.1 * std::log(1.0 / rp.freq_scale);
      auto dim = [&](double turns) {
        return rot_ * std::log(rp.n_ctx_orig / (turns * 2 * M_PI)) / (2 * std::log(static_cast<double>(rp.theta)));
      };
      lo = std::max(0.0, std::floor(dim(rp.beta_fast)));
      hi = std::min(static_cast<double>(rot_ - 1), std::ceil(dim(rp.beta_slow)));
    }
    for (int64_t i = 0; i < rot_ / 2; ++i) {
      double freq = std::pow(static_cast<double>(rp.theta), -2.0 * i / rot_);
      if (ff_ && rp.freq_factors) freq /= ff_[i];  // (gemma4's sliding layers: none)
      double fpos = pos * static_cast<double>(rp.freq_scale);
      if (rp.yarn) {
        const double mix = 1 - std::min(1.0, std::max(0.0, (i - lo) / std::max(0.001, hi - lo)));
        fpos = pos * (rp.freq_scale * (1 - mix) + mix);
      }
      if (rp.still_pair(i)) fpos = 0;
      const double a = fpos * freq, cs = std::cos(a) * ms, sn = std::sin(a) * ms;
      const bool neox = c_.arch.rope_layout == RopeLayout::NeoX;
      const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + rot_ / 2 : 2 * i + 1;
      const double v0 = p[i0], v1 = p[i1];
      p[i0] = v0 * cs - v1 * sn;
      p[i1] = v0 * sn + v1 * cs;
    }
  }
  static double gelu(double a) { return 0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a))); }
  // RMSNorm with weights, whatever the family's other norms
  std::vector<double> rms(const std::vector<double>& x, const std::vector<float>& w) {
    double ss = 0;
    for (double e : x) ss += e * e;
    const double s = 1.0 / std::sqrt(ss / x.size() + c_.rms_eps);
    std::vector<double> o(x.size());
    for (size_t i = 0; i < x.size(); ++i) o[i] = w[i] * x[i] * s;
    return o;
  }
  const Model& m_;
  const ModelConfig& c_;
  int64_t hd_ = 0, rot_ = 0;  // this layer's head size and RoPE dimensions
  const float* ff_;  // RoPE frequency divisors, or null
  std::vector<std::vector<std::vector<double>>> kc_, vc_;
  std::vector<std::vector<double>> m1_h_;  // Mamba-1 states per layer
};

}  // namespace tmill::test
