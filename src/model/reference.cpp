#include "model/reference.h"

#include "model/mamba2.h"

#include "kernels/ops.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <cmath>

#include "core/log.h"
#include "model/rope.h"
#include "quant/quant.h"

namespace tmill {
namespace ref {

void matvec(const Matrix& w, const float* x, float* y, std::vector<float>& row) {
  row.resize(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w.type, w.row(r), row.data(), w.cols);
    float val = 0.0f;
    for (int64_t j = 0; j < w.cols; ++j) val += row[j] * x[j];
    y[r] = val;
  }
}

void rmsnorm(float* o, const float* x, const float* weight, int64_t n, float eps) {
  float ss = 0.0f;
  for (int64_t j = 0; j < n; ++j) ss += x[j] * x[j];
  ss /= static_cast<float>(n);
  ss += eps;
  ss = 1.0f / std::sqrt(ss);
  for (int64_t j = 0; j < n; ++j) o[j] = weight[j] * (ss * x[j]);
}

void softmax(float* x, int64_t n) {
  float max_val = x[0];
  for (int64_t i = 1; i < n; ++i) max_val = std::max(max_val, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_val);
    sum += x[i];
  }
  for (int64_t i = 0; i < n; ++i) x[i] /= sum;
}

void softmax_with_sink(float* x, int64_t n, float sink) {
  float max_val = sink;
  for (int64_t i = 0; i < n; ++i) max_val = std::max(max_val, x[i]);
  float sum = std::exp(sink - max_val);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_val);
    sum += x[i];
  }
  for (int64_t i = 0; i < n; ++i) x[i] /= sum;
}

float silu(float x) { return x * (1.0f / (1.0f + std::exp(-x))); }

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f, kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

float softcap(float x, float cap) { return cap * std::tanh(x / cap); }

float swiglu_oai(float g, float u) {
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  const float x = std::min(g, kLimit);
  const float y = std::clamp(u, -kLimit, kLimit);
  return x / (1.0f + std::exp(kAlpha * (-x))) * (y + 1.0f);
}

std::vector<std::pair<int32_t, float>> moe_route(const float* logits, int64_t n_expert, int64_t k, bool norm,
                                                 bool softmax_topk) {
  return moe_route(logits, n_expert, k, ModelConfig::MoeGate{norm, softmax_topk}, nullptr);
}

std::vector<std::pair<int32_t, float>> moe_route(const float* logits, int64_t n_expert, int64_t k,
                                                 const ModelConfig::MoeGate& gate, const float* selection_bias) {
  std::vector<float> p(logits, logits + n_expert);
  if (gate.sigmoid)
    for (float& v : p) v = 1.0f / (1.0f + std::exp(-v));
  else if (!gate.softmax_topk)
    softmax(p.data(), n_expert);
  // the experts are chosen by score + selection bias (glm4moe), weighted by the score alone
  std::vector<float> choice(p);
  if (gate.select_by_logit) choice.assign(logits, logits + n_expert);  // llama4
  if (selection_bias)
    for (int64_t e = 0; e < n_expert; ++e) choice[e] += selection_bias[e];
  if (gate.groups > 1) {  // only the best groups' experts: a group's score is the sum of its two best
    const int64_t per = n_expert / gate.groups;
    std::vector<float> score(static_cast<size_t>(gate.groups));
    for (int64_t g = 0; g < gate.groups; ++g) {
      std::vector<float> v(choice.begin() + g * per, choice.begin() + (g + 1) * per);
      std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<float>());
      score[g] = v[0] + v[1];
    }
    std::vector<int64_t> order(static_cast<size_t>(gate.groups));
    for (int64_t g = 0; g < gate.groups; ++g) order[g] = g;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return score[a] > score[b]; });
    for (int64_t i = gate.groups_used; i < gate.groups; ++i)
      std::fill(choice.begin() + order[i] * per, choice.begin() + (order[i] + 1) * per,
                -std::numeric_limits<float>::infinity());
  }
  std::vector<int32_t> idx(static_cast<size_t>(n_expert));
  for (int32_t e = 0; e < n_expert; ++e) idx[e] = e;
  // highest first; equal ones by expert index
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return choice[a] > choice[b]; });
  std::vector<std::pair<int32_t, float>> out;
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) {
    out.emplace_back(idx[i], p[idx[i]]);
    sum += p[idx[i]];
  }
  if (gate.softmax_topk) {  // the chosen logits, softmaxed among themselves
    std::vector<float> w;
    for (auto& [e, l] : out) w.push_back(l);
    softmax(w.data(), k);
    for (int64_t i = 0; i < k; ++i) out[static_cast<size_t>(i)].second = w[static_cast<size_t>(i)];
  }
  if (gate.norm)  // (llama.cpp clamps the sum to F16's smallest normal number)
    for (auto& [e, w] : out) w /= std::max(sum, 6.103515625e-5f);
  if (gate.scale != 1.0f)
    for (auto& [e, w] : out) w *= gate.scale;
  return out;
}

void rope(float* vec, int64_t n_rot, int64_t pos, const RopeParams& r, RopeLayout layout, const float* freq_factors) {
  const float p = static_cast<float>(pos);
  float dims[2] = {0, 0};
  if (r.yarn) yarn_corr_dims(n_rot, r.n_ctx_orig, r.theta, r.beta_fast, r.beta_slow, dims);
  const float mscale = rope_mscale(r);
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    float freq = 1.0f / std::pow(r.theta, static_cast<float>(2 * i) / static_cast<float>(n_rot));
    if (freq_factors) freq /= freq_factors[i];
    float val = p * r.freq_scale * freq;
    if (r.yarn) {
      const float extrap = p * freq, mix = yarn_extrapolation_mix(dims, i);
      val = r.freq_scale * extrap * (1 - mix) + extrap * mix;
    }
    if (r.still_pair(i)) val = 0.0f;
    const float fcr = std::cos(val) * mscale, fci = std::sin(val) * mscale;
    // Adjacent: pairs (2i, 2i+1). NeoX: pairs (i, i + n_rot/2).
    const int64_t a = layout == RopeLayout::Adjacent ? 2 * i : i;
    const int64_t b = layout == RopeLayout::Adjacent ? 2 * i + 1 : i + n_rot / 2;
    const float v0 = vec[a], v1 = vec[b];
    vec[a] = v0 * fcr - v1 * fci;
    vec[b] = v0 * fci + v1 * fcr;
  }
}

}  // namespace ref

