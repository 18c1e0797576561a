#include "model/model.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "quant/quant.h"

namespace tmill {
namespace {

class Loader {
 public:
  explicit Loader(const GgufFile& f) : f_(f) {}

  Result<Matrix> matrix(const std::string& name, int64_t rows, int64_t cols) {
    const GgufTensorInfo* t = f_.find_tensor(name);
    if (!t) return Error{fmt::format("missing tensor '{}'", name)};
    if (t->ne.size() != 2 || t->ne[0] != cols || t->ne[1] != rows)
      return Error{fmt::format("tensor '{}' has shape [{}], expected [{}, {}]", name, shape(*t), cols, rows)};
    if (!can_dequantize(t->type))
      return Error{fmt::format("tensor '{}' has type {}, which tokenmill cannot compute with yet", name,
                               dtype_name(t->type))};
    used(*t);
    return matrix_of(*t, name);
  }

  // A 3-D tensor [cols, rows, n] (one matrix per expert, GGUF's ffn_*_exps): n row views into it.
  Result<std::vector<Matrix>> experts(const std::string& name, int64_t n, int64_t rows, int64_t cols) {
    const GgufTensorInfo* t = f_.find_tensor(name);
    if (!t) return Error{fmt::format("missing tensor '{}'", name)};
    if (t->ne.size() != 3 || t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != n)
      return Error{fmt::format("tensor '{}' has shape [{}], expected [{}, {}, {}]", name, shape(*t), cols, rows, n)};
    if (!can_dequantize(t->type))
      return Error{fmt::format("tensor '{}' has type {}, which tokenmill cannot compute with yet", name,
                               dtype_name(t->type))};
    std::vector<Matrix> out(static_cast<size_t>(n));
    const size_t row_bytes = static_cast<size_t>(t->nbytes / static_cast<uint64_t>(rows * n));
    for (int64_t e = 0; e < n; ++e) {
      Matrix& m = out[static_cast<size_t>(e)];
      m.type = t->type;
      m.rows = rows;
      m.cols = cols;
      m.row_bytes = row_bytes;
      m.data = t->data + static_cast<size_t>(e * rows) * row_bytes;
      m.name = name;
    }
    used(*t);
    return out;
  }

  // 1-D tensors (norm weights, biases) are small: converted to f32 once.
  Result<std::vector<float>> vec(const std::string& name, int64_t n) {
    const GgufTensorInfo* t = f_.find_tensor(name);
    if (!t) return Error{fmt::format("missing tensor '{}'", name)};
    if (t->n_elements != n || t->ne[0] != n)
      return Error{fmt::format("tensor '{}' has shape [{}], expected [{}]", name, shape(*t), n)};
    if (!can_dequantize(t->type))
      return Error{fmt::format("tensor '{}' has unsupported type {}", name, dtype_name(t->type))};
    std::vector<float> out(static_cast<size_t>(n));
    dequantize_row(t->type, t->data, out.data(), n);
    used(*t);
    return out;
  }

  // A 2-D tensor [n, m] of small values (gpt-oss's per-expert biases), as m*n floats, row after row.
  Result<std::vector<float>> vec2d(const std::string& name, int64_t n, int64_t m) {
    const GgufTensorInfo* t = f_.find_tensor(name);
    if (!t) return Error{fmt::format("missing tensor '{}'", name)};
    if (t->ne.size() != 2 || t->ne[0] != n || t->ne[1] != m)
      return Error{fmt::format("tensor '{}' has shape [{}], expected [{}, {}]", name, shape(*t), n, m)};
    if (!can_dequantize(t->type) || n % dtype_info(t->type).block_size != 0)
      return Error{fmt::format("tensor '{}' has unsupported type {}", name, dtype_name(t->type))};
    std::vector<float> out(static_cast<size_t>(n * m));
    const size_t row_bytes = static_cast<size_t>(t->nbytes / static_cast<uint64_t>(m));
    for (int64_t r = 0; r < m; ++r) dequantize_row(t->type, t->data + r * row_bytes, out.data() + r * n, n);
    used(*t);
    return out;
  }

  Result<std::vector<float>> opt_vec(const std::string& name, int64_t n, bool required) {
    if (!required && !f_.find_tensor(name)) return std::vector<float>{};
    return vec(name, n);
  }

  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }

  // Rows `take` of a matrix, in that order, copied into bytes kept in `owned` (whole rows, so any block
  // type works): for fused tensors whose parts interleave, so no row range is one part.
  static Matrix gather(const Matrix& m, const std::vector<int64_t>& take,
                       std::vector<std::shared_ptr<const std::vector<uint8_t>>>& owned) {
    auto bytes = std::make_shared<std::vector<uint8_t>>(take.size() * m.row_bytes);
    for (size_t i = 0; i < take.size(); ++i) std::memcpy(bytes->data() + i * m.row_bytes, m.row(take[i]), m.row_bytes);
    Matrix v = m;
    v.data = bytes->data();
    v.rows = static_cast<int64_t>(take.size());
    owned.push_back(std::move(bytes));
    return v;
  }

  // Rows [r0, r0 + n) of a matrix: a view into the same bytes (whole rows, so any block type works).
  static Matrix rows_of(const Matrix& m, int64_t r0, int64_t n) {
    Matrix v = m;
    v.data = m.row(r0);
    v.rows = n;
    return v;
  }

