// The forward pass on a GPU backend (gpu/ops.h): the same contract as Forward::run (a flattened batch
// of prefill chunks and decode tokens, K/V written through the block tables, logits rows in seq
// order), with the weights, the paged KV cache and every activation in device memory. Only the token
// ids, positions, block tables, RoPE tables and the logits cross to and from the host each step.
//
// Correct first: the dense families (llama with Mistral's window, qwen2, qwen3, phi3, gemma2, gemma3:
// sliding windows, soft-capping, post-norms, GeGLU), the mixture-of-experts ones (olmoe, qwen3moe,
// qwen2moe's shared expert, Mixtral-style llama: routing on the device, experts' products by expert
// id) and gpt-oss (attention sinks, output and expert biases, the clamped SwiGLU, MXFP4 experts) with
// an F16, INT8 or Q4 KV cache (--kv-cache-dtype f16, int8, q4_0; the CPU's tile layouts); gpu_forward_supports says what a model lacks (a weight type the backend does not read, a
// head size or expert count its kernels do not take). Tested with the host backend
// (model/gpu_host_ops.h) against the reference forward, and with CUDA on a device (tests/unit/gpu).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "core/result.h"
#include "gpu/ops.h"
#include "model/batch.h"
#include "model/gpu_lora.h"
#include "model/kv_storage.h"
#include "model/model.h"
#include "model/rope.h"

namespace tmill {

// Ok when GpuForward computes this model on `ops` with this KV cache type; else what is missing.
Status gpu_forward_supports(const Model& model, const gpu::Ops& ops, DType kv_dtype = DType::F16);

struct GpuForwardOptions {
  // CUDA graphs (vLLM's default; --enforce-eager there turns them off): decode steps -- every sequence
  // one token, every row's logits -- of up to graph_max_batch tokens whose block tables have at most
  // graph_max_blocks entries replay a graph captured once per batch bucket (1, 2, 4, 8, then multiples
  // of 8), the batch padded to its bucket; one launch instead of one per kernel. 0: eager only.
  int64_t graph_max_batch = 0;
  int64_t graph_max_blocks = 0;
  // Scratch allocated at create for steps of up to scratch_tokens tokens (and logits rows) with block
  // tables of scratch_blocks (0: grown on demand; a regrowth drops the graphs, captured again).
  int64_t scratch_tokens = 0;
  int64_t scratch_blocks = 0;
  // The step's embedding rows: gathered on the device from the uploaded token_embd (when the backend
  // reads its type; a tied output shares it), so only the token ids cross each step. true: read on the
  // host and uploaded instead (as for a token_embd type the backend does not read).
  bool host_embeddings = false;
  // LoRA adapters kept on the device (GpuLora's cache; the engine: --max-loras and one more for the
  // requests of an adapter unloaded meanwhile).
  int64_t max_loras = 4;
};

class GpuForward {
 public:
  // Uploads every weight and allocates the paged KV cache (`kv`: its layout and element type; with graphs one
  // spare block more, where padding tokens write) on the backend.
  static Result<std::unique_ptr<GpuForward>> create(std::shared_ptr<const Model> model, gpu::Ops& ops,
                                                    const KvLayout& kv, const GpuForwardOptions& opts = {});
  ~GpuForward();
  GpuForward(const GpuForward&) = delete;
  GpuForward& operator=(const GpuForward&) = delete;

  // Forward::run's contract, LoRA bindings included (their steps run eagerly; adapters uploaded on
  // first use, model/gpu_lora.h). With `argmax`, greedy sampling on the device: *argmax gets each logits row's first maximum and
  // `logits` stays empty (one id per row crosses to the host instead of n_vocab floats).
  Status run(const ForwardBatch& batch, std::vector<float>& logits, std::vector<int32_t>* argmax = nullptr);
  // run in two halves, so the host can work while the device computes (the engine's async
  // scheduling): launch uploads the step's inputs and queues its kernels (with `argmax`, the rows'
  // argmax too) and returns; wait blocks until the step is done and fetches what launch was asked
  // for (argmax non-null exactly when launch's `argmax` was true). One step at a time: launch,
  // wait, launch, ... (copy_block between a launch and its wait is queued after the step).
  Status launch(const ForwardBatch& batch, bool argmax = false);
  Status wait(std::vector<float>& logits, std::vector<int32_t>* argmax = nullptr);
  // Copies every layer's K and V of block src into block dst (copy-on-write for shared blocks).
  Status copy_block(int32_t src, int32_t dst);
  // As Forward::set_context_length (LongRoPE's short or long factors).
  void set_context_length(int64_t n_ctx);