ReferenceForward::ReferenceForward(std::shared_ptr<const Model> model, int64_t max_seq)
    : model_(std::move(model)), max_seq_(max_seq) {
  const ModelConfig& c = model_->config();
  // (one token at a time cannot see the positions after it: a bidirectional model's oracle is the
  // layer-major float64 one of its tests)
  TM_ASSERT(!c.arch.bidirectional, "the reference forward is causal; bidirectional models only embed");
  x_.resize(c.n_embd);
  xb_.resize(c.n_embd);
  q_.resize(c.q_dim());
  k_.resize(c.kv_dim());
  v_.resize(c.kv_dim());
  att_out_.resize(std::max(c.q_dim(), c.n_embd));
  att_.resize(max_seq);
  const int64_t ff = std::max({c.n_ff, c.n_ff_exp, c.n_ff_shexp});
  hb_.resize(ff);
  hb2_.resize(ff);
  router_.resize(c.n_expert);
  moe_out_.resize(c.n_embd);
  mla_out_.resize(c.attn_out_dim());
  logits_.resize(c.n_vocab);
  conv_inputs_.resize(static_cast<size_t>(c.n_conv_layers() * max_seq * c.n_embd));
  conv_bcx_.resize(static_cast<size_t>(3 * c.n_embd));
  if (c.arch.attn_output_gate) qg_.resize(static_cast<size_t>(2 * c.q_dim()));
  if (c.arch.attn_output_gate || c.arch.attn_gate_proj) gate_.resize(static_cast<size_t>(c.q_dim()));
  if (c.n_ssm_layers() > 0) {
    ssm_state_.resize(static_cast<size_t>(c.n_ssm_layers() * c.ssm_state_floats()));
    ssm_zx_.resize(static_cast<size_t>(c.ssm_in_dim()));
    ssm_xbc_.resize(static_cast<size_t>(c.ssm_conv_dim()));
    ssm_y_.resize(static_cast<size_t>(c.ssm_d_inner));
  }
  key_cache_.resize(static_cast<size_t>(c.n_layer * max_seq * c.kv_dim()));
  value_cache_.resize(static_cast<size_t>(c.n_layer * max_seq * c.kv_dim()));
}

// lfm2's short convolution: [b | c | x] = in_proj xb; this position's input b * x joins the
// layer's history; xb = out_proj (c * sum_j kernel_j * input(pos - (l - 1) + j)), the oldest first,
// zero before position 0 (llama.cpp's ggml_ssm_conv over the zero-initialized state).
void ReferenceForward::shortconv(const LayerWeights& L, int64_t slot, int64_t pos) {
  const ModelConfig& c = model_->config();
  const int64_t E = c.n_embd, K = c.shortconv_l;
  ref::matvec(L.conv_in, xb_.data(), conv_bcx_.data(), row_);
  float* hist = conv_inputs_.data() + slot * max_seq_ * E;
  for (int64_t i = 0; i < E; ++i) hist[pos * E + i] = conv_bcx_[i] * conv_bcx_[2 * E + i];
  for (int64_t i = 0; i < E; ++i) {
    float acc = 0.0f;
    for (int64_t j = 0; j < K; ++j) {
      const int64_t q = pos - (K - 1) + j;
      if (q >= 0) acc += hist[q * E + i] * L.conv_kernel[i * K + j];
    }
    att_out_[i] = conv_bcx_[E + i] * acc;
  }
  ref::matvec(L.conv_out, att_out_.data(), xb_.data(), row_);
}

// The recurrent layers' causal convolution, one token: ssm_xbc_ = silu(sum_j kernel_j * input_j + bias)
// over the d_conv - 1 inputs kept in `conv` (the oldest first) and this token's `in`, which then joins
// them (the oldest leaves).
void ReferenceForward::ssm_conv(const LayerWeights& L, float* conv, const float* in) {
  const ModelConfig& c = model_->config();
  const int64_t CD = c.ssm_conv_dim(), K = c.ssm_d_conv;
  for (int64_t ch = 0; ch < CD; ++ch) {
    float acc = 0.0f;
    for (int64_t j = 0; j < K; ++j) acc += (j < K - 1 ? conv[j * CD + ch] : in[ch]) * L.conv_kernel[ch * K + j];
    if (!L.ssm_conv_b.empty()) acc += L.ssm_conv_b[ch];
    ssm_xbc_[ch] = ref::silu(acc);
  }
  for (int64_t j = 0; j + 1 < K - 1; ++j)
    for (int64_t ch = 0; ch < CD; ++ch) conv[j * CD + ch] = conv[(j + 1) * CD + ch];
  if (K > 1)
    for (int64_t ch = 0; ch < CD; ++ch) conv[(K - 2) * CD + ch] = in[ch];
}

// Mamba-1's mixer, one token (model/mamba1.h says what it computes): [x | z] = ssm_in xb; the
// convolution of x, plus the bias, silu; [dt | B | C] = x_proj of that (each RMS-normed, without weights,
// for falcon-mamba); dt = dt_proj dt + bias; per channel the state update and read-out with its own
// decay per state dimension, plus D x; times silu(z); ssm_out.
void ReferenceForward::mamba1(const LayerWeights& L, int64_t slot, int64_t pos) {
  const ModelConfig& c = model_->config();
  const int64_t DI = c.ssm_d_inner, K = c.ssm_d_conv, DS = c.ssm_d_state, R = c.ssm_dt_rank;
  float* conv = ssm_state_.data() + slot * c.ssm_state_floats();  // (K - 1) x DI, the oldest first
  float* S = conv + (K - 1) * DI;
  if (pos == 0) std::fill(conv, conv + c.ssm_state_floats(), 0.0f);
  ref::matvec(L.conv_in, xb_.data(), ssm_zx_.data(), row_);
  ssm_conv(L, conv, ssm_zx_.data());  // -> ssm_xbc_: silu(conv(x) + bias)
  std::vector<float> xdb(static_cast<size_t>(R + 2 * DS)), dt(static_cast<size_t>(DI));
  ref::matvec(L.ssm_x, ssm_xbc_.data(), xdb.data(), row_);
  if (c.ssm_dt_b_c_rms || !L.ssm_dt_norm.empty()) {  // (falcon-mamba: no weights; jamba's)
    const std::vector<float> ones(static_cast<size_t>(std::max(R, DS)), 1.0f);
    auto w = [&](const std::vector<float>& v) { return v.empty() ? ones.data() : v.data(); };
    ref::rmsnorm(xdb.data(), xdb.data(), w(L.ssm_dt_norm), R, c.rms_eps);
    ref::rmsnorm(xdb.data() + R, xdb.data() + R, w(L.ssm_b_norm), DS, c.rms_eps);
    ref::rmsnorm(xdb.data() + R + DS, xdb.data() + R + DS, w(L.ssm_c_norm), DS, c.rms_eps);
  }
  ref::matvec(L.ssm_dt, xdb.data(), dt.data(), row_);
  const float* B = xdb.data() + R;
  const float* C = B + DS;
  for (int64_t i = 0; i < DI; ++i) {
    const float d = ssm_softplus(dt[i] + L.ssm_dt_b[i]), x = ssm_xbc_[i];
    float sum = 0.0f;
    for (int64_t n = 0; n < DS; ++n) {
      float& h = S[i * DS + n];
      h = h * std::exp(d * L.ssm_a[i * DS + n]) + B[n] * x * d;
      sum += h * C[n];
    }
    const float z = ssm_zx_[DI + i];
    ssm_y_[i] = (sum + x * L.ssm_d[i]) * ref::silu(z);
  }
  ref::matvec(L.conv_out, ssm_y_.data(), xb_.data(), row_);
}

