// A loaded model: hyper-parameters plus weight views into the mapped GGUF file.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/matrix.h"
#include "model/config.h"

namespace tmill {

struct LayerWeights {
  std::vector<float> attn_norm;  // (n_embd)
  // starcoder2 (ArchSpec::norm_bias, ffn_bias): the LayerNorms' biases and the FFN's (jais: the gated
  // FFN's, ffn_gate_b too), else empty
  std::vector<float> attn_norm_b, ffn_norm_b;  // (n_embd)
  std::vector<float> ffn_gate_b, ffn_up_b;      // (n_ff)
  std::vector<float> ffn_down_b;                // (n_embd)
  // wq/wk/wv and w_gate/w_up may be row views of one fused tensor (attn_qkv, ffn_up: phi3); such a
  // view keeps the fused tensor's name.
  Matrix wq;                     // (n_head*head_dim rows, n_embd cols)
  Matrix wk;                     // (n_head_kv*head_dim, n_embd)
  Matrix wv;                     // (n_head_kv*head_dim, n_embd)
  std::vector<float> bq, bk, bv; // (q_dim), (kv_dim), (kv_dim) — qwen2 only, else empty
  std::vector<float> q_norm;     // (head_dim) — qwen3 only, else empty
  std::vector<float> k_norm;     // (head_dim) — qwen3 only, else empty
  Matrix wo;                     // (n_embd, n_head*head_dim)
  Matrix wq_gate;                // (n_head*head_dim, n_embd) afmoe's attn_gate: sigmoid(wq_gate x) gates the output
  // RMSNorm of the attention output and of the FFN output before their residual adds (gemma2/3), else empty
  std::vector<float> attn_post_norm, ffn_post_norm;  // (n_embd)
  std::vector<float> bo;         // (n_embd) attn_output.bias (gpt-oss), else empty
  std::vector<float> attn_sinks; // (n_head) learned sink logit per query head (gpt-oss), else empty
  std::vector<float> ffn_norm;   // (n_embd)
  Matrix w_gate;                 // (n_ff, n_embd)
  Matrix w_up;                   // (n_ff, n_embd)
  Matrix w_down;                 // (n_embd, n_ff)
  // Mixture of experts (ModelConfig::is_moe; the dense w_gate/w_up/w_down are then empty):
  // the router and one row view per expert into each 3-D ffn_*_exps tensor (views keep its name).
  Matrix ffn_gate_inp;                         // (n_expert, n_embd) router
  std::vector<Matrix> gate_exps, up_exps;      // n_expert x (n_ff_exp, n_embd)
  std::vector<Matrix> down_exps;               // n_expert x (n_embd, n_ff_exp)
  // The shared expert (qwen2moe, glm4moe) and its gate vector (qwen2moe only), else empty
  Matrix gate_shexp, up_shexp;                 // (n_ff_shexp, n_embd)
  Matrix down_shexp;                           // (n_embd, n_ff_shexp)
  std::vector<float> gate_inp_shexp;           // (n_embd)
  // glm4moe's selection bias (ArchSpec::moe_selection_bias: exp_probs_b.bias), else empty
  std::vector<float> exp_probs_b;              // (n_expert)
  bool has_shared_expert() const { return up_shexp.valid(); }  // (nemotron_h_moe's is ungated)
  // deepseek2's latent attention (ModelConfig::is_mla; wq is then attn_q or attn_q_b, wk / wv empty):
  // attn_q_a and its norm (when mla_q_rank > 0), attn_kv_a_mqa (latent + RoPE rows) and the latent's
  // norm, and per head one row view of attn_k_b (mla_kv_rank x mla_nope) and of attn_v_b
  // (mla_v x mla_kv_rank).
  Matrix wq_a, wkv_a;
  std::vector<float> q_a_norm, kv_a_norm;
  std::vector<Matrix> wk_b, wv_b;
  // lfm2's short convolution layers (ModelConfig::is_conv; wq/wk/wv/wo then empty): in_proj (3 x n_embd
  // rows: the gates b and c, then x), the depthwise kernel (n_embd x shortconv_l, channel-major, the
  // oldest input's weight first) and out_proj.
  // Mamba-2 mixers (ModelConfig::is_ssm) use the same three for ssm_in (z, x, B, C, dt rows), ssm_out
  // and the convolution's kernel (ssm_conv_dim x ssm_d_conv), with the kernel's bias (empty: none), the
  // per-head dt bias, A (negative decay rates) and D (skip), and the gated norm's weights (d_inner).
  Matrix conv_in, conv_out;
  std::vector<float> conv_kernel;
  std::vector<float> ssm_conv_b, ssm_dt_b, ssm_a, ssm_d, ssm_norm;
  // Gated delta nets (ModelConfig::is_gdn) use conv_in for attn_qkv (q, k, v rows: the convolution's
  // input), conv_out for ssm_out, conv_kernel, ssm_dt_b, ssm_a (per value head) and ssm_norm (a head's
  // width), plus these: attn_gate (z), ssm_beta and ssm_alpha (a row per value head).
  Matrix ssm_gate, ssm_beta, ssm_alpha;
  // Mamba-1 mixers (ArchSpec::mamba1) use conv_in for ssm_in (x, then z rows), conv_out, conv_kernel
  // (d_inner channels), ssm_conv_b, ssm_dt_b (per channel), ssm_a (d_inner x d_state, channel-major) and
  // ssm_d (per channel), plus x_proj (ssm_x: dt's rank, then B and C rows) and dt_proj (ssm_dt).
  Matrix ssm_x, ssm_dt;
  std::vector<float> ssm_dt_norm, ssm_b_norm, ssm_c_norm;  // jamba: RMS norms' weights on dt, B and C (else empty)
  // gpt-oss's biases (ArchSpec::moe_biases, else empty): the router's, and each expert's, expert-major
  std::vector<float> ffn_gate_inp_b;           // (n_expert)
  std::vector<float> gate_exps_b, up_exps_b;   // (n_expert * n_ff_exp)
  std::vector<float> down_exps_b;              // (n_expert * n_embd)
  // gemma4's per-layer embeddings (ModelConfig::n_embd_per_layer): inp_gate (n_embd_per_layer, n_embd),
  // proj (n_embd, n_embd_per_layer), post_norm (n_embd); and the layer's output scale (1: none)
  // gemma4's expert layers (26B-A4B): the router's input scale and the experts' output scales (n_embd,
  // n_expert; empty: none), the norms around the experts and the dense FFN beside them (n_embd)
  std::vector<float> ffn_gate_inp_s, down_exps_s, pre_ffw_norm_2, post_ffw_norm_1, post_ffw_norm_2;
  Matrix per_layer_inp_gate, per_layer_proj;
  std::vector<float> per_layer_post_norm;
  float out_scale = 1.0f;
};

struct ModelWeights {
  Matrix token_embd;               // (n_vocab, n_embd)
  std::vector<float> output_norm;  // (n_embd)
  std::vector<float> output_norm_b;  // (n_embd) starcoder2's / phi2's LayerNorm bias, else empty
  std::vector<float> output_b;       // (n_vocab) phi2's output bias, else empty
  Matrix output;                   // (n_vocab, n_embd); the token_embd view when tied
  Matrix pos_embd;                 // (n_pos_embd, n_embd) learned positions (gpt2, starcoder, mpt), else invalid
  std::vector<float> embd_norm, embd_norm_b;  // (n_embd) bloom's LayerNorm of the embeddings, else empty
  // gemma4's per-layer embeddings: each token's n_layer x n_embd_per_layer inputs (n_vocab rows), their
  // projection from the scaled embedding (n_layer * n_embd_per_layer, n_embd) and its RMSNorm
  // (n_embd_per_layer); invalid / empty without them
  Matrix per_layer_tok_embd, per_layer_model_proj;
  std::vector<float> per_layer_proj_norm;
  std::vector<float> rope_freqs;   // (n_rot/2) llama3 frequency factors, or empty
  std::vector<float> rope_factors_short, rope_factors_long;  // (n_rot/2) LongRoPE (phi3), or empty
  // The frequency divisors RoPE uses when the context served is n_ctx positions (null: none):
  // rope_freqs, else LongRoPE's long factors past n_ctx_orig and its short ones up to it (llama.cpp's rule).
  const float* rope_freq_factors(const ModelConfig& c, int64_t n_ctx) const;
  std::vector<LayerWeights> layers;
  // Matrices the loader assembled from rows of the file's tensors (qwen3next's fused projections,
  // regrouped into the layout the forward reads): their bytes, alive as long as any copy of the weights.
  std::vector<std::shared_ptr<const std::vector<uint8_t>>> owned;
};

// A 2-D GGUF tensor ([cols, rows]) as a Matrix over the file's bytes, named `name`; the caller has checked
// its shape and that its type can be computed with.
Matrix matrix_of(const GgufTensorInfo& t, std::string name);
// The weight type of a model: the type holding the most bytes (the first such on a tie; F32 when empty).
DType type_with_most_bytes(const std::map<DType, uint64_t>& bytes_by_type);

class Model {
 public:
  // Loads a GGUF model file (mmap; weights are used in place).
  static Result<std::shared_ptr<Model>> load(const std::string& path);
  static Result<std::shared_ptr<Model>> from_gguf(std::shared_ptr<const GgufFile> file);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const GgufFile& file() const { return *file_; }
  std::shared_ptr<const GgufFile> file_ptr() const { return file_; }
  const std::string& path() const { return path_; }
  // Bytes of all weight tensors (what decode streams per token, roughly).
  uint64_t weight_bytes() const { return weight_bytes_; }
  int64_t n_params() const { return n_params_; }
  // The dtype most weights are stored in (for "auto" choices like the KV cache type).
  DType main_weight_type() const { return main_type_; }

 private:
  std::shared_ptr<const GgufFile> file_;
  std::string path_;
  ModelConfig config_;
  ModelWeights weights_;
  uint64_t weight_bytes_ = 0;
  int64_t n_params_ = 0;
  DType main_type_ = DType::F32;
};

}  // namespace tmill