  // What create allocates for the weights (matrices in their file types, norms and biases as f32), and
  // the most scratch a step of n_tokens tokens with n_rows logits rows and block tables of max_blocks
  // takes: the memory plan's inputs (gpu/memory_plan.h).
  static uint64_t weight_bytes_of(const Model& model);
  static uint64_t scratch_bytes_of(const ModelConfig& c, int64_t n_tokens, int64_t max_blocks, int64_t n_rows);

  // The graph bucket a decode step of n tokens is padded to: 1, 2, 4, 8, then multiples of 8, at most
  // max_batch (vLLM's capture sizes).
  static int64_t graph_bucket(int64_t n, int64_t max_batch);

  struct GraphStats {
    int64_t captured = 0, replayed = 0;
  };
  GraphStats graph_stats() const { return graph_stats_; }
  // Device memory the cached LoRA adapters hold (outside the memory plan's weights and KV cache).
  uint64_t lora_device_bytes() const { return lora_->device_bytes(); }

  const Model& model() const { return *model_; }
  const KvLayout& kv_layout() const { return kv_; }

 private:
  // A backend allocation, released with the forward.
  struct Buf {
    void* p = nullptr;
    size_t bytes = 0;
  };
  struct DevMatrix {
    DType type = DType::F32;
    int64_t rows = 0, cols = 0;
    size_t row_bytes = 0;
    const void* p = nullptr;
  };
  // A layer's experts: expert e's matrix starts e * rows * row_bytes after p (gpu::gemm_id).
  struct DevExperts {
    DevMatrix gate, up, down;
  };
  struct DevLayer {
    DevMatrix wq, wk, wv, wo, gate, up, down;
    DevMatrix router, gate_sh, up_sh, down_sh, gate_inp_sh;  // MoE: router; the shared expert
    DevExperts exps;
    const float *attn_norm = nullptr, *ffn_norm = nullptr, *bq = nullptr, *bk = nullptr, *bv = nullptr,
                *q_norm = nullptr, *k_norm = nullptr, *attn_post_norm = nullptr, *ffn_post_norm = nullptr;
    // gpt-oss: attention output bias, sinks (a logit per query head), router and expert biases
    const float *bo = nullptr, *sinks = nullptr, *router_b = nullptr, *gate_b = nullptr, *up_b = nullptr,
                *down_b = nullptr;
    const float* sel_bias = nullptr;  // the experts' selection bias (glm4moe, minimax-m2, dots1, ...)
    bool moe = false;                 // experts in this layer (ModelConfig::layer_is_moe)
    bool shared = false;              // a shared expert (gate_inp_sh: its gate, qwen2moe's only)
    uint8_t *k_tiles = nullptr, *v_tiles = nullptr;
  };