// Mamba-2's mixer, one token (model/mamba2.h says what it computes): [z | xBC | dt] = ssm_in xb; the
// convolution over the last d_conv inputs, oldest first, plus the bias, silu; per head the state
// update and read-out; the gate silu(z), the norm per group, ssm_out. The state (the convolution's last
// d_conv - 1 inputs, then S) starts at zero at position 0.
void ReferenceForward::mamba2(const LayerWeights& L, int64_t slot, int64_t pos) {
  const ModelConfig& c = model_->config();
  const int64_t DI = c.ssm_d_inner, CD = c.ssm_conv_dim(), K = c.ssm_d_conv, H = c.ssm_n_head;
  const int64_t HD = c.ssm_head_dim(), G = c.ssm_n_group, DS = c.ssm_d_state;
  float* conv = ssm_state_.data() + slot * c.ssm_state_floats();  // (K - 1) x CD, the oldest first
  float* S = conv + (K - 1) * CD;
  if (pos == 0) std::fill(conv, conv + c.ssm_state_floats(), 0.0f);
  ref::matvec(L.conv_in, xb_.data(), ssm_zx_.data(), row_);
  const float* z = ssm_zx_.data();
  const float* in = ssm_zx_.data() + DI;
  const float* dt = ssm_zx_.data() + DI + CD;
  ssm_conv(L, conv, in);
  for (int64_t h = 0; h < H; ++h) {
    const int64_t g = h / (H / G);
    const float d = ssm_softplus(dt[h] + L.ssm_dt_b[h]);
    const float decay = std::exp(d * L.ssm_a[h]);
    const float* B = ssm_xbc_.data() + DI + g * DS;
    const float* C = ssm_xbc_.data() + DI + G * DS + g * DS;
    for (int64_t i = 0; i < HD; ++i) {
      const float x = ssm_xbc_[h * HD + i];
      float* Si = S + (h * HD + i) * DS;
      float sum = 0.0f;
      for (int64_t j = 0; j < DS; ++j) {
        Si[j] = Si[j] * decay + B[j] * (x * d);
        sum += Si[j] * C[j];
      }
      ssm_y_[h * HD + i] = (sum + x * L.ssm_d[h]) * ref::silu(z[h * HD + i]);
    }
  }
  const int64_t W = DI / G;
  if (!L.ssm_norm.empty())  // (falcon-h1 may have none)
    for (int64_t g = 0; g < G; ++g) ref::rmsnorm(ssm_y_.data() + g * W, ssm_y_.data() + g * W, L.ssm_norm.data() + g * W, W, c.rms_eps);
  ref::matvec(L.conv_out, ssm_y_.data(), xb_.data(), row_);
}

// The gated delta net, one token (model/gated_delta_net.h says what it computes): qkv = attn_qkv xb
// through the causal convolution (no bias) and silu; q, k L2-normed per key head; per value head h
// (key head c.gdn_key_head(h)) the state decays by exp(softplus(alpha + dt_bias) A), takes the delta
// rule's update (v - S k) sigmoid(beta) k^T and is read by q / sqrt(head); each head's output
// RMS-normed, times silu(z), through ssm_out.
void ReferenceForward::delta_net(const LayerWeights& L, int64_t slot, int64_t pos) {
  const ModelConfig& c = model_->config();
  const int64_t DI = c.ssm_d_inner, CD = c.ssm_conv_dim(), K = c.ssm_d_conv, H = c.ssm_n_head;
  const int64_t HK = c.ssm_n_group, D = c.ssm_d_state;
  float* conv = ssm_state_.data() + slot * c.ssm_state_floats();  // (K - 1) x CD, the oldest first
  float* S = conv + (K - 1) * CD;
  if (pos == 0) std::fill(conv, conv + c.ssm_state_floats(), 0.0f);
  std::vector<float>& in = ssm_zx_;  // qkv (CD), z (DI), beta (H), alpha (H)
  in.resize(static_cast<size_t>(CD + DI + 2 * H));
  ref::matvec(L.conv_in, xb_.data(), in.data(), row_);
  ref::matvec(L.ssm_gate, xb_.data(), in.data() + CD, row_);
  ref::matvec(L.ssm_beta, xb_.data(), in.data() + CD + DI, row_);
  ref::matvec(L.ssm_alpha, xb_.data(), in.data() + CD + DI + H, row_);
  ssm_conv(L, conv, in.data());
  for (int64_t h = 0; h < 2 * HK; ++h) {  // q heads, then k heads: x / sqrt(sum x^2 + eps)
    float* x = ssm_xbc_.data() + h * D;
    float ss = 0.0f;
    for (int64_t i = 0; i < D; ++i) ss += x[i] * x[i];
    for (int64_t i = 0; i < D; ++i) x[i] /= std::sqrt(ss + c.rms_eps);
  }
  std::vector<float> delta(static_cast<size_t>(D));
  for (int64_t h = 0; h < H; ++h) {
    const float* q = ssm_xbc_.data() + c.gdn_key_head(h) * D;
    const float* k = ssm_xbc_.data() + (HK + c.gdn_key_head(h)) * D;
    const float* v = ssm_xbc_.data() + 2 * HK * D + h * D;
    const float decay = std::exp(ssm_softplus(in[CD + DI + H + h] + L.ssm_dt_b[h]) * L.ssm_a[h]);
    const float b = 1.0f / (1.0f + std::exp(-in[CD + DI + h]));
    float* Sh = S + h * D * D;  // row j: value dimension j
    for (int64_t i = 0; i < D * D; ++i) Sh[i] *= decay;
    for (int64_t j = 0; j < D; ++j) {
      float sk = 0.0f;
      for (int64_t i = 0; i < D; ++i) sk += Sh[j * D + i] * k[i];
      delta[j] = (v[j] - sk) * b;
    }
    for (int64_t j = 0; j < D; ++j) {
      float o = 0.0f;
      for (int64_t i = 0; i < D; ++i) {
        Sh[j * D + i] += delta[j] * k[i];
        o += Sh[j * D + i] * q[i];
      }
      ssm_y_[h * D + j] = o / std::sqrt(static_cast<float>(D));
    }
    ref::rmsnorm(ssm_y_.data() + h * D, ssm_y_.data() + h * D, L.ssm_norm.data(), D, c.rms_eps);
    for (int64_t j = 0; j < D; ++j) ssm_y_[h * D + j] *= ref::silu(in[CD + h * D + j]);
  }
  ref::matvec(L.conv_out, ssm_y_.data(), xb_.data(), row_);
}

