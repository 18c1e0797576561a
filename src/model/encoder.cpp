// BERT-family encoders as llama.cpp computes them (src/models/bert.cpp there): token + type-0
// (+ absolute position, bert) embeddings, LayerNorm; per layer: q/k/v (+bias; nomic-bert: one fused
// attn_qkv and NeoX RoPE; jina-bert-v2: optional LayerNorms over q and k), bidirectional attention
// within the sequence (jina-bert-v2: ALiBi, -slope_h * |i - j| added to the scores, max bias 8),
// output projection (+bias), residual + LayerNorm (attn_output_norm; jina-bert-v2: a second residual
// + LayerNorm when attn_norm_2 exists), FFN (bert: GELU(up x + b) -> down + b; nomic-bert: SwiGLU
// without biases; jina-bert-v2: GELU(gate x) * (up x + b), or GEGLU over a double-width up, or plain
// GELU, then down + b), residual + LayerNorm (layer_output_norm). Then pooling (model/embedder.h).
#include <algorithm>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/embedder.h"
#include "model/model.h"
#include "quant/quant.h"

namespace tmill {
namespace {

struct Layer {
  PreparedMatrix wq, wk, wv, wo, up, gate, down;
  std::vector<float> bq, bk, bv, bo, attn_norm, attn_norm_b, up_b, down_b, out_norm, out_norm_b;
  std::vector<float> q_norm, q_norm_b, k_norm, k_norm_b, norm2, norm2_b;  // jina-bert-v2, optional
  bool geglu = false;  // jina-bert-v2: up has 2 * n_ff rows, GELU(first half) * second half
};

class TensorReader {
 public:
  explicit TensorReader(const GgufFile& f) : f_(f) {}
  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }
  Result<Matrix> matrix(const std::string& name, int64_t rows, int64_t cols) {
    const GgufTensorInfo* t = f_.find_tensor(name);
    if (!t) return Error{fmt::format("missing tensor '{}'", name)};
    if (t->ne.size() != 2 || t->ne[0] != cols || (rows >= 0 && t->ne[1] != rows))
      return Error{fmt::format("tensor '{}' has the wrong shape (expected [{}, {}])", name, cols, rows)};
    if (!can_dequantize(t->type)) return Error{fmt::format("tensor '{}' has unsupported type {}", name, dtype_name(t->type))};
    bytes += t->nbytes;
    return matrix_of(*t, name);
  }
  Result<std::vector<float>> vec(const std::string& name, int64_t n, bool required = true) {
    const GgufTensorInfo* t = f_.find_tensor(name);
    if (!t) {
      if (!required) return std::vector<float>{};
      return Error{fmt::format("missing tensor '{}'", name)};
    }
    if (t->n_elements != n) return Error{fmt::format("tensor '{}' has {} elements, expected {}", name, t->n_elements, n)};
    if (!can_dequantize(t->type)) return Error{fmt::format("tensor '{}' has unsupported type {}", name, dtype_name(t->type))};
    std::vector<float> out(static_cast<size_t>(n));
    dequantize_row(t->type, t->data, out.data(), n);
    bytes += t->nbytes;
    return out;
  }
  uint64_t bytes = 0;

 private:
  const GgufFile& f_;
};

Result<int64_t> req_key(const GgufFile& f, const std::string& key, int64_t lo, int64_t hi) {
  auto v = f.get_int(key);
  if (!v) return Error{fmt::format("missing integer metadata key '{}'", key)};
  if (*v < lo || *v > hi) return Error{fmt::format("metadata key '{}' = {} is out of range [{}, {}]", key, *v, lo, hi)};
  return *v;
}

// ggml_norm then * w + b (kernels/ops.h)
void layer_norm(const float* x, const float* w, const float* b, float* out, int64_t n, float eps) {
  layernorm_rows(x, n, w, b, out, n, 1, n, eps);
}

class BertEncoder final : public Embedder {
 public:
  static Result<std::unique_ptr<Embedder>> load(std::shared_ptr<const GgufFile> file, ThreadPool* pool,
                                                std::optional<Pooling> override_pooling);
  const EmbedderInfo& info() const override { return info_; }
  uint64_t weight_bytes() const override { return bytes_; }
  void run(const std::vector<std::span<const int32_t>>& seqs, std::vector<std::vector<float>>& out) override;

 private:
  void parallel(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    if (pool_ && n > grain) pool_->parallel_for(n, grain, [&](int64_t b, int64_t e, int) { fn(b, e); });
    else fn(0, n);
  }
  void attention(const std::vector<std::span<const int32_t>>& seqs, const std::vector<int64_t>& begin);