  // The first tensor of the file the model does not read, other than llama.cpp's NextN blocks (past
  // n_layer) and a reranker's cls.* head (model/decoder_embedder.cpp reads it); null if none.
  // llama.cpp refuses such files ("wrong number of tensors"), and so does tokenmill: an extra tensor
  // (a bias, a norm) means the file computes something the loader would leave out.
  // (the embedders' heads are theirs: cls.* -- bert, Qwen3-Reranker -- and gemma-embedding's dense_2 / dense_3)
  const GgufTensorInfo* unread(int64_t n_layer, bool dense_heads) const {
    for (const GgufTensorInfo& t : f_.tensors()) {
      if (names_.count(t.name) || t.name.rfind("cls.", 0) == 0) continue;
      if (dense_heads && (t.name.rfind("dense_2.", 0) == 0 || t.name.rfind("dense_3.", 0) == 0)) continue;
      if (t.name.rfind("blk.", 0) == 0) {
        const size_t dot = t.name.find('.', 4);
        if (dot != std::string::npos && dot > 4 && std::all_of(t.name.begin() + 4, t.name.begin() + static_cast<long>(dot), ::isdigit) &&
            std::stoll(t.name.substr(4, dot - 4)) >= n_layer)
          continue;
      }
      return &t;
    }
    return nullptr;
  }

  uint64_t bytes = 0;
  int64_t params = 0;
  std::map<DType, uint64_t> bytes_by_type;

