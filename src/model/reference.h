// The reference forward pass: one sequence, one token at a time, plain scalar float32 code written
// for clarity (llama2.c's run.c style). It is the oracle every faster path is tested against; keep it
// simple and never optimize it.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "model/lora.h"
#include "model/model.h"

namespace tmill {

class ReferenceForward {
 public:
  // max_seq: positions the private (contiguous, float32) KV cache can hold; also the context length
  // that picks LongRoPE's short or long factors (phi3).
  ReferenceForward(std::shared_ptr<const Model> model, int64_t max_seq);

  // Runs token `token` at position `pos` (positions must be fed in order 0, 1, 2, ...)
  // and returns the logits over the vocabulary.
  const std::vector<float>& forward(int32_t token, int64_t pos);
  // Applies a LoRA adapter (y += scale * factor * B (A x) on each adapted matrix) from now on;
  // null: the base model. Set it before position 0.
  void set_lora(std::shared_ptr<const LoraAdapter> adapter, float scale);

 private:
  void swiglu(const Matrix& gate, const Matrix& up, const Matrix& down, const float* x);
  void attention(int64_t l, int64_t pos);
  // xb = rmsnorm(x) with `norm`, or x itself when the family has no pre-norm (olmo2: `norm` empty)
  void pre_norm(const std::vector<float>& norm, const std::vector<float>& bias = {});
  // moe_out_ = the experts (and shared expert) of xb_; route_in: the router's input when not xb_ (gemma4)
  void moe_ffn(const LayerWeights& L, const float* route_in = nullptr);
  // gemma4: this token's per-layer inputs (pl_in_) from the scaled embedding x_; and layer l's end --
  // its per-layer embedding block and output scale on x_
  void per_layer_inputs(int32_t token);
  void per_layer_end(int64_t l);
  // The layer whose cached K/V layer l reads (itself unless it shares another's: gemma4)
  int64_t kv_layer(int64_t l) const;
  void mla_qkv(const LayerWeights& L, int64_t pos, const RopeParams* rope, const float* freq_factors, float temperature);
  void oai_expert(const LayerWeights& L, int32_t e, const float* x);
  void shortconv(const LayerWeights& L, int64_t slot, int64_t pos);  // lfm2: xb = the convolution block of xb
  void ssm_conv(const LayerWeights& L, float* conv, const float* in);  // recurrent layers: into ssm_xbc_
  void mamba2(const LayerWeights& L, int64_t slot, int64_t pos);  // granitehybrid: xb = the mixer of xb
  void mamba1(const LayerWeights& L, int64_t slot, int64_t pos);  // mamba: xb = the Mamba-1 mixer of xb
  void delta_net(const LayerWeights& L, int64_t slot, int64_t pos);  // qwen35: xb = the gated delta net of xb