void ReferenceForward::set_lora(std::shared_ptr<const LoraAdapter> adapter, float scale) {
  lora_ = std::move(adapter);
  lora_scale_ = scale;
}

void ReferenceForward::lora_add(const LoraWeight* w, const float* x, float* y) {
  if (!w) return;
  lora_t_.resize(static_cast<size_t>(w->rank()));
  lora_d_.resize(static_cast<size_t>(w->b.rows));
  ref::matvec(w->a, x, lora_t_.data(), row_);
  ref::matvec(w->b, lora_t_.data(), lora_d_.data(), row_);
  const float s = lora_scale_ * w->factor;
  for (int64_t i = 0; i < w->b.rows; ++i) y[i] += s * lora_d_[i];
}

const std::vector<float>& ReferenceForward::forward(int32_t token, int64_t pos) {
  const ModelConfig& c = model_->config();
  const ModelWeights& w = model_->weights();
  TM_ASSERT(pos >= 0 && pos < max_seq_, "position outside the reference KV cache");
  TM_ASSERT(token >= 0 && token < c.n_vocab, "token id out of range");
  const float* freq_factors = w.rope_freq_factors(c, max_seq_);

  // token embedding
  dequantize_row(w.token_embd.type, w.token_embd.row(token), x_.data(), c.n_embd);
  const LoraAdapter* lora = lora_.get();
  if (lora && lora->embedding()) {  // row `token` += scale * B a_token (a_token: row of the flipped A)
    const LoraWeight& e = *lora->embedding();
    ref::matvec(e.b, reinterpret_cast<const float*>(e.a.row(token)), xb_.data(), row_);
    for (int64_t i = 0; i < c.n_embd; ++i) x_[i] += lora_scale_ * e.factor * xb_[i];
  }
  if (c.embd_scale != 1.0f)  // gemma: times sqrt(n_embd)
    for (int64_t i = 0; i < c.n_embd; ++i) x_[i] *= c.embd_scale;
  if (w.pos_embd.valid()) {  // gpt2, starcoder: + the learned embedding of the position
    TM_ASSERT(pos < w.pos_embd.rows, "position past the learned position embeddings");
    dequantize_row(w.pos_embd.type, w.pos_embd.row(pos), xb_.data(), c.n_embd);
    for (int64_t i = 0; i < c.n_embd; ++i) x_[i] += xb_[i];
  }
  if (!w.embd_norm.empty())  // bloom
    layernorm_rows(x_.data(), c.n_embd, w.embd_norm.data(), w.embd_norm_b.data(), x_.data(), c.n_embd, 1, c.n_embd,
                   c.rms_eps);
  if (c.n_embd_per_layer > 0) per_layer_inputs(token);  // gemma4
  auto adapted = [&](int64_t l, LoraSlot s) { return lora ? lora->layer(l, s) : nullptr; };

  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = w.layers[l];
    // attention rmsnorm (olmo2: none; cohere: LayerNorm, kept for the parallel FFN)
    pre_norm(L.attn_norm, L.attn_norm_b);
    if (c.has_mixer(l)) {  // (nemotron_h: a layer may be an FFN alone)
      if (c.arch.parallel_block && !L.ffn_norm.empty()) {  // gptneox, falcon-40b: the FFN's own norm
        const std::vector<float> attn_in(xb_.begin(), xb_.end());
        pre_norm(L.ffn_norm, L.ffn_norm_b);
        xn_.assign(xb_.begin(), xb_.end());
        std::copy(attn_in.begin(), attn_in.end(), xb_.begin());
      } else if (c.arch.parallel_block || c.arch.parallel_ssm) {
        xn_.assign(xb_.begin(), xb_.end());
      }
      if (c.is_conv(l)) {  // lfm2: the gated short convolution instead of attention
        shortconv(L, c.slot(l), pos);
      } else if (c.is_gdn(l)) {  // qwen35: a gated delta net instead of attention
        delta_net(L, c.slot(l), pos);
      } else if (c.is_ssm(l) && c.arch.mamba1) {  // mamba: a Mamba-1 mixer
        mamba1(L, c.slot(l), pos);
      } else if (c.is_ssm(l) && !c.arch.parallel_ssm) {  // granitehybrid: a Mamba-2 mixer instead of attention
        mamba2(L, c.slot(l), pos);
      } else if (c.is_linear_attn(l)) {  // deci's "linear attention": attn_output over the normed input
        ref::matvec(L.wo, xb_.data(), att_out_.data(), row_);
        std::copy(att_out_.begin(), att_out_.begin() + c.n_embd, xb_.begin());
        if (!L.bo.empty())
          for (int64_t i = 0; i < c.n_embd; ++i) xb_[i] += L.bo[i];
      } else {
        const bool roped = c.has_rope(l);  // (smollm3's NoPE layers rotate nothing)
        const RopeParams& rope = c.ropes[roped ? static_cast<size_t>(c.layer_attn[l].rope) : 0];
        const float temperature = c.attn_temperature_at(l, pos);  // mistral3, llama4 (1 for the others)
        // (gemma4: each layer its own head size, K/V heads and RoPE dims; the full layers' RoPE alone
        // takes the frequency factors; the shared-K/V layers compute no K/V, the K = V layers no V)
        const int64_t hd = c.head_dim_of(l), kv_dim = c.kv_dim_of(l), n_kv = c.n_head_kv_of(l), n_rot = c.n_rot_of(l);
        const int64_t nq = c.n_head_of(l);  // (deci: query heads per layer)
        const float* factors = rope.freq_factors ? freq_factors : nullptr;
        const bool stores = c.stores_kv(l);
        if (c.is_mla()) {  // deepseek2: the latent K (= V) and the absorbed queries
          mla_qkv(L, pos, roped ? &rope : nullptr, freq_factors, temperature);
        } else {
          // q, k, v projections (+ bias)
          const bool gated = c.arch.attn_output_gate;  // qwen35: per head, hd queries then hd gates
          ref::matvec(L.wq, xb_.data(), gated ? qg_.data() : q_.data(), row_);
          if (stores) {
            ref::matvec(L.wk, xb_.data(), k_.data(), row_);
            ref::matvec(L.wv, xb_.data(), v_.data(), row_);
          }
          lora_add(adapted(l, LoraSlot::Q), xb_.data(), gated ? qg_.data() : q_.data());
          if (gated)
            for (int64_t h = 0; h < nq; ++h)
              for (int64_t i = 0; i < hd; ++i) {
                q_[h * hd + i] = qg_[h * 2 * hd + i];
                gate_[h * hd + i] = qg_[h * 2 * hd + hd + i];
              }
          if (L.wq_gate.valid()) ref::matvec(L.wq_gate, xb_.data(), gate_.data(), row_);  // afmoe: the gate's own projection
          lora_add(adapted(l, LoraSlot::K), xb_.data(), k_.data());
          lora_add(adapted(l, LoraSlot::V), xb_.data(), v_.data());
          if (!L.bq.empty()) {
            for (int64_t i = 0; i < c.q_dim(); ++i) q_[i] += L.bq[i];
            for (int64_t i = 0; i < kv_dim; ++i) k_[i] += L.bk[i];
            for (int64_t i = 0; i < kv_dim; ++i) v_[i] += L.bv[i];
          }
          if (c.clamp_kqv > 0.0f) {  // mpt, olmo
            for (int64_t i = 0; i < c.q_dim_of(l); ++i) q_[i] = std::clamp(q_[i], -c.clamp_kqv, c.clamp_kqv);
            for (int64_t i = 0; i < kv_dim; ++i) k_[i] = std::clamp(k_[i], -c.clamp_kqv, c.clamp_kqv);
            for (int64_t i = 0; i < kv_dim; ++i) v_[i] = std::clamp(v_[i], -c.clamp_kqv, c.clamp_kqv);
          }
          // per-head q/k norm (qwen3), then RoPE
          // (olmoe: one norm over the whole q and the whole k)
          const bool full = c.arch.qk_norm_full && !L.q_norm.empty();
          if (full) {
            ref::rmsnorm(q_.data(), q_.data(), L.q_norm.data(), c.q_dim(), c.rms_eps);
            ref::rmsnorm(k_.data(), k_.data(), L.k_norm.data(), kv_dim, c.rms_eps);
          }
          const bool after = c.arch.qk_norm_after_rope;  // hunyuan-dense: RoPE, then the norm
          for (int64_t h = 0; h < nq; ++h) {
            float* qh = q_.data() + h * hd;
            if (!L.q_norm.empty() && !full && !after) ref::rmsnorm(qh, qh, L.q_norm.data(), hd, c.rms_eps);
            if (roped) ref::rope(qh, n_rot, pos, rope, c.arch.rope_layout, factors);
            if (!L.q_norm.empty() && !full && after) ref::rmsnorm(qh, qh, L.q_norm.data(), hd, c.rms_eps);
            if (temperature != 1.0f)
              for (int64_t i = 0; i < hd; ++i) qh[i] *= temperature;
          }
          for (int64_t h = 0; h < (stores ? n_kv : 0); ++h) {
            float* kh = k_.data() + h * hd;
            if (!L.k_norm.empty() && !full && !after) ref::rmsnorm(kh, kh, L.k_norm.data(), hd, c.rms_eps);
            if (roped) ref::rope(kh, n_rot, pos, rope, c.arch.rope_layout, factors);
            if (!L.k_norm.empty() && !full && after) ref::rmsnorm(kh, kh, L.k_norm.data(), hd, c.rms_eps);
          }
          if (c.kq_l2_norm && roped) {  // llama4: each q and k head RMS-normalized after RoPE, no weight
            const std::vector<float> ones(static_cast<size_t>(hd), 1.0f);
            for (int64_t h = 0; h < nq; ++h) ref::rmsnorm(q_.data() + h * hd, q_.data() + h * hd, ones.data(), hd, c.rms_eps);
            for (int64_t h = 0; h < c.n_head_kv; ++h) ref::rmsnorm(k_.data() + h * hd, k_.data() + h * hd, ones.data(), hd, c.rms_eps);
          }
          if (c.arch.v_norm && stores) {  // gemma4: each V head RMS-normalized, no weight
            const std::vector<float> ones(static_cast<size_t>(hd), 1.0f);
            for (int64_t h = 0; h < n_kv; ++h) ref::rmsnorm(v_.data() + h * hd, v_.data() + h * hd, ones.data(), hd, c.rms_eps);
          }
        }
        // store k, v at this position (each position c.kv_dim() floats, the layer's first kv_dim of them)
        if (stores) {
          float* kc = key_cache_.data() + (l * max_seq_) * c.kv_dim();
          float* vc = value_cache_.data() + (l * max_seq_) * c.kv_dim();
          std::copy(k_.begin(), k_.begin() + kv_dim, kc + pos * c.kv_dim());
          std::copy(v_.begin(), v_.begin() + kv_dim, vc + pos * c.kv_dim());
        }
        attention(l, pos);
        if (c.arch.attn_output_gate || L.wq_gate.valid())  // qwen35, afmoe: times sigmoid(gate)
          for (int64_t i = 0; i < c.q_dim(); ++i) att_out_[i] *= 1.0f / (1.0f + std::exp(-gate_[i]));
        // output projection and residual (MLA: each head's latent output through its attn_v_b first)
        const float* ao = att_out_.data();
        if (c.is_mla()) {
          for (int64_t h = 0; h < c.n_head; ++h) ref::matvec(L.wv_b[h], att_out_.data() + h * hd, mla_out_.data() + h * c.mla_v, row_);
          ao = mla_out_.data();
        }
        ref::matvec(L.wo, ao, xb_.data(), row_);
        lora_add(adapted(l, LoraSlot::O), ao, xb_.data());
        if (!L.bo.empty())  // attn_output.bias (gpt-oss)
          for (int64_t i = 0; i < c.n_embd; ++i) xb_[i] += L.bo[i];
      }
      if (c.arch.parallel_ssm) {  // falcon-h1: + the Mamba-2 mixer of the same normed input
        const std::vector<float> att(xb_.begin(), xb_.end());
        std::copy(xn_.begin(), xn_.end(), xb_.begin());
        mamba2(L, c.slot(l), pos);
        for (int64_t i = 0; i < c.n_embd; ++i) xb_[i] += att[static_cast<size_t>(i)];
      }
      if (!L.attn_post_norm.empty()) ref::rmsnorm(xb_.data(), xb_.data(), L.attn_post_norm.data(), c.n_embd, c.rms_eps);
      for (int64_t i = 0; i < c.n_embd; ++i) x_[i] += c.residual_scale * xb_[i];  // (granite scales)
    }
    if (!c.has_ffn(l)) continue;  // (nemotron_h's mixer and attention layers)
    // ffn rmsnorm, SwiGLU, residual
    if (c.arch.parallel_block) std::copy(xn_.begin(), xn_.end(), xb_.begin());  // cohere: the layer's normed input
    // (an FFN-only layer reads attn_norm's -- nemotron_h -- or its own ffn_norm's: deci)
    else if (c.has_mixer(l) || !L.ffn_norm.empty()) pre_norm(L.ffn_norm, L.ffn_norm_b);
    std::vector<float> experts;  // gemma4's expert layers: the experts' sum beside the dense FFN below
    if (c.layer_is_moe(l) && c.arch.moe_beside_dense) {
      const std::vector<float> dense_in(xb_);
      std::vector<float> xr(static_cast<size_t>(c.n_embd));
      ref::rmsnorm(xb_.data(), x_.data(), L.pre_ffw_norm_2.data(), c.n_embd, c.rms_eps);
      ref::rmsnorm(xr.data(), x_.data(), L.ffn_gate_inp_s.data(), c.n_embd, c.rms_eps);
      for (float& v : xr) v *= 1.0f / std::sqrt(static_cast<float>(c.n_embd));
      moe_ffn(L, xr.data());
      ref::rmsnorm(moe_out_.data(), moe_out_.data(), L.post_ffw_norm_2.data(), c.n_embd, c.rms_eps);
      experts = moe_out_;
      xb_ = dense_in;
    } else if (c.layer_is_moe(l)) {
      moe_ffn(L);
      if (!L.ffn_post_norm.empty())  // afmoe: the experts' and shared experts' sum, normed
        ref::rmsnorm(moe_out_.data(), moe_out_.data(), L.ffn_post_norm.data(), c.n_embd, c.rms_eps);
      for (int64_t i = 0; i < c.n_embd; ++i) x_[i] += c.residual_scale * moe_out_[i];
      continue;
    }
    if (c.arch.ffn_ungated) {  // starcoder2: down(gelu(up x + b_up)) + b_down
      ref::matvec(L.w_up, xb_.data(), hb_.data(), row_);
      lora_add(adapted(l, LoraSlot::Up), xb_.data(), hb_.data());
      const FfnActivation act = c.arch.ffn_act;
      for (int64_t i = 0; i < c.n_ff_of(l); ++i) {
        const float v = L.ffn_up_b.empty() ? hb_[i] : hb_[i] + L.ffn_up_b[i];
        hb_[i] = act == FfnActivation::GeluTanh ? ref::gelu_tanh(v)
                 : act == FfnActivation::ReluSqr ? (v > 0.0f ? v * v : 0.0f)  // arcee
                 : act == FfnActivation::XIelu   ? c.xielu[static_cast<size_t>(l)](v)  // apertus
                                                 : ref::silu(v);
      }
      ref::matvec(L.w_down, hb_.data(), xb_.data(), row_);
      lora_add(adapted(l, LoraSlot::Down), hb_.data(), xb_.data());
      if (!L.ffn_down_b.empty())
        for (int64_t i = 0; i < c.n_embd; ++i) xb_[i] += L.ffn_down_b[i];
      for (int64_t i = 0; i < c.n_embd; ++i) x_[i] += c.residual_scale * xb_[i];
      continue;
    }
    ref::matvec(L.w_gate, xb_.data(), hb_.data(), row_);
    ref::matvec(L.w_up, xb_.data(), hb2_.data(), row_);
    lora_add(adapted(l, LoraSlot::Gate), xb_.data(), hb_.data());
    lora_add(adapted(l, LoraSlot::Up), xb_.data(), hb2_.data());
    const bool gelu = c.arch.ffn_act == FfnActivation::GeluTanh;
    const int64_t ff = c.n_ff_of(l);  // (gemma4: per layer)
    if (!L.ffn_gate_b.empty())  // jais
      for (int64_t i = 0; i < ff; ++i) hb_[i] += L.ffn_gate_b[i], hb2_[i] += L.ffn_up_b[i];
    for (int64_t i = 0; i < ff; ++i) hb_[i] = (gelu ? ref::gelu_tanh(hb_[i]) : ref::silu(hb_[i])) * hb2_[i];
    ref::matvec(L.w_down, hb_.data(), xb_.data(), row_);
    lora_add(adapted(l, LoraSlot::Down), hb_.data(), xb_.data());
    if (!L.ffn_down_b.empty())
      for (int64_t i = 0; i < c.n_embd; ++i) xb_[i] += L.ffn_down_b[i];
    if (!experts.empty()) {  // gemma4: post_ffw_norm_1 of the dense output, + the experts'
      ref::rmsnorm(xb_.data(), xb_.data(), L.post_ffw_norm_1.data(), c.n_embd, c.rms_eps);
      for (int64_t i = 0; i < c.n_embd; ++i) xb_[i] += experts[static_cast<size_t>(i)];
    }
    if (!L.ffn_post_norm.empty()) ref::rmsnorm(xb_.data(), xb_.data(), L.ffn_post_norm.data(), c.n_embd, c.rms_eps);
    for (int64_t i = 0; i < c.n_embd; ++i) x_[i] += c.residual_scale * xb_[i];
    per_layer_end(l);  // (gemma4: dense FFN layers only)
  }
  // final norm and classifier
  if (c.arch.layer_norm)
    layernorm_rows(x_.data(), c.n_embd, w.output_norm.data(), w.output_norm_b.empty() ? nullptr : w.output_norm_b.data(),
                   x_.data(), c.n_embd, 1, c.n_embd, c.rms_eps);
  else ref::rmsnorm(x_.data(), x_.data(), w.output_norm.data(), c.n_embd, c.rms_eps);
  if (!c.arch.layer_norm && !w.output_norm_b.empty())  // phimoe
    for (int64_t i = 0; i < c.n_embd; ++i) x_[i] += w.output_norm_b[static_cast<size_t>(i)];
  ref::matvec(w.output, x_.data(), logits_.data(), row_);
  if (lora) lora_add(lora->output(), x_.data(), logits_.data());
  if (!w.output_b.empty())  // phi2
    for (int64_t i = 0; i < c.n_vocab; ++i) logits_[i] += w.output_b[i];
  if (c.logit_scale != 1.0f)  // granite
    for (float& v : logits_) v *= 1.0f / c.logit_scale;
  if (c.final_softcap > 0)
    for (float& v : logits_) v = ref::softcap(v, c.final_softcap);
  return logits_;
}