  GpuForward(std::shared_ptr<const Model> model, gpu::Ops& ops, const KvLayout& kv, const GpuForwardOptions& opts);
  Result<void*> alloc(size_t bytes);
  Result<DevMatrix> upload(const Matrix& m);
  Result<const float*> upload(const std::vector<float>& v);  // null for an empty vector
  Status ensure_scratch(int64_t n_tokens, int64_t max_blocks, int64_t n_logit_rows);
  Status matmul(const DevMatrix& w, const float* x, int64_t n_tokens, float* y);
  Result<DevExperts> upload_experts(const LayerWeights& L);
  // The feed-forward block of a MoE layer, xb_ in, xb_ out (model/moe.h's order of operations).
  Status moe_ffn(const DevLayer& D, int64_t n_tokens);
  // A step in three parts: its inputs uploaded (n_padded >= its tokens: padding for a graph bucket),
  // the layers over n_tokens rows, the final norm and logits of `rows` into logits_ (or the normed
  // rows into xb_ when hidden). layers and head only queue backend calls, so a graph can record them.
  Status stage(const ForwardBatch& batch, int64_t n_padded, int64_t max_blocks);
  Status layers(int64_t n_tokens, int64_t max_blocks, int64_t max_ctx);
  Status head(const std::vector<int64_t>& rows, bool hidden);
  // xb = RMSNorm(x) with `norm`, or x as it is when the family has no pre-norm (olmo2)
  Status pre_norm(const float* norm, int64_t n_tokens);
  bool graphable(const ForwardBatch& batch, const std::vector<int64_t>& rows, int64_t max_blocks) const;
  // Queues a decode step as its bucket's graph (captured on first use).
  Status run_graph(const ForwardBatch& batch);
  void drop_graphs();

  std::shared_ptr<const Model> model_;
  gpu::Ops& ops_;
  KvLayout kv_;
  std::vector<Buf> bufs_;  // everything allocated, released by the destructor
  std::unique_ptr<GpuLora> lora_;  // the step's LoRA deltas and the adapters' device copies
  std::vector<DevLayer> layers_;
  DevMatrix output_;
  DevMatrix embd_;  // token_embd on the device (null p: rows read on the host, stage uploads them)
  const float* output_norm_ = nullptr;
  std::vector<RopeTable> ropes_;
  GpuForwardOptions opts_;
  std::map<int64_t, void*> graphs_;  // by batch bucket
  uint64_t scratch_gen_ = 0, graphs_scratch_gen_ = 0;  // scratch reallocations; the one the graphs were captured on
  GraphStats graph_stats_;
  bool graphs_failed_ = false;  // the backend could not capture: eager from then on
  // the launched step wait fetches: its logits rows, hidden states instead, argmax instead
  bool launched_ = false, launched_hidden_ = false, launched_argmax_ = false;
  int64_t launched_rows_ = 0;

  // device scratch, grown on demand: activations (n_tokens rows), per-token int data, RoPE tables
  int64_t cap_tokens_ = 0, cap_blocks_ = 0, cap_rows_ = 0;
  float *x_ = nullptr, *xb_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *att_ = nullptr, *hb_ = nullptr,
        *hb2_ = nullptr, *logits_ = nullptr, *cos_ = nullptr, *sin_ = nullptr;
  int32_t* in_ = nullptr;
  int32_t* argmax_ = nullptr;  // per logits row (run's argmax)  // the step's positions, context lengths, tables and RoPE tables (stage)
  int32_t *pos_ = nullptr, *n_ctx_ = nullptr, *tok_ = nullptr, *tables_ = nullptr, *tiles_ = nullptr;  // into in_
  int64_t n_tiles_ = 0;  // this step's prefill tiles (gpu::GpuAttnArgs::tiles), 0 for decode
  void* workspace_ = nullptr;  // the backend's matmul workspace (tensor-core chunks), allocated at create
  size_t workspace_bytes_ = 0;
  float* attn_partial_ = nullptr;  // split-K attention's partial states (gpu::attention_partial_capacity)
  int64_t attn_partial_floats_ = 0;
  // MoE scratch (n_tokens x k pairs): router logits, routes, the experts' rows, the shared expert's
  float *router_logits_ = nullptr, *route_w_ = nullptr, *eg_ = nullptr, *eu_ = nullptr, *ey_ = nullptr,
        *sh_g_ = nullptr, *sh_u_ = nullptr, *sh_y_ = nullptr, *sh_gate_ = nullptr;
  int32_t *route_ids_ = nullptr, *route_order_ = nullptr;
  std::vector<void*> scratch_;  // the scratch allocations (released when regrown)
  // host staging
  std::vector<float> h_x_, h_cos_, h_sin_;
  std::vector<int32_t> h_pos_, h_n_ctx_, h_tok_, h_tables_, h_tiles_, h_in_;
};

}  // namespace tmill