  std::shared_ptr<const GgufFile> file_;
  ThreadPool* pool_ = nullptr;
  EmbedderInfo info_;
  int64_t n_layer_ = 0, n_head_ = 0, head_dim_ = 0, n_ff_ = 0;
  float eps_ = 1e-12f;
  bool nomic_ = false, jina_ = false;
  std::vector<float> alibi_;  // jina-bert-v2: per-head slopes
  uint64_t bytes_ = 0;
  Matrix tok_embd_, pos_embd_;
  std::vector<float> type0_, tok_norm_, tok_norm_b_;
  std::vector<Layer> layers_;
  PreparedMatrix cls_, cls_out_;
  std::vector<float> cls_b_, cls_out_b_;
  std::vector<float> inv_freq_;
  // scratch, (n_tokens, dim)
  std::vector<float> x_, q_, k_, v_, att_, h_, h2_, tmp_, geglu_;
  std::vector<float> ones_;  // gelu_mul's second factor for a plain GELU (GELU(x) * 1)
  std::vector<int32_t> pos_;
};

Result<std::unique_ptr<Embedder>> BertEncoder::load(std::shared_ptr<const GgufFile> file, ThreadPool* pool,
                                                    std::optional<Pooling> override_pooling) {
  auto e = std::make_unique<BertEncoder>();
  e->file_ = file;
  e->pool_ = pool;
  const GgufFile& f = *file;
  const std::string arch = f.get_string("general.architecture").value_or("");
  const std::string a = arch + ".";
  e->nomic_ = arch == "nomic-bert";
  e->jina_ = arch == "jina-bert-v2";
  EmbedderInfo& in = e->info_;
  in.arch = arch;
  TM_ASSIGN_OR_RETURN(in.n_embd, req_key(f, a + "embedding_length", 1, 1 << 16));
  TM_ASSIGN_OR_RETURN(e->n_layer_, req_key(f, a + "block_count", 1, 1024));
  TM_ASSIGN_OR_RETURN(e->n_head_, req_key(f, a + "attention.head_count", 1, 1024));
  TM_ASSIGN_OR_RETURN(e->n_ff_, req_key(f, a + "feed_forward_length", 1, 1 << 20));
  TM_ASSIGN_OR_RETURN(in.n_ctx_train, req_key(f, a + "context_length", 1, 1 << 24));
  if (auto kv = f.get_int(a + "attention.head_count_kv"); kv && *kv != e->n_head_)
    return Error{fmt::format("{}: grouped-query attention (head_count_kv {}) is not supported for encoders", arch, *kv)};
  if (in.n_embd % e->n_head_ != 0) return Error{"embedding_length is not a multiple of attention.head_count"};
  e->head_dim_ = in.n_embd / e->n_head_;
  if (auto eps = f.get_number(a + "attention.layer_norm_epsilon")) e->eps_ = static_cast<float>(*eps);
  if (auto causal = f.get_bool(a + "attention.causal"); causal && *causal)
    return Error{fmt::format("{}: causal encoders are not supported", arch)};
  TM_ASSIGN_OR_RETURN(auto pooling, read_pooling_type(f));
  in.pooling = override_pooling.value_or(pooling.value_or(Pooling::Mean));
  if (in.pooling == Pooling::None)
    return Error{fmt::format("{}: pooling_type none gives per-token embeddings, which tokenmill does not serve", arch)};
  const int64_t E = in.n_embd, F = e->n_ff_;
  TensorReader rd(f);
  TM_ASSIGN_OR_RETURN(e->tok_embd_, rd.matrix("token_embd.weight", -1, E));
  in.n_vocab = e->tok_embd_.rows;
  if (rd.has("token_types.weight")) {
    TM_ASSIGN_OR_RETURN(Matrix types, rd.matrix("token_types.weight", -1, E));
    e->type0_.resize(static_cast<size_t>(E));
    get_row(types, 0, e->type0_.data());  // llama.cpp: every token is of type 0 ("sentence A")
  }
  if (e->jina_) {  // ALiBi slopes as ggml_soft_max_ext computes them with max_bias 8
    const int64_t H = e->n_head_;
    const int64_t n_log2 = int64_t{1} << static_cast<int>(std::floor(std::log2(static_cast<double>(H))));
    const float m0 = std::pow(2.0f, -8.0f / static_cast<float>(n_log2));
    const float m1 = std::pow(2.0f, -4.0f / static_cast<float>(n_log2));
    for (int64_t h = 0; h < H; ++h)
      e->alibi_.push_back(h < n_log2 ? std::pow(m0, static_cast<float>(h + 1)) : std::pow(m1, static_cast<float>(2 * (h - n_log2) + 1)));
  } else if (!e->nomic_) {
    TM_ASSIGN_OR_RETURN(e->pos_embd_, rd.matrix("position_embd.weight", -1, E));
    in.n_ctx_train = std::min(in.n_ctx_train, e->pos_embd_.rows);
  } else {
    int64_t n_rot = e->head_dim_;
    if (auto r = f.get_int(a + "rope.dimension_count")) n_rot = *r;
    if (n_rot != e->head_dim_) return Error{"nomic-bert: rope.dimension_count must equal the head dimension"};
    const float theta = static_cast<float>(f.get_number(a + "rope.freq_base").value_or(10000.0));
    e->inv_freq_ = rope_inv_freq(n_rot, theta, nullptr);
  }
  TM_ASSIGN_OR_RETURN(e->tok_norm_, rd.vec("token_embd_norm.weight", E));
  TM_ASSIGN_OR_RETURN(e->tok_norm_b_, rd.vec("token_embd_norm.bias", E));
  e->layers_.resize(static_cast<size_t>(e->n_layer_));
  for (int64_t l = 0; l < e->n_layer_; ++l) {
    Layer& L = e->layers_[static_cast<size_t>(l)];
    const std::string p = fmt::format("blk.{}.", l);
    if (rd.has(p + "attn_qkv.weight")) {
      TM_ASSIGN_OR_RETURN(Matrix qkv, rd.matrix(p + "attn_qkv.weight", 3 * E, E));
      auto rows = [&](int64_t r0) {
        Matrix v = qkv;
        v.data = qkv.row(r0);
        v.rows = E;
        return v;
      };
      L.wq = PreparedMatrix(rows(0));
      L.wk = PreparedMatrix(rows(E));
      L.wv = PreparedMatrix(rows(2 * E));
      TM_ASSIGN_OR_RETURN(auto b, rd.vec(p + "attn_qkv.bias", 3 * E, false));
      if (!b.empty()) {
        L.bq.assign(b.begin(), b.begin() + E);
        L.bk.assign(b.begin() + E, b.begin() + 2 * E);
        L.bv.assign(b.begin() + 2 * E, b.end());
      }
    } else {
      TM_ASSIGN_OR_RETURN(Matrix wq, rd.matrix(p + "attn_q.weight", E, E));
      TM_ASSIGN_OR_RETURN(Matrix wk, rd.matrix(p + "attn_k.weight", E, E));
      TM_ASSIGN_OR_RETURN(Matrix wv, rd.matrix(p + "attn_v.weight", E, E));
      L.wq = PreparedMatrix(wq);
      L.wk = PreparedMatrix(wk);
      L.wv = PreparedMatrix(wv);
      TM_ASSIGN_OR_RETURN(L.bq, rd.vec(p + "attn_q.bias", E, false));
      TM_ASSIGN_OR_RETURN(L.bk, rd.vec(p + "attn_k.bias", E, false));
      TM_ASSIGN_OR_RETURN(L.bv, rd.vec(p + "attn_v.bias", E, false));
    }
    TM_ASSIGN_OR_RETURN(L.q_norm, rd.vec(p + "attn_q_norm.weight", E, false));
    TM_ASSIGN_OR_RETURN(L.q_norm_b, rd.vec(p + "attn_q_norm.bias", E, false));
    TM_ASSIGN_OR_RETURN(L.k_norm, rd.vec(p + "attn_k_norm.weight", E, false));
    TM_ASSIGN_OR_RETURN(L.k_norm_b, rd.vec(p + "attn_k_norm.bias", E, false));
    TM_ASSIGN_OR_RETURN(L.norm2, rd.vec(p + "attn_norm_2.weight", E, false));
    TM_ASSIGN_OR_RETURN(L.norm2_b, rd.vec(p + "attn_norm_2.bias", E, false));
    TM_ASSIGN_OR_RETURN(Matrix wo, rd.matrix(p + "attn_output.weight", E, E));
    L.wo = PreparedMatrix(wo);
    TM_ASSIGN_OR_RETURN(L.bo, rd.vec(p + "attn_output.bias", E, false));
    TM_ASSIGN_OR_RETURN(L.attn_norm, rd.vec(p + "attn_output_norm.weight", E));
    TM_ASSIGN_OR_RETURN(L.attn_norm_b, rd.vec(p + "attn_output_norm.bias", E));
    TM_ASSIGN_OR_RETURN(Matrix up, rd.matrix(p + "ffn_up.weight", -1, E));
    L.geglu = e->jina_ && !rd.has(p + "ffn_gate.weight") && up.rows == 2 * F;
    if (up.rows != (L.geglu ? 2 * F : F)) return Error{fmt::format("tensor '{}ffn_up.weight' has {} rows, expected {}", p, up.rows, F)};
    L.up = PreparedMatrix(up);
    TM_ASSIGN_OR_RETURN(L.up_b, rd.vec(p + "ffn_up.bias", up.rows, false));
    if (e->nomic_ || (e->jina_ && rd.has(p + "ffn_gate.weight"))) {
      TM_ASSIGN_OR_RETURN(Matrix gate, rd.matrix(p + "ffn_gate.weight", F, E));
      L.gate = PreparedMatrix(gate);
    }
    TM_ASSIGN_OR_RETURN(Matrix down, rd.matrix(p + "ffn_down.weight", E, F));
    L.down = PreparedMatrix(down);
    TM_ASSIGN_OR_RETURN(L.down_b, rd.vec(p + "ffn_down.bias", E, false));
    TM_ASSIGN_OR_RETURN(L.out_norm, rd.vec(p + "layer_output_norm.weight", E));
    TM_ASSIGN_OR_RETURN(L.out_norm_b, rd.vec(p + "layer_output_norm.bias", E));
  }
  in.out_dim = E;
  if (in.pooling == Pooling::Rank) {
    if (e->nomic_ || e->jina_) return Error{fmt::format("{}: pooling_type rank (a classification head) is not supported", arch)};
    if (rd.has("cls.weight")) {
      TM_ASSIGN_OR_RETURN(Matrix cls, rd.matrix("cls.weight", E, E));
      e->cls_ = PreparedMatrix(cls);
      TM_ASSIGN_OR_RETURN(e->cls_b_, rd.vec("cls.bias", E, false));
    }
    if (rd.has("cls.output.weight")) {
      TM_ASSIGN_OR_RETURN(Matrix out, rd.matrix("cls.output.weight", -1, E));
      e->cls_out_ = PreparedMatrix(out);
      in.out_dim = out.rows;
      TM_ASSIGN_OR_RETURN(e->cls_out_b_, rd.vec("cls.output.bias", out.rows, false));
    }
  }
  e->bytes_ = rd.bytes;
  return std::unique_ptr<Embedder>(std::move(e));
}

void BertEncoder::attention(const std::vector<std::span<const int32_t>>& seqs, const std::vector<int64_t>& begin) {
  const int64_t E = info_.n_embd, hd = head_dim_, H = n_head_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // work items: (sequence, head, query token)
  std::vector<std::pair<int64_t, int64_t>> items;  // (sequence, token within it)
  for (size_t s = 0; s < seqs.size(); ++s)
    for (int64_t t = 0; t < static_cast<int64_t>(seqs[s].size()); ++t) items.emplace_back(static_cast<int64_t>(s), t);
  const int64_t n_items = static_cast<int64_t>(items.size()) * H;
  parallel(n_items, 8, [&](int64_t i0, int64_t i1) {
    std::vector<float> sc;
    for (int64_t it = i0; it < i1; ++it) {
      const auto [s, t] = items[static_cast<size_t>(it / H)];
      const int64_t h = it % H, n = static_cast<int64_t>(seqs[static_cast<size_t>(s)].size()), b = begin[static_cast<size_t>(s)];
      const float* q = q_.data() + (b + t) * E + h * hd;
      sc.resize(static_cast<size_t>(n));
      float mx = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        const float* k = k_.data() + (b + j) * E + h * hd;
        float d = 0;
        for (int64_t i = 0; i < hd; ++i) d += q[i] * k[i];
        sc[static_cast<size_t>(j)] = d * scale - (alibi_.empty() ? 0.0f : alibi_[static_cast<size_t>(h)] * static_cast<float>(std::abs(t - j)));
        mx = std::max(mx, sc[static_cast<size_t>(j)]);
      }
      float sum = 0;
      for (auto& v : sc) sum += (v = std::exp(v - mx));
      float* o = att_.data() + (b + t) * E + h * hd;
      std::fill(o, o + hd, 0.0f);
      for (int64_t j = 0; j < n; ++j) axpy(o, v_.data() + (b + j) * E + h * hd, sc[static_cast<size_t>(j)] / sum, hd);
    }
  });
}