// deepseek2's latent attention on xb_ (model/mla.h): k_ = v_ = [rmsnorm(latent) | RoPE(k_pe)], and
// per head q_ = [attn_k_b_h x q_nope_h | RoPE(q_pe_h)], times the attention temperature.
void ReferenceForward::mla_qkv(const LayerWeights& L, int64_t pos, const RopeParams* rope, const float* freq_factors,
                               float temperature) {
  const ModelConfig& c = model_->config();
  const int64_t R = c.mla_kv_rank, hd = c.head_dim, qh = c.mla_nope + c.n_rot;
  std::vector<float> q(static_cast<size_t>(c.q_proj_dim())), kv(static_cast<size_t>(R + c.n_rot));
  if (L.wq_a.valid()) {
    std::vector<float> qa(static_cast<size_t>(c.mla_q_rank));
    ref::matvec(L.wq_a, xb_.data(), qa.data(), row_);
    ref::rmsnorm(qa.data(), qa.data(), L.q_a_norm.data(), c.mla_q_rank, c.rms_eps);
    ref::matvec(L.wq, qa.data(), q.data(), row_);
  } else {
    ref::matvec(L.wq, xb_.data(), q.data(), row_);
  }
  ref::matvec(L.wkv_a, xb_.data(), kv.data(), row_);
  ref::rmsnorm(k_.data(), kv.data(), L.kv_a_norm.data(), R, c.rms_eps);
  std::copy(kv.begin() + R, kv.end(), k_.begin() + R);
  if (rope) ref::rope(k_.data() + R, c.n_rot, pos, *rope, RopeLayout::Adjacent, freq_factors);
  std::copy(k_.begin(), k_.begin() + hd, v_.begin());
  for (int64_t h = 0; h < c.n_head; ++h) {
    float* out = q_.data() + h * hd;
    ref::matvec(L.wk_b[h], q.data() + h * qh, out, row_);
    std::copy_n(q.data() + h * qh + c.mla_nope, c.n_rot, out + R);
    if (rope) ref::rope(out + R, c.n_rot, pos, *rope, RopeLayout::Adjacent, freq_factors);
    if (temperature != 1.0f)
      for (int64_t i = 0; i < hd; ++i) out[i] *= temperature;
  }
}