  // y (the product of base matrix `w`) += the adapter's delta for it, when adapted.
  void lora_add(const LoraWeight* w, const float* x, float* y);
  std::shared_ptr<const LoraAdapter> lora_;
  float lora_scale_ = 1.0f;
  std::vector<float> lora_t_, lora_d_;  // A x, B (A x)
  std::shared_ptr<const Model> model_;
  int64_t max_seq_;
  // activations
  std::vector<float> x_;       // (n_embd) residual stream
  std::vector<float> xb_;      // (n_embd) normed input of a sub-block
  std::vector<float> xn_;      // (n_embd) the parallel block's normed input (cohere)
  std::vector<float> q_;       // (q_dim)
  std::vector<float> k_;       // (kv_dim)
  std::vector<float> v_;       // (kv_dim)
  std::vector<float> att_out_; // (q_dim) attention output before wo
  std::vector<float> att_;     // (max_seq) scores of one head
  std::vector<float> hb_;      // (max FFN rows) gate
  std::vector<float> hb2_;     // (max FFN rows) up
  std::vector<float> router_;  // (n_expert) router logits
  std::vector<float> moe_out_; // (n_embd) the MoE FFN's output
  std::vector<float> mla_out_; // (n_head x mla_v) MLA's per-head values (deepseek2)
  std::vector<float> logits_;  // (n_vocab)
  std::vector<float> pl_in_;   // gemma4: (n_layer * n_embd_per_layer) this token's per-layer inputs
  std::vector<float> pl_h_;    // gemma4: (n_embd_per_layer)
  std::vector<float> row_;     // (max(n_embd, n_ff, q_dim)) one dequantized weight row
  // caches
  std::vector<float> key_cache_;    // (n_layer, max_seq, kv_dim)
  std::vector<float> value_cache_;  // (n_layer, max_seq, kv_dim)
  std::vector<float> conv_inputs_;  // (convolution layers, max_seq, n_embd) each position's b * x (lfm2)
  std::vector<float> conv_bcx_;     // (3 n_embd) in_proj's output
  std::vector<float> ssm_state_;    // (mixer layers, ssm_state_floats) the convolution's inputs, then S
  std::vector<float> ssm_zx_, ssm_xbc_, ssm_y_;  // ssm_in's output, the convolution's, the scan's
  std::vector<float> qg_, gate_;    // (2 q_dim, q_dim) gated attention's q projection and gates (qwen35)
};

// Building blocks of the reference, exposed for kernel tests.
namespace ref {
// y (rows) = W (rows x cols) x (cols), W dequantized row by row, accumulation in float in index order.
void matvec(const Matrix& w, const float* x, float* y, std::vector<float>& row_scratch);
// o = weight * x / sqrt(mean(x^2) + eps)
void rmsnorm(float* o, const float* x, const float* weight, int64_t n, float eps);
void softmax(float* x, int64_t n);
// Softmax with an attention sink (gpt-oss): as if one more logit `sink` (value not used) took part,
// so the n weights sum to less than 1 (ggml's soft_max with sinks).
void softmax_with_sink(float* x, int64_t n, float sink);
float silu(float x);
// GELU, tanh approximation (ggml_gelu): 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2)))
float gelu_tanh(float x);
// Soft-capping (gemma2's attention scores, gemma logits): cap * tanh(x / cap)
float softcap(float x, float cap);
// gpt-oss's clamped SwiGLU of one gate and up value (llama.cpp's swiglu_oai, alpha 1.702, limit 7):
// min(g, 7) * sigmoid(1.702 * min(g, 7)) * (clamp(u, -7, 7) + 1).
float swiglu_oai(float g, float u);
// Softmax over all n_expert router logits, the k most probable experts (ties: lower index first)
// with their probabilities, renormalized to sum 1 when `norm`: llama.cpp's softmax gating.
// softmax_topk (gpt-oss): the k largest logits, weighted by a softmax over those k logits only.
std::vector<std::pair<int32_t, float>> moe_route(const float* logits, int64_t n_expert, int64_t k, bool norm,
                                                 bool softmax_topk = false);
// The general form: `gate` as above, or sigmoid scores (glm4moe) chosen by score + selection_bias
// (may be null) and weighted by score; renormalized when gate.norm (the sum clamped to >= 2^-14, as
// llama.cpp), then times gate.scale. Returned best first.
std::vector<std::pair<int32_t, float>> moe_route(const float* logits, int64_t n_expert, int64_t k,
                                                 const ModelConfig::MoeGate& gate, const float* selection_bias);
// Rotates one head's vector (head_dim values; the first n_rot are rotated) for position pos as
// ggml_rope_ext does with the layer's parameters: theta_extrap = pos theta^(-2i/n_rot) / factor_i,
// linear scaling pos * freq_scale, YaRN's blend of the two per rotation pair; the rotated values are
// scaled by the attention factor (LongRoPE's; YaRN's gain).
void rope(float* vec, int64_t n_rot, int64_t pos, const RopeParams& r, RopeLayout layout, const float* freq_factors);
}  // namespace ref

}  // namespace tmill