 private:
  static std::string shape(const GgufTensorInfo& t) {
    std::string s;
    for (size_t i = 0; i < t.ne.size(); ++i) s += (i ? ", " : "") + std::to_string(t.ne[i]);
    return s;
  }
  void used(const GgufTensorInfo& t) {
    names_.insert(t.name);
    bytes += t.nbytes;
    params += t.n_elements;
    if (t.ne.size() >= 2) bytes_by_type[t.type] += t.nbytes;
  }
  const GgufFile& f_;
  std::set<std::string> names_;
};

// The MoE FFN of one layer (ModelConfig::layer_is_moe): router, experts, the shared expert (qwen2moe's
// gated, glm4moe's ungated), glm4moe's selection bias.
Status load_moe_layer(Loader& ld, const GgufFile& f, const ModelConfig& c, const std::string& p, LayerWeights& L) {
  const int64_t E = c.n_embd, F = c.n_ff_exp, n = c.n_expert;
  if (f.find_tensor(p + "ffn_gate_up_exps.weight") || f.find_tensor(p + "ffn_gate.0.weight"))
    return Error{fmt::format("{}: fused ffn_gate_up_exps and per-expert ffn_gate.N tensors (old Mixtral files) are "
                             "not supported; convert the model again", p)};
  TM_ASSIGN_OR_RETURN(L.ffn_gate_inp, ld.matrix(p + "ffn_gate_inp.weight", n, E));
  if (!c.arch.moe_ungated) {
    TM_ASSIGN_OR_RETURN(L.gate_exps, ld.experts(p + "ffn_gate_exps.weight", n, F, E));
  }
  TM_ASSIGN_OR_RETURN(L.up_exps, ld.experts(p + "ffn_up_exps.weight", n, F, E));
  TM_ASSIGN_OR_RETURN(L.down_exps, ld.experts(p + "ffn_down_exps.weight", n, E, F));
  if (c.arch.moe_biases) {
    TM_ASSIGN_OR_RETURN(L.ffn_gate_inp_b, ld.vec(p + "ffn_gate_inp.bias", n));
    TM_ASSIGN_OR_RETURN(L.gate_exps_b, ld.vec2d(p + "ffn_gate_exps.bias", F, n));
    TM_ASSIGN_OR_RETURN(L.up_exps_b, ld.vec2d(p + "ffn_up_exps.bias", F, n));
    TM_ASSIGN_OR_RETURN(L.down_exps_b, ld.vec2d(p + "ffn_down_exps.bias", E, n));
  }
  if (c.arch.moe_selection_bias) {
    TM_ASSIGN_OR_RETURN(L.exp_probs_b, ld.opt_vec(p + "exp_probs_b.bias", n, c.arch.moe_selection_bias_required));
  }
  if (c.arch.moe_shared_expert || (c.arch.moe_shared_ungated && c.n_ff_shexp > 0)) {
    const int64_t S = c.n_ff_shexp;
    if (c.arch.moe_shared_expert) {
      TM_ASSIGN_OR_RETURN(L.gate_inp_shexp, ld.vec(p + "ffn_gate_inp_shexp.weight", E));
    }
    if (!c.arch.moe_ungated) {
      TM_ASSIGN_OR_RETURN(L.gate_shexp, ld.matrix(p + "ffn_gate_shexp.weight", S, E));
    }
    TM_ASSIGN_OR_RETURN(L.up_shexp, ld.matrix(p + "ffn_up_shexp.weight", S, E));
    TM_ASSIGN_OR_RETURN(L.down_shexp, ld.matrix(p + "ffn_down_shexp.weight", E, S));
  }
  return {};
}

// gemma4's experts (26B-A4B): gate and up apart or as one ffn_gate_up_exps (gate rows first, as llama.cpp
// splits it), the router's input scale, the per-expert output scales when the file has them, the norms.
Status load_gemma4_experts(Loader& ld, const ModelConfig& c, const std::string& p, LayerWeights& L) {
  const int64_t E = c.n_embd, F = c.n_ff_exp, n = c.n_expert;
  TM_ASSIGN_OR_RETURN(L.ffn_gate_inp, ld.matrix(p + "ffn_gate_inp.weight", n, E));
  TM_ASSIGN_OR_RETURN(L.ffn_gate_inp_s, ld.vec(p + "ffn_gate_inp.scale", E));
  if (ld.has(p + "ffn_gate_up_exps.weight")) {
    TM_ASSIGN_OR_RETURN(std::vector<Matrix> gu, ld.experts(p + "ffn_gate_up_exps.weight", n, 2 * F, E));
    for (const Matrix& m : gu) {
      L.gate_exps.push_back(Loader::rows_of(m, 0, F));
      L.up_exps.push_back(Loader::rows_of(m, F, F));
    }
  } else {
    TM_ASSIGN_OR_RETURN(L.gate_exps, ld.experts(p + "ffn_gate_exps.weight", n, F, E));
    TM_ASSIGN_OR_RETURN(L.up_exps, ld.experts(p + "ffn_up_exps.weight", n, F, E));
  }
  TM_ASSIGN_OR_RETURN(L.down_exps, ld.experts(p + "ffn_down_exps.weight", n, E, F));
  TM_ASSIGN_OR_RETURN(L.down_exps_s, ld.opt_vec(p + "ffn_down_exps.scale", n, false));
  TM_ASSIGN_OR_RETURN(L.pre_ffw_norm_2, ld.vec(p + "pre_ffw_norm_2.weight", E));
  TM_ASSIGN_OR_RETURN(L.post_ffw_norm_1, ld.vec(p + "post_ffw_norm_1.weight", E));
  TM_ASSIGN_OR_RETURN(L.post_ffw_norm_2, ld.vec(p + "post_ffw_norm_2.weight", E));
  return {};
}

// deepseek2's latent attention weights (ModelConfig::is_mla).
Status load_mla_layer(Loader& ld, const ModelConfig& c, const std::string& p, LayerWeights& L) {
  const int64_t E = c.n_embd, R = c.mla_kv_rank;
  if (c.mla_q_rank > 0) {
    TM_ASSIGN_OR_RETURN(L.wq_a, ld.matrix(p + "attn_q_a.weight", c.mla_q_rank, E));
    TM_ASSIGN_OR_RETURN(L.q_a_norm, ld.vec(p + "attn_q_a_norm.weight", c.mla_q_rank));
    TM_ASSIGN_OR_RETURN(L.wq, ld.matrix(p + "attn_q_b.weight", c.q_proj_dim(), c.mla_q_rank));
  } else {
    TM_ASSIGN_OR_RETURN(L.wq, ld.matrix(p + "attn_q.weight", c.q_proj_dim(), E));
  }
  TM_ASSIGN_OR_RETURN(L.wkv_a, ld.matrix(p + "attn_kv_a_mqa.weight", R + c.n_rot, E));
  TM_ASSIGN_OR_RETURN(L.kv_a_norm, ld.vec(p + "attn_kv_a_norm.weight", R));
  TM_ASSIGN_OR_RETURN(L.wk_b, ld.experts(p + "attn_k_b.weight", c.n_head, R, c.mla_nope));
  TM_ASSIGN_OR_RETURN(L.wv_b, ld.experts(p + "attn_v_b.weight", c.n_head, c.mla_v, R));
  return {};
}

// lfm2's short convolution (ModelConfig::is_conv): in_proj, the depthwise kernel, out_proj.
Status load_shortconv_layer(Loader& ld, const ModelConfig& c, const std::string& p, LayerWeights& L) {
  const int64_t E = c.n_embd;
  TM_ASSIGN_OR_RETURN(L.conv_in, ld.matrix(p + "shortconv.in_proj.weight", 3 * E, E));
  TM_ASSIGN_OR_RETURN(L.conv_kernel, ld.vec2d(p + "shortconv.conv.weight", c.shortconv_l, E));
  TM_ASSIGN_OR_RETURN(L.conv_out, ld.matrix(p + "shortconv.out_proj.weight", E, E));
  return {};
}

// A Mamba-2 mixer (ModelConfig::is_ssm), llama.cpp's tensors and shapes.
Status load_ssm_layer(Loader& ld, const ModelConfig& c, const std::string& p, LayerWeights& L) {
  const int64_t E = c.n_embd, H = c.ssm_n_head, G = c.ssm_n_group;
  TM_ASSIGN_OR_RETURN(L.conv_in, ld.matrix(p + "ssm_in.weight", c.ssm_in_dim(), E));
  TM_ASSIGN_OR_RETURN(L.conv_kernel, ld.vec2d(p + "ssm_conv1d.weight", c.ssm_d_conv, c.ssm_conv_dim()));
  TM_ASSIGN_OR_RETURN(L.ssm_conv_b, ld.opt_vec(p + "ssm_conv1d.bias", c.ssm_conv_dim(), false));
  TM_ASSIGN_OR_RETURN(L.ssm_dt_b, ld.vec(p + "ssm_dt.bias", H));
  TM_ASSIGN_OR_RETURN(L.ssm_a, ld.vec2d(p + "ssm_a", 1, H));
  TM_ASSIGN_OR_RETURN(L.ssm_d, ld.vec2d(p + "ssm_d", 1, H));
  if (!c.arch.parallel_ssm || ld.has(p + "ssm_norm.weight")) {  // (falcon-h1's is optional: no grouped norm)
    TM_ASSIGN_OR_RETURN(L.ssm_norm, ld.vec2d(p + "ssm_norm.weight", c.ssm_d_inner / G, G));
  }
  TM_ASSIGN_OR_RETURN(L.conv_out, ld.matrix(p + "ssm_out.weight", E, c.ssm_d_inner));
  return {};
}

// qwen3next's fused projections regrouped (ArchSpec::gdn_grouped_heads): ssm_ba's [beta, alpha]
// per key head's group into ssm_beta and ssm_alpha; an older file's ssm_in, [q, k, v, z] per group, into
// attn_qkv's [q..., k..., v...] and attn_gate's z rows -- as llama.cpp's qwen3next graph splits them.
Status load_gdn_grouped(Loader& ld, const ModelConfig& c, const std::string& p, LayerWeights& L,
                        std::vector<std::shared_ptr<const std::vector<uint8_t>>>& owned) {
  const int64_t E = c.n_embd, H = c.ssm_n_head, HK = c.ssm_n_group, R = H / HK, D = c.ssm_d_state;
  TM_ASSIGN_OR_RETURN(const Matrix ba, ld.matrix(p + "ssm_ba.weight", 2 * H, E));
  std::vector<int64_t> beta, alpha;
  for (int64_t g = 0; g < HK; ++g)
    for (int64_t r = 0; r < R; ++r) beta.push_back(g * 2 * R + r), alpha.push_back(g * 2 * R + R + r);
  L.ssm_beta = Loader::gather(ba, beta, owned);
  L.ssm_alpha = Loader::gather(ba, alpha, owned);
  if (!ld.has(p + "ssm_in.weight")) {
    TM_ASSIGN_OR_RETURN(L.conv_in, ld.matrix(p + "attn_qkv.weight", c.ssm_conv_dim(), E));
    TM_ASSIGN_OR_RETURN(L.ssm_gate, ld.matrix(p + "attn_gate.weight", c.ssm_d_inner, E));
    return {};
  }
  const int64_t S = 2 * D + 2 * R * D;  // one group's rows: q, k, v (R heads), z (R heads)
  TM_ASSIGN_OR_RETURN(const Matrix in, ld.matrix(p + "ssm_in.weight", HK * S, E));
  std::vector<int64_t> qkv, z;
  for (int64_t part = 0; part < 3; ++part)  // the q heads, the k heads, the value heads
    for (int64_t g = 0; g < HK; ++g)
      for (int64_t i = 0; i < (part < 2 ? D : R * D); ++i) qkv.push_back(g * S + part * D + i);
  for (int64_t g = 0; g < HK; ++g)
    for (int64_t i = 0; i < R * D; ++i) z.push_back(g * S + 2 * D + R * D + i);
  L.conv_in = Loader::gather(in, qkv, owned);
  L.ssm_gate = Loader::gather(in, z, owned);
  return {};
}

// A Mamba-1 mixer (ArchSpec::mamba1), llama.cpp's mamba tensors and shapes.
Status load_mamba1_layer(Loader& ld, const ModelConfig& c, const std::string& p, LayerWeights& L) {
  const int64_t E = c.n_embd, DI = c.ssm_d_inner, DS = c.ssm_d_state, R = c.ssm_dt_rank;
  TM_ASSIGN_OR_RETURN(L.conv_in, ld.matrix(p + "ssm_in.weight", 2 * DI, E));
  TM_ASSIGN_OR_RETURN(L.conv_kernel, ld.vec2d(p + "ssm_conv1d.weight", c.ssm_d_conv, DI));
  TM_ASSIGN_OR_RETURN(L.ssm_conv_b, ld.vec(p + "ssm_conv1d.bias", DI));
  TM_ASSIGN_OR_RETURN(L.ssm_x, ld.matrix(p + "ssm_x.weight", R + 2 * DS, DI));
  TM_ASSIGN_OR_RETURN(L.ssm_dt, ld.matrix(p + "ssm_dt.weight", DI, R));
  TM_ASSIGN_OR_RETURN(L.ssm_dt_b, ld.vec(p + "ssm_dt.bias", DI));
  TM_ASSIGN_OR_RETURN(L.ssm_a, ld.vec2d(p + "ssm_a", DS, DI));
  TM_ASSIGN_OR_RETURN(L.ssm_d, ld.vec(p + "ssm_d", DI));
  TM_ASSIGN_OR_RETURN(L.conv_out, ld.matrix(p + "ssm_out.weight", E, DI));
  const bool normed = c.arch.name == "jamba";  // (llama.cpp: jamba's three norms, with weights, are required)
  TM_ASSIGN_OR_RETURN(L.ssm_dt_norm, ld.opt_vec(p + "ssm_dt_norm.weight", R, normed));
  TM_ASSIGN_OR_RETURN(L.ssm_b_norm, ld.opt_vec(p + "ssm_b_norm.weight", DS, normed));
  TM_ASSIGN_OR_RETURN(L.ssm_c_norm, ld.opt_vec(p + "ssm_c_norm.weight", DS, normed));
  if (L.ssm_dt_norm.empty() != L.ssm_b_norm.empty() || L.ssm_dt_norm.empty() != L.ssm_c_norm.empty())
    return Error{fmt::format("{}: ssm_dt_norm, ssm_b_norm and ssm_c_norm come together", p)};
  return {};
}

// A gated delta net (ModelConfig::is_gdn), llama.cpp's qwen35 tensors and shapes (qwen3next's: above).
Status load_gdn_layer(Loader& ld, const ModelConfig& c, const std::string& p, LayerWeights& L,
                      std::vector<std::shared_ptr<const std::vector<uint8_t>>>& owned) {
  const int64_t E = c.n_embd, H = c.ssm_n_head;
  if (c.arch.gdn_grouped_heads) {
    TM_TRY(load_gdn_grouped(ld, c, p, L, owned));
  } else {
    TM_ASSIGN_OR_RETURN(L.conv_in, ld.matrix(p + "attn_qkv.weight", c.ssm_conv_dim(), E));
    TM_ASSIGN_OR_RETURN(L.ssm_gate, ld.matrix(p + "attn_gate.weight", c.ssm_d_inner, E));
    TM_ASSIGN_OR_RETURN(L.ssm_beta, ld.matrix(p + "ssm_beta.weight", H, E));
    TM_ASSIGN_OR_RETURN(L.ssm_alpha, ld.matrix(p + "ssm_alpha.weight", H, E));
  }
  TM_ASSIGN_OR_RETURN(L.conv_kernel, ld.vec2d(p + "ssm_conv1d.weight", c.ssm_d_conv, c.ssm_conv_dim()));
  TM_ASSIGN_OR_RETURN(L.ssm_dt_b, ld.vec(p + "ssm_dt.bias", H));
  TM_ASSIGN_OR_RETURN(L.ssm_a, ld.vec(p + "ssm_a", H));
  TM_ASSIGN_OR_RETURN(L.ssm_norm, ld.vec(p + "ssm_norm.weight", c.ssm_d_state));
  TM_ASSIGN_OR_RETURN(L.conv_out, ld.matrix(p + "ssm_out.weight", E, c.ssm_d_inner));
  return {};
}

// A layer's attention tensors: q/k/v (deepseek2's latent form, phi3's fused attn_qkv, or apart), their
// biases, q/k norms, the output projection and its bias, gpt-oss's sinks.
// gemma4's layers (ArchSpec::layer_geometry): each its own head size and K/V heads; the layers that
// share another's K/V (ModelConfig::stores_kv false) have none of their own -- llama.cpp loads attn_k /
// attn_v / attn_k_norm there when a file has them and never uses them, as here; attn_v absent on the
// K = V layers (ArchSpec::v_optional). openelm: q, k and v in one attn_qkv of the layer's widths.
Status load_layer_geometry_attention(Loader& ld, const ModelConfig& c, int64_t l, const std::string& p,
                                     LayerWeights& L) {
  const int64_t qd = c.q_dim_of(l), kvd = c.kv_dim_of(l), hd = c.head_dim_of(l);
  if (c.arch.fused_qkv_ffn) {  // openelm: the layer's q, k, v rows in one attn_qkv
    TM_ASSIGN_OR_RETURN(Matrix qkv, ld.matrix(p + "attn_qkv.weight", qd + 2 * kvd, c.n_embd));
    L.wq = Loader::rows_of(qkv, 0, qd);
    L.wk = Loader::rows_of(qkv, qd, kvd);
    L.wv = Loader::rows_of(qkv, qd + kvd, kvd);
    TM_ASSIGN_OR_RETURN(L.q_norm, ld.opt_vec(p + "attn_q_norm.weight", hd, c.arch.qk_norm));
    TM_ASSIGN_OR_RETURN(L.k_norm, ld.opt_vec(p + "attn_k_norm.weight", hd, c.arch.qk_norm));
    TM_ASSIGN_OR_RETURN(L.wo, ld.matrix(p + "attn_output.weight", c.n_embd, qd));
    return {};
  }
  TM_ASSIGN_OR_RETURN(L.wq, ld.matrix(p + "attn_q.weight", qd, c.n_embd));
  TM_ASSIGN_OR_RETURN(L.q_norm, ld.opt_vec(p + "attn_q_norm.weight", hd, c.arch.qk_norm));  // (gemma4's; deci none)
  if (c.stores_kv(l)) {
    TM_ASSIGN_OR_RETURN(L.wk, ld.matrix(p + "attn_k.weight", kvd, c.n_embd));
    if (c.arch.v_optional && !ld.has(p + "attn_v.weight")) {
      L.wv = L.wk;
    } else {
      TM_ASSIGN_OR_RETURN(L.wv, ld.matrix(p + "attn_v.weight", kvd, c.n_embd));
    }
    TM_ASSIGN_OR_RETURN(L.k_norm, ld.opt_vec(p + "attn_k_norm.weight", hd, c.arch.qk_norm));
  } else {
    for (const char* t : {"attn_k.weight", "attn_v.weight"})
      if (ld.has(p + t)) TM_TRY(ld.matrix(p + t, kvd, c.n_embd));
    TM_ASSIGN_OR_RETURN(const std::vector<float> unused, ld.opt_vec(p + "attn_k_norm.weight", hd, false));
    (void)unused;
  }
  TM_ASSIGN_OR_RETURN(L.wo, ld.matrix(p + "attn_output.weight", c.n_embd, qd));
  TM_ASSIGN_OR_RETURN(L.bo, ld.opt_vec(p + "attn_output.bias", c.n_embd, false));  // (deci's, when present)
  return {};
}

Status load_attention_layer(Loader& ld, const GgufFile& f, const ModelConfig& c, const std::string& p, LayerWeights& L) {
  if (c.is_mla()) {
    TM_TRY(load_mla_layer(ld, c, p, L));
  } else if (c.arch.fused_qkv_ffn && f.find_tensor(p + "attn_qkv.weight")) {
    // q, k, v rows stacked in one tensor, in that order
    TM_ASSIGN_OR_RETURN(Matrix qkv, ld.matrix(p + "attn_qkv.weight", c.q_dim() + 2 * c.kv_dim(), c.n_embd));
    L.wq = Loader::rows_of(qkv, 0, c.q_dim());
    L.wk = Loader::rows_of(qkv, c.q_dim(), c.kv_dim());
    L.wv = Loader::rows_of(qkv, c.q_dim() + c.kv_dim(), c.kv_dim());
  } else {
    TM_ASSIGN_OR_RETURN(L.wq, ld.matrix(p + "attn_q.weight", c.q_proj_dim(), c.n_embd));  // (qwen35: + gates)
    TM_ASSIGN_OR_RETURN(L.wk, ld.matrix(p + "attn_k.weight", c.kv_dim(), c.n_embd));
    TM_ASSIGN_OR_RETURN(L.wv, ld.matrix(p + "attn_v.weight", c.kv_dim(), c.n_embd));
  }
  if (c.arch.fused_qkv_ffn && f.find_tensor(p + "attn_qkv.bias")) {  // llama.cpp adds it when present
    TM_ASSIGN_OR_RETURN(auto b, ld.vec(p + "attn_qkv.bias", c.q_dim() + 2 * c.kv_dim()));
    L.bq.assign(b.begin(), b.begin() + c.q_dim());
    L.bk.assign(b.begin() + c.q_dim(), b.begin() + c.q_dim() + c.kv_dim());
    L.bv.assign(b.begin() + c.q_dim() + c.kv_dim(), b.end());
  } else {
    TM_ASSIGN_OR_RETURN(L.bq, ld.opt_vec(p + "attn_q.bias", c.q_dim(), c.arch.qkv_bias));
    TM_ASSIGN_OR_RETURN(L.bk, ld.opt_vec(p + "attn_k.bias", c.kv_dim(), c.arch.qkv_bias));
    TM_ASSIGN_OR_RETURN(L.bv, ld.opt_vec(p + "attn_v.bias", c.kv_dim(), c.arch.qkv_bias));
  }
  const bool full = c.arch.qk_norm_full;  // olmoe: over the whole projection
  TM_ASSIGN_OR_RETURN(L.q_norm, ld.opt_vec(p + "attn_q_norm.weight", full ? c.q_dim() : c.head_dim, c.arch.qk_norm));
  TM_ASSIGN_OR_RETURN(L.k_norm, ld.opt_vec(p + "attn_k_norm.weight", full ? c.kv_dim() : c.head_dim, c.arch.qk_norm));
  if (c.arch.qk_norm_bias_unused) {  // (apertus: read, as llama.cpp reads them, and not used)
    for (const char* b : {"attn_q_norm.bias", "attn_k_norm.bias"}) {
      TM_ASSIGN_OR_RETURN(const std::vector<float> unused, ld.opt_vec(p + b, c.head_dim, false));
      (void)unused;
    }
  }
  TM_ASSIGN_OR_RETURN(L.wo, ld.matrix(p + "attn_output.weight", c.n_embd, c.attn_out_dim()));
  TM_ASSIGN_OR_RETURN(L.bo, ld.opt_vec(p + "attn_output.bias", c.n_embd, c.arch.attn_out_bias));
  if (c.arch.attn_gate_proj) {  // afmoe
    TM_ASSIGN_OR_RETURN(L.wq_gate, ld.matrix(p + "attn_gate.weight", c.q_dim(), c.n_embd));
  }
  if (c.arch.attn_sinks) {
    TM_ASSIGN_OR_RETURN(L.attn_sinks, ld.vec(p + "attn_sinks.weight", c.n_head));
  }
  return {};
}

}  // namespace