void ReferenceForward::pre_norm(const std::vector<float>& norm, const std::vector<float>& bias) {
  const ModelConfig& c = model_->config();
  if (norm.empty()) std::copy(x_.begin(), x_.begin() + c.n_embd, xb_.begin());
  else if (c.arch.layer_norm)
    layernorm_rows(x_.data(), c.n_embd, norm.data(), bias.empty() ? nullptr : bias.data(), xb_.data(), c.n_embd, 1,
                   c.n_embd, c.rms_eps);
  else ref::rmsnorm(xb_.data(), x_.data(), norm.data(), c.n_embd, c.rms_eps);
  if (!c.arch.layer_norm && !norm.empty() && !bias.empty())  // phimoe: RMS norms with biases
    for (int64_t i = 0; i < c.n_embd; ++i) xb_[i] += bias[static_cast<size_t>(i)];
}

// Multi-head attention of q_ over layer l's cached positions up to pos (those within the layer's
// sliding window, when it has one); query head h reads kv head h / group. Scores q.k * attn_scale,
// soft-capped when the model says so (gemma2), softmax (with the head's sink logit in the denominator:
// gpt-oss), weighted sum of values into att_out_.
void ReferenceForward::attention(int64_t l, int64_t pos) {
  const ModelConfig& c = model_->config();
  const int64_t hd = c.head_dim_of(l), kv_dim = c.kv_dim(), group = c.gqa_group_of(l);  // (kv_dim: the cache's stride)
  const float* kc = key_cache_.data() + (kv_layer(l) * max_seq_) * kv_dim;
  const float* vc = value_cache_.data() + (kv_layer(l) * max_seq_) * kv_dim;
  const LayerWeights& L = model_->weights().layers[static_cast<size_t>(l)];
  const int64_t first = c.layer_attn[static_cast<size_t>(l)].first(pos);  // its window or chunk (llama4)
  const int64_t n = pos + 1 - first;
  for (int64_t h = 0; h < c.n_head_of(l); ++h) {
    const float* qh = q_.data() + h * hd;
    const int64_t kvh = h / group;
    for (int64_t t = first; t <= pos; ++t) {
      const float* kt = kc + t * kv_dim + kvh * hd;
      float score = 0.0f;
      for (int64_t i = 0; i < hd; ++i) score += qh[i] * kt[i];
      score *= c.attn_scale;
      att_[t - first] = c.attn_softcap > 0 ? ref::softcap(score, c.attn_softcap) : score;
      if (!c.alibi.empty()) att_[t - first] += c.alibi[static_cast<size_t>(h)] * static_cast<float>(t - pos);  // bloom
    }
    // gpt-oss: the layer's learned sink logit for this query head joins the denominator
    if (L.attn_sinks.empty()) ref::softmax(att_.data(), n);
    else ref::softmax_with_sink(att_.data(), n, L.attn_sinks[static_cast<size_t>(h)]);
    float* out = att_out_.data() + h * hd;
    std::fill(out, out + hd, 0.0f);
    for (int64_t t = first; t <= pos; ++t) {
      const float* vt = vc + t * kv_dim + kvh * hd;
      for (int64_t i = 0; i < hd; ++i) out[i] += att_[t - first] * vt[i];
    }
  }
}

