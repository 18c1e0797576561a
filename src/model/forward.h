// The batched forward pass: one call per engine step over a flattened batch that mixes prefill
// chunks and decode tokens. Matrix products run over all tokens of the step at once; attention runs
// per sequence through its block table. Tested against ReferenceForward.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "model/batch.h"
#include "model/kv_storage.h"
#include "model/lora_batch.h"
#include "model/mamba2.h"
#include "model/mla.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/rope.h"

namespace tmill {

class ThreadPool;

// Optional observer of every weight product's input (imatrix collection, activation statistics).
// Called on the thread that runs Forward::run, before the product, with the weight's tensor name
// ("blk.0.attn_q.weight"; "token_embd.weight" for a tied output) and its input: n_rows rows of
// n_cols contiguous floats (one row per batch token; for the output projection only the rows that
// produce logits). Q/K/V and gate/up share an input and are reported once per weight.
class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;
  virtual void on_matmul_input(const std::string& weight_name, const float* x, int64_t n_rows, int64_t n_cols) = 0;
  // MoE expert products (model/moe.h): the rows routed to matrix `expert` of the n_expert in the 3-D
  // weight ("blk.0.ffn_up_exps.weight"); the down projection's input is SwiGLU's output. Default: ignored.
  virtual void on_expert_matmul_input(const std::string& weight_name, int64_t expert, int64_t n_expert, const float* x,
                                      int64_t n_rows, int64_t n_cols) {
    (void)weight_name, (void)expert, (void)n_expert, (void)x, (void)n_rows, (void)n_cols;
  }
};

class Forward {
 public:
  // Prepares every weight (one-time repacking) and the RoPE tables. pool may be null (1 thread).
  Forward(std::shared_ptr<const Model> model, ThreadPool* pool);

  // Computes the batch, writing its K/V into `kv` at the slots its block tables give, and returns
  // logits rows (n_vocab floats each) in seq order: one per Last seq, n_tokens per All seq.
  // Sequences bound to a LoRA adapter (batch.loras) get its deltas on every adapted matrix.
  void run(const ForwardBatch& batch, KvStorage& kv, std::vector<float>& logits);

  const Model& model() const { return *model_; }
  // The context length (positions per sequence) this forward serves; it picks LongRoPE's short or
  // long factors (phi3) as llama.cpp does with its n_ctx. Default: the model's trained context, as
  // llama.cpp's default n_ctx. Set it before the first run (K already cached would not match).
  void set_context_length(int64_t n_ctx);
  // Bytes of weights the forward pass keeps in memory: every prepared matrix's packed layout and
  // huge-page copy (F16 has two: row-major for one token, bf16 x16 for batches), plus what it still
  // reads from the file mapping (the token embedding rows, matrices used in place) and the norm and
  // bias vectors. Can exceed the file's weight bytes (Model::weight_bytes).
  uint64_t weight_bytes() const;
  // Of weight_bytes: what is read in place from the file mapping (the token embedding, a tied output,
  // matrices without a copy). The rest is anonymous memory of this forward's own; two models of one
  // file share these pages (the page cache) but not the rest. MoE experts count as the rest.
  uint64_t mapped_weight_bytes() const;
  // Null (the default) costs one untaken branch per product. Not owned; must outlive its use.
  void set_activation_observer(ActivationObserver* observer) { observer_ = observer; }
  // MoE models: the experts the last layer of the last run computed (tests).
  const std::vector<int32_t>& last_active_experts() const { return moe_.active_experts(); }