DType type_with_most_bytes(const std::map<DType, uint64_t>& bytes_by_type) {
  DType best = DType::F32;
  uint64_t most = 0;
  for (const auto& [t, b] : bytes_by_type)
    if (b > most) {
      most = b;
      best = t;
    }
  return best;
}

Matrix matrix_of(const GgufTensorInfo& t, std::string name) {
  Matrix m;
  m.type = t.type;
  m.rows = t.ne[1];
  m.cols = t.ne[0];
  m.data = t.data;
  m.row_bytes = static_cast<size_t>(t.nbytes / static_cast<uint64_t>(m.rows));
  m.name = std::move(name);
  return m;
}

const float* ModelWeights::rope_freq_factors(const ModelConfig& c, int64_t n_ctx) const {
  if (!rope_freqs.empty()) return rope_freqs.data();
  if (rope_factors_long.empty()) return nullptr;
  return n_ctx > c.n_ctx_orig ? rope_factors_long.data() : rope_factors_short.data();
}

Result<std::shared_ptr<Model>> Model::load(const std::string& path) {
  auto f = GgufFile::open(path);
  if (!f.ok()) return f.error_value();
  auto m = from_gguf(std::make_shared<const GgufFile>(std::move(f).value()));
  if (!m.ok()) return Error{fmt::format("{}: {}", path, m.error())};
  (*m)->path_ = path;
  return m;
}