int64_t ReferenceForward::kv_layer(int64_t l) const {
  const ModelConfig& c = model_->config();
  if (c.stores_kv(l)) return l;
  for (int64_t j = 0; j < c.kv_shared_from; ++j)
    if (c.slot(j) == c.slot(l)) return j;
  TM_ASSERT(false, "a shared-K/V layer without its source");
  return l;
}

// llama.cpp's project_per_layer_inputs for one token: per_layer_model_proj of the scaled embedding times
// 1/sqrt(n_embd), each layer's slice RMS-normed, + the token's per_layer_token_embd row times
// sqrt(n_embd_per_layer), all times 1/sqrt(2).
void ReferenceForward::per_layer_inputs(int32_t token) {
  const ModelConfig& c = model_->config();
  const ModelWeights& w = model_->weights();
  const int64_t PL = c.n_embd_per_layer, W = c.n_layer * PL;
  pl_in_.resize(static_cast<size_t>(W));
  pl_h_.resize(static_cast<size_t>(PL));
  ref::matvec(w.per_layer_model_proj, x_.data(), pl_in_.data(), row_);
  std::vector<float> tok(static_cast<size_t>(W));
  dequantize_row(w.per_layer_tok_embd.type, w.per_layer_tok_embd.row(token), tok.data(), W);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    float* y = pl_in_.data() + l * PL;
    for (int64_t i = 0; i < PL; ++i) y[i] *= 1.0f / std::sqrt(static_cast<float>(c.n_embd));
    ref::rmsnorm(y, y, w.per_layer_proj_norm.data(), PL, c.rms_eps);
    for (int64_t i = 0; i < PL; ++i)
      y[i] = (y[i] + tok[static_cast<size_t>(l * PL + i)] * std::sqrt(static_cast<float>(PL))) * (1.0f / std::sqrt(2.0f));
  }
}