 private:
  struct PreparedLayer {
    PreparedMatrix wq, wk, wv, wo, gate, up, down;  // gate/up/down empty in MoE layers
    PreparedMatrix conv_in, conv_out;                // lfm2's convolution layers (wq..wo then empty)
    PreparedMatrix gdn_gate, gdn_beta, gdn_alpha;    // a gated delta net's other projections (qwen35)
    PreparedMatrix mamba_x, mamba_dt;                // a Mamba-1 mixer's x_proj and dt_proj
    std::vector<float> conv_kernel_t;                // a recurrent layer's convolution kernel tap-major
    PreparedMoe moe;                                 // MoE layers (ModelConfig::layer_is_moe)
    PreparedMla mla;                                 // latent attention (ModelConfig::is_mla; wq/wk/wv empty)
    PreparedMatrix pl_gate, pl_proj;                 // gemma4's per-layer embedding block
    PreparedMatrix attn_gate;                        // afmoe's attention output gate
  };
  void ensure_scratch(int64_t n_tokens);
  // A layer's attention block on xb (N rows, normed) into xb: q/k/v, their K/V into the cache,
  // attention, the output projection (MLA's too).
  void attention_block(const ForwardBatch& batch, KvStorage& kv, int64_t l, bool lora);
  void attention(const ForwardBatch& batch, const KvStorage& kv, int64_t layer);
  // A convolution layer's block (lfm2, model/shortconv.h) on xb into xb.
  void conv_block(const ForwardBatch& batch, KvStorage& kv, int64_t l);
  // A Mamba-2 mixer's block (granitehybrid, model/mamba2.h) on xb into xb.
  void ssm_block(const ForwardBatch& batch, KvStorage& kv, int64_t l);
  // A Mamba-1 mixer's block (mamba, model/mamba1.h) on xb into xb.
  void mamba1_block(const ForwardBatch& batch, KvStorage& kv, int64_t l);
  // A gated delta net's block (qwen35, model/gated_delta_net.h) on xb into xb.
  void gdn_block(const ForwardBatch& batch, KvStorage& kv, int64_t l);
  // What layer l's recurrent step takes besides its weights (model/mamba2.h SsmStep).
  SsmStep ssm_step(int64_t l) {
    return {layers_[static_cast<size_t>(l)].conv_kernel_t.data(), ssm_ones_.data(), ssm_conv_.data()};
  }
  // x += residual_scale * xb (when add), then xb = rmsnorm(x) with weights `norm` (when not null; an
  // empty norm -- olmo2's absent pre-norms -- copies x): one pass over the residual stream per token
  // range, split across the pool.
  void residual_norm(bool add, const std::vector<float>* norm, int64_t n, const std::vector<float>* bias = nullptr);
  // xb = rmsnorm(xb) with a sub-block's output norm (gemma's post-attention / post-FFN norms); none
  // when the layer has no such weights.
  void post_norm(const std::vector<float>& norm, int64_t n);
  // gemma4's per-layer inputs of the batch's tokens (pl_in_: token, layer, n_embd_per_layer) from the
  // scaled embeddings in x; and layer l's per-layer embedding block on x (residual included).
  void per_layer_inputs(const ForwardBatch& batch, int64_t n);
  void per_layer_block(int64_t l, int64_t n);
  // deci's "linear attention" layer on xb into xb: attn_output (+ its bias)
  void linear_block(int64_t l, int64_t n);
  // gemma4's expert layer (26B-A4B) on xb (ffn_norm's norm) and x into xb: the dense FFN normed by
  // post_ffw_norm_1 plus the experts' sum normed by post_ffw_norm_2
  void gemma4_moe_ffn(int64_t l, int64_t n, bool lora);
  // The FFN of a dense layer on xb (n rows) into xb: gate/up products, SwiGLU or GeGLU, down.
  void dense_ffn(int64_t l, int64_t n, bool lora);
  // [0, n) in chunks of at least `grain` over the pool (inline without one).
  void parallel(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  void observe(const PreparedMatrix& w, const float* x, int64_t n_rows) const {
    if (observer_) observer_->on_matmul_input(w.source().name, x, n_rows, w.cols());
  }

  std::shared_ptr<const Model> model_;
  ThreadPool* pool_;
  ActivationObserver* observer_ = nullptr;
  LoraBatch lora_;  // this run's adapter groups; inactive without adapters
  std::vector<PreparedLayer> layers_;
  PreparedMatrix output_;
  PreparedMatrix pl_model_proj_;  // gemma4: per_layer_model_proj
  // One table per distinct RoPE of the model (ModelConfig::ropes; a layer's LayerAttention::rope
  // picks one): frequencies, linear position scale, cos/sin gain.
  std::vector<RopeTable> ropes_;

  // scratch, (n_tokens, dim) row-major
  int64_t cap_ = 0;
  std::vector<float> x_, xb_, q_, k_, v_, att_, hb_, hb2_, ao_;  // ao_: MLA's attn_output input
  std::vector<float> bcx_;  // (n_tokens, 3 n_embd) a convolution layer's in_proj output (lfm2)
  std::vector<float> zx_;   // (n_tokens, ssm_in_dim or gdn_in_dim) a recurrent layer's projections
  std::vector<float> ssm_conv_, ssm_ones_;  // (n_tokens, ssm_conv_dim) its convolution's output; (ssm_conv_dim) ones
  std::vector<float> m1_xdb_, m1_dt_;       // Mamba-1: (n_tokens, dt_rank + 2 d_state) x_proj's output; (n_tokens, d_inner) dt
  std::vector<float> qg_, gate_;  // (n_tokens, 2 q_dim / q_dim) gated attention's q projection, its gates
  std::vector<float> xn_;  // the parallel block's normed input (cohere), for its FFN (falcon-h1: its mixer)
  std::vector<float> xs_;  // falcon-h1: the attention's output while the mixer runs
  std::vector<float> ones_;  // (head_dim) a weightless norm's weights (llama4's q/k L2 norm)
  std::vector<float> ones_ff_;  // (n_ff) the ungated FFN's activation through gelu_mul / silu_mul (starcoder2)
  std::vector<int32_t> pos_;     // (n_tokens) position of each batch token
  std::vector<int32_t> seq_of_;  // (n_tokens) index of the token's SeqSlice
  std::vector<float> rope_cos_, rope_sin_;  // (ropes, n_tokens, rope_half_)
  int64_t rope_half_ = 0;                   // the widest RoPE's n_rot / 2 (gemma4's differ)
  std::vector<float> xm_, xr_;              // gemma4's expert layers: the experts' and the router's inputs
  std::vector<float> pl_in_, pl_h_;         // gemma4: (n_tokens, n_layer, n_embd_per_layer); (n_tokens, n_embd_per_layer)
  MoeFfn moe_;                              // MoE scratch
  MlaAttention mla_;                        // MLA scratch
};

}  // namespace tmill