Result<std::shared_ptr<Model>> Model::from_gguf(std::shared_ptr<const GgufFile> file) {
  auto model = std::shared_ptr<Model>(new Model());
  model->file_ = file;
  model->path_ = file->path();
  TM_ASSIGN_OR_RETURN(model->config_, read_model_config(*file));
  const ModelConfig& c = model->config_;
  ModelWeights& w = model->weights_;
  Loader ld(*file);
  TM_ASSIGN_OR_RETURN(w.token_embd, ld.matrix("token_embd.weight", c.n_vocab, c.n_embd));
  if (c.arch.pos_embd) {  // (mpt: when the file has it; its context is then unbounded by it)
    if (c.arch.pos_embd_required || ld.has("position_embd.weight")) {
      TM_ASSIGN_OR_RETURN(w.pos_embd, ld.matrix("position_embd.weight", c.n_pos_embd, c.n_embd));
    } else {
      model->config_.n_pos_embd = 0;
    }
  }
  if (c.arch.embd_norm) {
    TM_ASSIGN_OR_RETURN(w.embd_norm, ld.vec("token_embd_norm.weight", c.n_embd));
    TM_ASSIGN_OR_RETURN(w.embd_norm_b, ld.vec("token_embd_norm.bias", c.n_embd));
  }
  // olmo's LayerNorms have no weights: ones stand in for them
  const std::vector<float> ones(c.arch.norm_weightless ? static_cast<size_t>(c.n_embd) : 0, 1.0f);
  auto norm = [&](const std::string& tensor) -> Result<std::vector<float>> {
    if (c.arch.norm_weightless) return ones;
    return ld.vec(tensor, c.n_embd);
  };
  auto norm_bias = [&](const std::string& name) -> Result<std::vector<float>> {
    if (!c.arch.norm_bias) return std::vector<float>{};
    return ld.opt_vec(name + ".bias", c.n_embd, !c.arch.optional_biases);
  };
  TM_ASSIGN_OR_RETURN(w.output_norm, norm(c.arch.output_norm_name + ".weight"));
  TM_ASSIGN_OR_RETURN(w.output_norm_b, norm_bias("output_norm"));
  if (c.arch.output_bias) {
    TM_ASSIGN_OR_RETURN(w.output_b, ld.vec("output.bias", c.n_vocab));
  }
  if (c.tied_output) {
    w.output = w.token_embd;
  } else {
    TM_ASSIGN_OR_RETURN(w.output, ld.matrix("output.weight", c.n_vocab, c.n_embd));
  }
  if (c.rope_scaling == RopeScaling::Llama3) {
    TM_ASSIGN_OR_RETURN(w.rope_freqs, ld.vec("rope_freqs.weight", c.n_rot / 2));
  }
  // LongRoPE: both or neither (llama.cpp loads them whenever present, whatever the architecture)
  if (c.rope_scaling == RopeScaling::LongRope) {
    TM_ASSIGN_OR_RETURN(w.rope_factors_short, ld.vec("rope_factors_short.weight", c.n_rot / 2));
    TM_ASSIGN_OR_RETURN(w.rope_factors_long, ld.vec("rope_factors_long.weight", c.n_rot / 2));
  }
  if (c.n_embd_per_layer > 0) {  // gemma4's per-layer embeddings
    const int64_t width = c.n_embd_per_layer * c.n_layer;
    TM_ASSIGN_OR_RETURN(w.per_layer_tok_embd, ld.matrix("per_layer_token_embd.weight", c.n_vocab, width));
    TM_ASSIGN_OR_RETURN(w.per_layer_model_proj, ld.matrix("per_layer_model_proj.weight", width, c.n_embd));
    TM_ASSIGN_OR_RETURN(w.per_layer_proj_norm, ld.vec("per_layer_proj_norm.weight", c.n_embd_per_layer));
  }
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const std::string p = fmt::format("blk.{}.", l);
    // (olmo2 has none: L.attn_norm / L.ffn_norm stay empty; nor have deci's layers without attention)
    if (c.arch.pre_norms && !(c.arch.variable_layers && !c.has_mixer(l))) {
      TM_ASSIGN_OR_RETURN(L.attn_norm, norm(p + "attn_norm.weight"));
      TM_ASSIGN_OR_RETURN(L.attn_norm_b, norm_bias(p + "attn_norm"));
    }
    // The FFN's own norm: not in the parallel block (phi2's, cohere's FFN read the attention's normed
    // input) unless the family has one there (gptneox); nemotron_h's FFN layers read their attn_norm's.
    const bool ffn_norm = c.arch.pre_norms && (!c.arch.parallel_block || c.arch.parallel_ffn_norm) &&
                          !c.arch.single_block_layers && c.has_ffn(l);
    if (ffn_norm) {
      TM_ASSIGN_OR_RETURN(L.ffn_norm, norm(p + c.arch.ffn_norm_name + c.arch.ffn_norm_suffix));
      TM_ASSIGN_OR_RETURN(L.ffn_norm_b, norm_bias(p + c.arch.ffn_norm_name));
    }
    if (!c.arch.attn_norm_alt.empty() && ld.has(p + c.arch.attn_norm_alt + ".weight")) {
      // falcon-40b: attention reads attn_norm_2's norm, the parallel FFN attn_norm's
      L.ffn_norm = std::move(L.attn_norm);
      L.ffn_norm_b = std::move(L.attn_norm_b);
      TM_ASSIGN_OR_RETURN(L.attn_norm, norm(p + c.arch.attn_norm_alt + ".weight"));
      TM_ASSIGN_OR_RETURN(L.attn_norm_b, norm_bias(p + c.arch.attn_norm_alt));
    }
    if (c.is_conv(l)) {  // lfm2: a short convolution in place of attention
      TM_TRY(load_shortconv_layer(ld, c, p, L));
    } else if (!c.has_mixer(l)) {  // nemotron_h: an FFN-only layer
    } else if (c.is_gdn(l)) {  // qwen35: a gated delta net in place of attention
      TM_TRY(load_gdn_layer(ld, c, p, L, w.owned));
    } else if (c.is_ssm(l) && c.arch.mamba1) {  // mamba: a Mamba-1 mixer
      TM_TRY(load_mamba1_layer(ld, c, p, L));
    } else if (c.is_ssm(l)) {  // granitehybrid: a Mamba-2 mixer in place of attention (falcon-h1: beside it)
      TM_TRY(load_ssm_layer(ld, c, p, L));
    }
    if (c.is_linear_attn(l)) {  // deci's "linear attention": attn_output over the normed input
      TM_ASSIGN_OR_RETURN(L.wo, ld.matrix(p + "attn_output.weight", c.n_embd, c.n_embd));
      TM_ASSIGN_OR_RETURN(L.bo, ld.opt_vec(p + "attn_output.bias", c.n_embd, false));
    } else if (c.has_attention(l) && c.arch.layer_geometry) {
      TM_TRY(load_layer_geometry_attention(ld, c, l, p, L));
    } else if (c.has_attention(l)) {
      TM_TRY(load_attention_layer(ld, *file, c, p, L));
    }
    if (c.n_embd_per_layer > 0) {  // gemma4's per-layer embedding block
      TM_ASSIGN_OR_RETURN(L.per_layer_inp_gate, ld.matrix(p + "inp_gate.weight", c.n_embd_per_layer, c.n_embd));
      TM_ASSIGN_OR_RETURN(L.per_layer_proj, ld.matrix(p + "proj.weight", c.n_embd, c.n_embd_per_layer));
      TM_ASSIGN_OR_RETURN(L.per_layer_post_norm, ld.vec(p + "post_norm.weight", c.n_embd));
    }
    if (c.arch.layer_geometry) {
      TM_ASSIGN_OR_RETURN(const std::vector<float> scale, ld.opt_vec(p + "layer_output_scale.weight", 1, false));
      if (!scale.empty()) L.out_scale = scale[0];
    }
    if (c.arch.post_norms) {
      TM_ASSIGN_OR_RETURN(L.attn_post_norm, ld.vec(p + "post_attention_norm.weight", c.n_embd));
      TM_ASSIGN_OR_RETURN(L.ffn_post_norm, ld.vec(p + "post_ffw_norm.weight", c.n_embd));
    }
    if (!c.has_ffn(l)) continue;  // (nemotron_h's mixer and attention layers)
    if (c.layer_is_moe(l) && c.arch.moe_beside_dense) {  // gemma4: the experts beside the dense FFN below
      TM_TRY(load_gemma4_experts(ld, c, p, L));
    } else if (c.layer_is_moe(l)) {
      TM_TRY(load_moe_layer(ld, *file, c, p, L));
      continue;
    }
    const int64_t ff = c.n_ff_of(l);  // (gemma4, deci: per layer)
    if (c.arch.ffn_bias) {  // the FFN's biases (mpt: when the file has them; jais: the gate's too)
      TM_ASSIGN_OR_RETURN(L.ffn_up_b, ld.opt_vec(p + "ffn_up.bias", ff, !c.arch.optional_biases));
      TM_ASSIGN_OR_RETURN(L.ffn_down_b, ld.opt_vec(p + "ffn_down.bias", c.n_embd, !c.arch.optional_biases));
      if (!c.arch.ffn_ungated) {
        TM_ASSIGN_OR_RETURN(L.ffn_gate_b, ld.opt_vec(p + "ffn_gate.bias", ff, !c.arch.optional_biases));
      }
    }
    if (c.arch.ffn_ungated) {  // starcoder2: up, activation, down
      TM_ASSIGN_OR_RETURN(L.w_up, ld.matrix(p + "ffn_up.weight", ff, c.n_embd));
      TM_ASSIGN_OR_RETURN(L.w_down, ld.matrix(p + "ffn_down.weight", c.n_embd, ff));
      continue;
    }
    if (c.arch.fused_qkv_ffn && !file->find_tensor(p + "ffn_gate.weight")) {
      // gate rows first, then up (llama.cpp's swiglu over the fused product takes silu of the first half)
      TM_ASSIGN_OR_RETURN(Matrix gate_up, ld.matrix(p + "ffn_up.weight", 2 * ff, c.n_embd));
      L.w_gate = Loader::rows_of(gate_up, 0, ff);
      L.w_up = Loader::rows_of(gate_up, ff, ff);
    } else {
      TM_ASSIGN_OR_RETURN(L.w_gate, ld.matrix(p + "ffn_gate.weight", ff, c.n_embd));
      TM_ASSIGN_OR_RETURN(L.w_up, ld.matrix(p + "ffn_up.weight", ff, c.n_embd));
    }
    TM_ASSIGN_OR_RETURN(L.w_down, ld.matrix(p + "ffn_down.weight", c.n_embd, ff));
  }
  if (const GgufTensorInfo* t = ld.unread(c.n_layer, c.arch.bidirectional))
    return Error{fmt::format("tensor '{}' is not part of a {} model as tokenmill (and llama.cpp) computes it; "
                             "the file holds {} tensors",
                             t->name, c.arch.name, file->tensors().size())};
  model->weight_bytes_ = ld.bytes;
  model->n_params_ = ld.params;
  model->main_type_ = type_with_most_bytes(ld.bytes_by_type);
  return model;
}

}  // namespace tmill