// gemma4's layer end: x += post_norm(proj(gelu(inp_gate x) * the layer's input)); x *= layer_output_scale
void ReferenceForward::per_layer_end(int64_t l) {
  const ModelConfig& c = model_->config();
  const LayerWeights& L = model_->weights().layers[static_cast<size_t>(l)];
  if (c.n_embd_per_layer > 0) {
    const int64_t PL = c.n_embd_per_layer;
    ref::matvec(L.per_layer_inp_gate, x_.data(), pl_h_.data(), row_);
    for (int64_t i = 0; i < PL; ++i) pl_h_[i] = ref::gelu_tanh(pl_h_[i]) * pl_in_[static_cast<size_t>(l * PL + i)];
    ref::matvec(L.per_layer_proj, pl_h_.data(), xb_.data(), row_);
    ref::rmsnorm(xb_.data(), xb_.data(), L.per_layer_post_norm.data(), c.n_embd, c.rms_eps);
    for (int64_t i = 0; i < c.n_embd; ++i) x_[i] += xb_[i];
  }
  for (int64_t i = 0; i < c.n_embd; ++i) x_[i] *= L.out_scale;
}

// down(silu(gate x) * up x) into xb_ (x may be xb_)
void ReferenceForward::swiglu(const Matrix& gate, const Matrix& up, const Matrix& down, const float* x) {
  if (!gate.valid()) {  // nemotron_h_moe's ungated experts: down(relu(up x)^2)
    ref::matvec(up, x, hb_.data(), row_);
    for (int64_t i = 0; i < up.rows; ++i) hb_[i] = hb_[i] > 0.0f ? hb_[i] * hb_[i] : 0.0f;
    ref::matvec(down, hb_.data(), xb_.data(), row_);
    return;
  }
  ref::matvec(gate, x, hb_.data(), row_);
  ref::matvec(up, x, hb2_.data(), row_);
  const bool gelu = model_->config().arch.ffn_act == FfnActivation::GeluTanh;  // (gemma4's experts: GeGLU)
  for (int64_t i = 0; i < gate.rows; ++i) hb_[i] = (gelu ? ref::gelu_tanh(hb_[i]) : ref::silu(hb_[i])) * hb2_[i];
  ref::matvec(down, hb_.data(), xb_.data(), row_);
}

// gpt-oss's expert e into xb_: down(swiglu_oai(gate x + b_gate, up x + b_up)) + b_down
void ReferenceForward::oai_expert(const LayerWeights& L, int32_t e, const float* x) {
  const ModelConfig& c = model_->config();
  const int64_t F = c.n_ff_exp, E = c.n_embd;
  ref::matvec(L.gate_exps[e], x, hb_.data(), row_);
  ref::matvec(L.up_exps[e], x, hb2_.data(), row_);
  for (int64_t i = 0; i < F; ++i)
    hb_[i] = ref::swiglu_oai(hb_[i] + L.gate_exps_b[e * F + i], hb2_[i] + L.up_exps_b[e * F + i]);
  ref::matvec(L.down_exps[e], hb_.data(), xb_.data(), row_);
  for (int64_t i = 0; i < E; ++i) xb_[i] += L.down_exps_b[e * E + i];
}

// Mixture of experts on the normed input xb_, into moe_out_: the routed experts' outputs times their
// weights, plus the shared expert's (qwen2moe: times sigmoid of its gate; glm4moe: ungated).
void ReferenceForward::moe_ffn(const LayerWeights& L, const float* route_in) {
  const ModelConfig& c = model_->config();
  const std::vector<float> x(xb_);
  ref::matvec(L.ffn_gate_inp, route_in ? route_in : x.data(), router_.data(), row_);
  if (!L.ffn_gate_inp_b.empty())
    for (int64_t e = 0; e < c.n_expert; ++e) router_[e] += L.ffn_gate_inp_b[e];
  std::fill(moe_out_.begin(), moe_out_.end(), 0.0f);
  const float* bias = L.exp_probs_b.empty() ? nullptr : L.exp_probs_b.data();
  const bool before = c.moe_weight_before;  // llama4: the weight scales the expert's input
  std::vector<float> xw(x.size());
  for (const auto& [e, weight] : ref::moe_route(router_.data(), c.n_expert, c.n_expert_used, c.moe_gate(), bias)) {
    for (size_t i = 0; i < x.size(); ++i) xw[i] = before ? weight * x[i] : x[i];
    if (c.arch.moe_swiglu_oai) oai_expert(L, e, xw.data());
    else swiglu(L.gate_exps.empty() ? Matrix{} : L.gate_exps[e], L.up_exps[e], L.down_exps[e], xw.data());
    const float scale = L.down_exps_s.empty() ? 1.0f : L.down_exps_s[static_cast<size_t>(e)];  // (gemma4)
    for (int64_t i = 0; i < c.n_embd; ++i) moe_out_[i] += (before ? 1.0f : weight) * scale * xb_[i];
  }
  if (L.has_shared_expert()) {  // qwen2moe's gated by sigmoid(gate_inp_shexp . x), glm4moe's not
    float g = 1.0f;
    if (!L.gate_inp_shexp.empty()) {
      g = 0.0f;
      for (int64_t i = 0; i < c.n_embd; ++i) g += L.gate_inp_shexp[i] * x[i];
      g = 1.0f / (1.0f + std::exp(-g));
    }
    swiglu(L.gate_shexp, L.up_shexp, L.down_shexp, x.data());
    for (int64_t i = 0; i < c.n_embd; ++i) moe_out_[i] += g * xb_[i];
  }
}

}  // namespace tmill