void BertEncoder::run(const std::vector<std::span<const int32_t>>& seqs, std::vector<std::vector<float>>& out) {
  const int64_t E = info_.n_embd, F = n_ff_;
  std::vector<int64_t> begin;
  int64_t N = 0;
  for (const auto& s : seqs) {
    begin.push_back(N);
    N += static_cast<int64_t>(s.size());
  }
  out.assign(seqs.size(), {});
  if (N == 0) return;
  const auto NE = static_cast<size_t>(N * E);
  x_.resize(NE), q_.resize(NE), k_.resize(NE), v_.resize(NE), att_.resize(NE), tmp_.resize(NE);
  h_.resize(static_cast<size_t>(N * F)), h2_.resize(static_cast<size_t>(N * F));
  pos_.resize(static_cast<size_t>(N));
  for (size_t s = 0; s < seqs.size(); ++s)
    for (size_t t = 0; t < seqs[s].size(); ++t) pos_[static_cast<size_t>(begin[s]) + t] = static_cast<int32_t>(t);
  // embeddings: token (+ type 0) (+ position), LayerNorm
  parallel(N, 16, [&](int64_t t0, int64_t t1) {
    std::vector<float> row(static_cast<size_t>(E));
    for (int64_t t = t0; t < t1; ++t) {
      int64_t si = static_cast<int64_t>(std::upper_bound(begin.begin(), begin.end(), t) - begin.begin()) - 1;
      float* x = x_.data() + t * E;
      get_row(tok_embd_, seqs[static_cast<size_t>(si)][static_cast<size_t>(t - begin[static_cast<size_t>(si)])], x);
      if (!type0_.empty()) add_inplace(x, type0_.data(), E);
      if (pos_embd_.valid()) {
        get_row(pos_embd_, pos_[static_cast<size_t>(t)], row.data());
        add_inplace(x, row.data(), E);
      }
      layer_norm(x, tok_norm_.data(), tok_norm_b_.data(), x, E, eps_);
    }
  });
  const int64_t half = head_dim_ / 2;
  std::vector<float> cs, sn;
  if (nomic_) {
    cs.resize(static_cast<size_t>(N * half));
    sn.resize(static_cast<size_t>(N * half));
    for (int64_t t = 0; t < N; ++t)
      rope_cos_sin(static_cast<float>(pos_[static_cast<size_t>(t)]), inv_freq_.data(), half, cs.data() + t * half, sn.data() + t * half);
  }
  for (const Layer& L : layers_) {
    const MatmulOutput qkv[] = {{&L.wq, q_.data(), E}, {&L.wk, k_.data(), E}, {&L.wv, v_.data(), E}};
    matmul_many(qkv, 3, x_.data(), E, N, pool_);
    parallel(N, 8, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        if (!L.bq.empty()) {
          add_inplace(q_.data() + t * E, L.bq.data(), E);
          add_inplace(k_.data() + t * E, L.bk.data(), E);
          add_inplace(v_.data() + t * E, L.bv.data(), E);
        }
        if (!L.q_norm.empty()) layer_norm(q_.data() + t * E, L.q_norm.data(), L.q_norm_b.empty() ? nullptr : L.q_norm_b.data(), q_.data() + t * E, E, eps_);
        if (!L.k_norm.empty()) layer_norm(k_.data() + t * E, L.k_norm.data(), L.k_norm_b.empty() ? nullptr : L.k_norm_b.data(), k_.data() + t * E, E, eps_);
        if (nomic_) {
          rope_heads_cs(q_.data() + t * E, n_head_, head_dim_, head_dim_, cs.data() + t * half, sn.data() + t * half, true);
          rope_heads_cs(k_.data() + t * E, n_head_, head_dim_, head_dim_, cs.data() + t * half, sn.data() + t * half, true);
        }
      }
    });
    attention(seqs, begin);
    matmul(L.wo, att_.data(), E, tmp_.data(), E, N, pool_);
    // x = LN(attn + bo + x): the FFN's input, kept in x (jina-bert-v2's attn_norm_2: x = LN2(that + x))
    parallel(N, 16, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* a = tmp_.data() + t * E;
        float* x = x_.data() + t * E;
        if (!L.bo.empty()) add_inplace(a, L.bo.data(), E);
        add_inplace(a, x, E);
        if (L.norm2.empty()) {
          layer_norm(a, L.attn_norm.data(), L.attn_norm_b.data(), x, E, eps_);
        } else {
          layer_norm(a, L.attn_norm.data(), L.attn_norm_b.data(), a, E, eps_);
          add_inplace(a, x, E);
          layer_norm(a, L.norm2.data(), L.norm2_b.empty() ? nullptr : L.norm2_b.data(), x, E, eps_);
        }
      }
    });
    if (nomic_) {
      const MatmulOutput gu[] = {{&L.gate, h_.data(), F}, {&L.up, h2_.data(), F}};
      matmul_many(gu, 2, x_.data(), E, N, pool_);
      parallel(N, 4, [&](int64_t t0, int64_t t1) { silu_mul(h_.data() + t0 * F, h2_.data() + t0 * F, (t1 - t0) * F); });
    } else if (L.geglu) {  // up: 2F rows (+ bias), GELU(first half) * second half
      geglu_.resize(static_cast<size_t>(N * 2 * F));
      matmul(L.up, x_.data(), E, geglu_.data(), 2 * F, N, pool_);
      parallel(N, 4, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          float* u = geglu_.data() + t * 2 * F;
          if (!L.up_b.empty()) add_inplace(u, L.up_b.data(), 2 * F);
          float* h = h_.data() + t * F;
          std::copy(u, u + F, h);
          gelu_mul(h, u + F, F);  // GELU (ggml's tanh form, vectorized) of the first half times the second
        }
      });
    } else if (L.gate.source().valid()) {  // jina-bert-v2: GELU(gate x) * (up x + b)
      const MatmulOutput gu[] = {{&L.gate, h_.data(), F}, {&L.up, h2_.data(), F}};
      matmul_many(gu, 2, x_.data(), E, N, pool_);
      parallel(N, 4, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          float* u = h2_.data() + t * F;
          if (!L.up_b.empty()) add_inplace(u, L.up_b.data(), F);
          gelu_mul(h_.data() + t * F, u, F);
        }
      });
    } else {
      matmul(L.up, x_.data(), E, h_.data(), F, N, pool_);
      if (ones_.size() != static_cast<size_t>(F)) ones_.assign(static_cast<size_t>(F), 1.0f);
      parallel(N, 4, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          float* h = h_.data() + t * F;
          if (!L.up_b.empty()) add_inplace(h, L.up_b.data(), F);
          gelu_mul(h, ones_.data(), F);
        }
      });
    }
    matmul(L.down, h_.data(), F, tmp_.data(), E, N, pool_);
    parallel(N, 16, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* a = tmp_.data() + t * E;
        float* x = x_.data() + t * E;
        if (!L.down_b.empty()) add_inplace(a, L.down_b.data(), E);
        add_inplace(a, x, E);
        layer_norm(a, L.out_norm.data(), L.out_norm_b.data(), x, E, eps_);
      }
    });
  }
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int64_t n = static_cast<int64_t>(seqs[s].size());
    const float* rows = x_.data() + begin[s] * E;
    if (info_.pooling != Pooling::Rank) {
      out[s].resize(static_cast<size_t>(E));
      pool_rows(info_.pooling, rows, n, E, E, out[s].data());
      continue;
    }
    // classification head over the first ([CLS]) token
    std::vector<float> cur(rows, rows + E), next(static_cast<size_t>(E));
    if (cls_.source().valid()) {
      matmul(cls_, cur.data(), E, next.data(), E, 1, nullptr);
      for (int64_t i = 0; i < E; ++i) next[static_cast<size_t>(i)] = std::tanh(next[static_cast<size_t>(i)] + (cls_b_.empty() ? 0.0f : cls_b_[static_cast<size_t>(i)]));
      cur.swap(next);
    }
    if (cls_out_.source().valid()) {
      std::vector<float> scores(static_cast<size_t>(info_.out_dim));
      matmul(cls_out_, cur.data(), E, scores.data(), info_.out_dim, 1, nullptr);
      if (!cls_out_b_.empty()) add_inplace(scores.data(), cls_out_b_.data(), info_.out_dim);
      cur.swap(scores);
    }
    out[s] = std::move(cur);
  }
}

}  // namespace

Result<std::unique_ptr<Embedder>> load_bert_encoder(std::shared_ptr<const GgufFile> file, ThreadPool* pool,
                                                    std::optional<Pooling> pooling) {
  return BertEncoder::load(std::move(file), pool, pooling);
}

}  // namespace tmill
