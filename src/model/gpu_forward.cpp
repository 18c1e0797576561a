#include "model/gpu_forward.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/log.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace tmill {
namespace {
constexpr int64_t kMaxSortedPairs = 65535;  // gpu::gemm_id takes an order for one launch's worth of pairs
}  // namespace

Status gpu_forward_supports(const Model& model, const gpu::Ops& ops, DType kv_dtype) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  auto no = [&](const std::string& what) {
    return Error{fmt::format("the {} backend does not run {} models yet: {}", ops.name(), c.arch.name, what)};
  };
  if (!gpu::kv_cache_supports(kv_dtype))
    return no(fmt::format("KV cache type {} (F16, I8, F8_E4M3, F8_E5M2 or Q4_0: --kv-cache-dtype f16, int8, fp8_e4m3, "
                          "fp8_e5m2 or q4_0)", dtype_name(kv_dtype)));
  if (c.is_moe() && (c.n_expert > 256 || c.n_expert_used > 32 || c.n_expert_used > c.n_expert))
    return no(fmt::format("{} experts, {} per token (at most 256 and 32)", c.n_expert, c.n_expert_used));
  if (c.is_mla()) return no("multi-head latent attention (deepseek2)");
  if (c.arch.bidirectional) return no("bidirectional attention (gemma-embedding)");
  if (c.arch.attn_gate_proj) return no("an attention output gate of its own projection (afmoe)");
  if (c.n_conv_layers() > 0) return no("short convolution layers (lfm2)");
  if (c.n_ssm_layers() > 0) return no("recurrent layers (Mamba-1 and Mamba-2 mixers: mamba, mamba2, jamba, granitehybrid, nemotron_h, falcon-h1; gated delta nets: qwen35, qwen3next)");
  if (c.arch.qk_norm_after_rope) return no("q/k norms after RoPE (hunyuan-dense)");
  if (c.arch.norm_bias && !c.arch.layer_norm) return no("RMS norms with biases (phimoe)");
  if (c.arch.layer_norm || c.arch.parallel_block || c.arch.ffn_ungated)
    return no("LayerNorm, the parallel attention / FFN block (cohere) or the ungated FFN with biases (starcoder2)");
  if (!c.alibi.empty() || c.n_pos_embd > 0 || c.clamp_kqv > 0.0f || c.arch.embd_norm)
    return no("ALiBi, learned positions, clamped q/k/v or a norm of the embeddings (bloom, mpt, gpt2, baichuan 13B, olmo)");
  if (c.moe_weight_before || c.moe_select_by_logit || c.kq_l2_norm || c.attn_temp_nope_only)
    return no("expert weights on the experts' inputs, weightless q/k norms, chunked attention (llama4)");
  for (const LayerAttention& la : c.layer_attn)
    if (la.chunk > 0) return no("chunked attention (llama4)");
  if (!c.layer_shape.empty() || c.kv_shared_from > 0 || c.n_embd_per_layer > 0 || c.arch.v_norm || !c.linear_attn.empty())
    return no("per-layer head sizes or counts, shared K/V, per-layer embeddings, V norms (gemma4), layers without "
              "attention or FFN (deci)");
  if (c.is_moe() && c.moe_groups > 64) return no(fmt::format("{} expert groups (at most 64)", c.moe_groups));
  if (c.head_dim > 256 || c.head_dim % 2 != 0) return no(fmt::format("head_dim {} (even, at most 256)", c.head_dim));
  if (c.n_rot <= 0 || c.n_rot > c.head_dim || c.n_rot % 2 != 0) return no(fmt::format("n_rot {}", c.n_rot));
  auto type_ok = [&](const Matrix& m) -> Status {
    if (!ops.supports(m.type)) return no(fmt::format("weight type {} ({})", dtype_name(m.type), m.name));
    return {};
  };
  TM_TRY(type_ok(w.output));
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    for (const Matrix* m : {&L.wq, &L.wk, &L.wv, &L.wo}) TM_TRY(type_ok(*m));
    if (!c.layer_is_moe(static_cast<int64_t>(l))) {
      for (const Matrix* m : {&L.w_gate, &L.w_up, &L.w_down}) TM_TRY(type_ok(*m));
      continue;
    }
    TM_TRY(type_ok(L.ffn_gate_inp));
    for (const auto* v : {&L.gate_exps, &L.up_exps, &L.down_exps})
      for (const Matrix& m : *v) TM_TRY(type_ok(m));
    if (L.has_shared_expert())
      for (const Matrix* m : {&L.gate_shexp, &L.up_shexp, &L.down_shexp}) TM_TRY(type_ok(*m));
  }
  return {};
}

uint64_t GpuForward::weight_bytes_of(const Model& model) {
  const ModelWeights& w = model.weights();
  auto floats = [](const std::vector<float>& v) { return v.size() * sizeof(float); };
  uint64_t b = w.output.bytes() + floats(w.output_norm);
  if (gpu::get_rows_supports(w.token_embd.type) && w.token_embd.data != w.output.data) b += w.token_embd.bytes();
  for (const LayerWeights& L : w.layers) {
    for (const Matrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.ffn_gate_inp, &L.gate_shexp,
                            &L.up_shexp, &L.down_shexp})
      b += m->bytes();
    for (const auto* v : {&L.gate_exps, &L.up_exps, &L.down_exps})
      for (const Matrix& m : *v) b += m.bytes();
    for (const auto* v : {&L.attn_norm, &L.ffn_norm, &L.bq, &L.bk, &L.bv, &L.q_norm, &L.k_norm, &L.attn_post_norm,
                          &L.ffn_post_norm, &L.gate_inp_shexp, &L.bo, &L.attn_sinks, &L.ffn_gate_inp_b, &L.gate_exps_b,
                          &L.up_exps_b, &L.down_exps_b, &L.exp_probs_b})
      b += floats(*v);
  }
  return b;
}

uint64_t GpuForward::scratch_bytes_of(const ModelConfig& c, int64_t n_tokens, int64_t max_blocks, int64_t n_rows) {
  const auto N = static_cast<uint64_t>(n_tokens);
  // (MoE layers use their own pair buffers below; dense layers before them the FFN rows)
  const int64_t dense_ff = c.is_moe() && c.n_layer_dense_lead == 0 ? 0 : c.n_ff;
  uint64_t floats = N * static_cast<uint64_t>(2 * c.n_embd + 2 * c.q_dim() + 2 * c.kv_dim() + 2 * dense_ff) +
                          static_cast<uint64_t>(n_rows) * static_cast<uint64_t>(std::max<int64_t>(c.n_vocab, c.n_embd)) +
                          2 * c.ropes.size() * N * static_cast<uint64_t>(c.n_rot / 2);
  uint64_t ints = N * (5 + static_cast<uint64_t>(max_blocks)) + static_cast<uint64_t>(n_rows);
  floats += static_cast<uint64_t>(gpu::attention_partial_capacity(c.n_head, c.n_head_kv, c.head_dim)) +
            gpu::kGemmTcWorkspaceBytes / 4;
  if (c.is_moe()) {  // router logits, route weights and ids, the pairs' gate/up/down rows, the shared expert
    const auto K = static_cast<uint64_t>(c.n_expert_used);
    floats += N * (static_cast<uint64_t>(c.n_expert) + K * (1 + 2 * static_cast<uint64_t>(c.n_ff_exp) +
                                                            static_cast<uint64_t>(c.n_embd)));
    floats += N * (2 * static_cast<uint64_t>(c.n_ff_shexp) + static_cast<uint64_t>(c.n_embd) + 1);
    ints += 2 * N * K;
  }
  return 4 * (floats + ints);
}

GpuForward::GpuForward(std::shared_ptr<const Model> model, gpu::Ops& ops, const KvLayout& kv,
                       const GpuForwardOptions& opts)
    : model_(std::move(model)), ops_(ops), kv_(kv), opts_(opts) {
  lora_ = std::make_unique<GpuLora>(ops_, model_->config().n_layer, opts_.max_loras);
}

GpuForward::~GpuForward() {
  drop_graphs();
  for (void* p : scratch_) ops_.release(p);
  for (const Buf& b : bufs_) ops_.release(b.p);
}

Result<void*> GpuForward::alloc(size_t bytes) {
  TM_ASSIGN_OR_RETURN(void* p, ops_.alloc(bytes));
  bufs_.push_back({p, bytes});
  return p;
}

Result<GpuForward::DevMatrix> GpuForward::upload(const Matrix& m) {
  DevMatrix d{m.type, m.rows, m.cols, m.row_bytes, nullptr};
  const size_t bytes = m.row_bytes * static_cast<size_t>(m.rows);
  TM_ASSIGN_OR_RETURN(void* p, alloc(bytes));
  TM_TRY(ops_.upload(p, m.data, bytes));
  d.p = p;
  return d;
}

Result<GpuForward::DevExperts> GpuForward::upload_experts(const LayerWeights& L) {
  DevExperts d;
  for (auto [src, dst] : {std::pair{&L.gate_exps, &d.gate}, std::pair{&L.up_exps, &d.up}, std::pair{&L.down_exps, &d.down}}) {
    const Matrix& m0 = src->front();
    const size_t bytes = m0.row_bytes * static_cast<size_t>(m0.rows);
    TM_ASSIGN_OR_RETURN(void* p, alloc(bytes * src->size()));
    for (size_t e = 0; e < src->size(); ++e) {
      const Matrix& m = (*src)[e];
      if (m.type != m0.type || m.rows != m0.rows || m.row_bytes != m0.row_bytes)
        return Error{fmt::format("GPU forward: expert {} of {} differs in shape or type from expert 0", e, m.name)};
      TM_TRY(ops_.upload(static_cast<uint8_t*>(p) + e * bytes, m.data, bytes));
    }
    *dst = DevMatrix{m0.type, m0.rows, m0.cols, m0.row_bytes, p};
  }
  return d;
}

Result<const float*> GpuForward::upload(const std::vector<float>& v) {
  if (v.empty()) return static_cast<const float*>(nullptr);
  TM_ASSIGN_OR_RETURN(void* p, alloc(v.size() * sizeof(float)));
  TM_TRY(ops_.upload(p, v.data(), v.size() * sizeof(float)));
  return static_cast<const float*>(p);
}

Result<std::unique_ptr<GpuForward>> GpuForward::create(std::shared_ptr<const Model> model, gpu::Ops& ops,
                                                       const KvLayout& kv, const GpuForwardOptions& opts) {
  TM_TRY(ops.available());
  TM_TRY(gpu_forward_supports(*model, ops, kv.dtype));
  const ModelConfig& c = model->config();
  if (kv.n_layer != c.n_layer || kv.n_head_kv != c.n_head_kv || kv.head_dim != c.head_dim || kv.num_blocks <= 0)
    return Error{"GPU forward: the KV layout does not match the model"};
  if (kv.dtype == DType::Q4_0 && kv.block_size % 2 != 0) return Error{"GPU forward: a Q4 KV cache needs an even block size"};
  if (opts.graph_max_batch < 0 || (opts.graph_max_batch > 0 && opts.graph_max_blocks <= 0))
    return Error{"GPU forward: graphs need a positive batch and block-table size"};
  std::unique_ptr<GpuForward> f(new GpuForward(std::move(model), ops, kv, opts));
  const ModelWeights& w = f->model_->weights();
  f->layers_.resize(w.layers.size());
  const int64_t spare = opts.graph_max_batch > 0 ? 1 : 0;  // where graph padding tokens write
  const size_t kv_layer_bytes = kv.block_bytes_per_layer() * static_cast<size_t>(kv.num_blocks + spare);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    DevLayer& D = f->layers_[l];
    TM_ASSIGN_OR_RETURN(D.wq, f->upload(L.wq));
    TM_ASSIGN_OR_RETURN(D.wk, f->upload(L.wk));
    TM_ASSIGN_OR_RETURN(D.wv, f->upload(L.wv));
    TM_ASSIGN_OR_RETURN(D.wo, f->upload(L.wo));
    D.moe = c.layer_is_moe(static_cast<int64_t>(l));
    if (D.moe) {
      TM_ASSIGN_OR_RETURN(D.router, f->upload(L.ffn_gate_inp));
      TM_ASSIGN_OR_RETURN(D.exps, f->upload_experts(L));
      TM_ASSIGN_OR_RETURN(D.sel_bias, f->upload(L.exp_probs_b));
      D.shared = L.has_shared_expert();
      if (D.shared) {
        TM_ASSIGN_OR_RETURN(D.gate_sh, f->upload(L.gate_shexp));
        TM_ASSIGN_OR_RETURN(D.up_sh, f->upload(L.up_shexp));
        TM_ASSIGN_OR_RETURN(D.down_sh, f->upload(L.down_shexp));
      }
      if (!L.gate_inp_shexp.empty()) {  // qwen2moe's gate: one row, a product gives its dot
        TM_ASSIGN_OR_RETURN(const float* g, f->upload(L.gate_inp_shexp));
        D.gate_inp_sh = DevMatrix{DType::F32, 1, c.n_embd, static_cast<size_t>(c.n_embd) * sizeof(float), g};
      }
    } else {
      TM_ASSIGN_OR_RETURN(D.gate, f->upload(L.w_gate));
      TM_ASSIGN_OR_RETURN(D.up, f->upload(L.w_up));
      TM_ASSIGN_OR_RETURN(D.down, f->upload(L.w_down));
    }
    TM_ASSIGN_OR_RETURN(D.attn_norm, f->upload(L.attn_norm));
    TM_ASSIGN_OR_RETURN(D.ffn_norm, f->upload(L.ffn_norm));
    TM_ASSIGN_OR_RETURN(D.bq, f->upload(L.bq));
    TM_ASSIGN_OR_RETURN(D.bk, f->upload(L.bk));
    TM_ASSIGN_OR_RETURN(D.bv, f->upload(L.bv));
    TM_ASSIGN_OR_RETURN(D.q_norm, f->upload(L.q_norm));
    TM_ASSIGN_OR_RETURN(D.k_norm, f->upload(L.k_norm));
    TM_ASSIGN_OR_RETURN(D.attn_post_norm, f->upload(L.attn_post_norm));
    TM_ASSIGN_OR_RETURN(D.ffn_post_norm, f->upload(L.ffn_post_norm));
    TM_ASSIGN_OR_RETURN(D.bo, f->upload(L.bo));
    TM_ASSIGN_OR_RETURN(D.sinks, f->upload(L.attn_sinks));
    TM_ASSIGN_OR_RETURN(D.router_b, f->upload(L.ffn_gate_inp_b));
    TM_ASSIGN_OR_RETURN(D.gate_b, f->upload(L.gate_exps_b));
    TM_ASSIGN_OR_RETURN(D.up_b, f->upload(L.up_exps_b));
    TM_ASSIGN_OR_RETURN(D.down_b, f->upload(L.down_exps_b));
    TM_ASSIGN_OR_RETURN(void* kt, f->alloc(kv_layer_bytes));
    TM_ASSIGN_OR_RETURN(void* vt, f->alloc(kv_layer_bytes));
    D.k_tiles = static_cast<uint8_t*>(kt);
    D.v_tiles = static_cast<uint8_t*>(vt);
  }
  TM_ASSIGN_OR_RETURN(f->output_, f->upload(w.output));
  TM_ASSIGN_OR_RETURN(f->output_norm_, f->upload(w.output_norm));
  if (!opts.host_embeddings && ops.supports_rows(w.token_embd.type)) {
    if (w.token_embd.data == w.output.data && w.token_embd.type == w.output.type) {
      f->embd_ = f->output_;  // tied: the output matrix's rows
    } else {
      TM_ASSIGN_OR_RETURN(f->embd_, f->upload(w.token_embd));
    }
  }
  f->set_context_length(c.n_ctx_train);
  if (const size_t ws = ops.matmul_workspace_bytes(); ws > 0) {  // the tensor-core products' chunks
    TM_ASSIGN_OR_RETURN(f->workspace_, f->alloc(ws));
    f->workspace_bytes_ = ws;
  }
  if (opts.scratch_tokens > 0)
    TM_TRY(f->ensure_scratch(std::max(opts.scratch_tokens, opts.graph_max_batch),
                             std::max({opts.scratch_blocks, opts.graph_max_blocks, int64_t{1}}),
                             std::max(opts.scratch_tokens, opts.graph_max_batch)));
  TM_TRY(ops.synchronize());
  return f;
}

void GpuForward::set_context_length(int64_t n_ctx) {
  const ModelConfig& c = model_->config();
  ropes_ = rope_tables(c, model_->weights().rope_freq_factors(c, n_ctx));
}

Status GpuForward::ensure_scratch(int64_t n, int64_t max_blocks, int64_t rows) {
  if (n <= cap_tokens_ && max_blocks <= cap_blocks_ && rows <= cap_rows_) return {};
  for (void* p : scratch_) ops_.release(p);
  scratch_.clear();
  ++scratch_gen_;
  const ModelConfig& c = model_->config();
  cap_tokens_ = std::max(n, cap_tokens_);
  cap_blocks_ = std::max(max_blocks, cap_blocks_);
  cap_rows_ = std::max(rows, cap_rows_);
  const auto N = static_cast<size_t>(cap_tokens_);
  auto floats = [&](float** dst, size_t count) -> Status {
    TM_ASSIGN_OR_RETURN(void* p, ops_.alloc(count * sizeof(float)));
    scratch_.push_back(p);
    *dst = static_cast<float*>(p);
    return {};
  };
  auto ints = [&](int32_t** dst, size_t count) -> Status {
    TM_ASSIGN_OR_RETURN(void* p, ops_.alloc(count * sizeof(int32_t)));
    scratch_.push_back(p);
    *dst = static_cast<int32_t*>(p);
    return {};
  };
  const size_t half = static_cast<size_t>(c.n_rot / 2), n_ropes = c.ropes.size();
  TM_TRY(floats(&x_, N * c.n_embd));
  TM_TRY(floats(&xb_, N * c.n_embd));
  TM_TRY(floats(&q_, N * c.q_dim()));
  TM_TRY(floats(&k_, N * c.kv_dim()));
  TM_TRY(floats(&v_, N * c.kv_dim()));
  TM_TRY(floats(&att_, N * c.q_dim()));
  if (!c.is_moe() || c.n_layer_dense_lead > 0) {  // the dense FFN's gate/up rows (MoE layers: pair buffers below)
    TM_TRY(floats(&hb_, N * c.n_ff));
    TM_TRY(floats(&hb2_, N * c.n_ff));
  }
  TM_TRY(floats(&logits_, static_cast<size_t>(cap_rows_) * std::max<int64_t>(c.n_vocab, c.n_embd)));
  // a step's small inputs in one buffer, one upload (stage lays them out for the step's token count)
  // (positions, context lengths, token ids, tables, cos/sin, and at most two ints per token of prefill tiles)
  TM_TRY(ints(&in_, N * (5 + static_cast<size_t>(cap_blocks_) + 2 * n_ropes * half)));
  TM_TRY(ints(&argmax_, static_cast<size_t>(cap_rows_)));
  attn_partial_floats_ = gpu::attention_partial_capacity(c.n_head, c.n_head_kv, c.head_dim);
  TM_TRY(floats(&attn_partial_, static_cast<size_t>(attn_partial_floats_)));
  if (c.is_moe()) {
    const auto K = static_cast<size_t>(c.n_expert_used), S = static_cast<size_t>(c.n_ff_shexp);
    TM_TRY(floats(&router_logits_, N * static_cast<size_t>(c.n_expert)));
    TM_TRY(floats(&route_w_, N * K));
    TM_TRY(ints(&route_ids_, N * K));
    TM_TRY(ints(&route_order_, N * K));
    TM_TRY(floats(&eg_, N * K * static_cast<size_t>(c.n_ff_exp)));
    TM_TRY(floats(&eu_, N * K * static_cast<size_t>(c.n_ff_exp)));
    TM_TRY(floats(&ey_, N * K * static_cast<size_t>(c.n_embd)));
    if (S > 0) {
      TM_TRY(floats(&sh_g_, N * S));
      TM_TRY(floats(&sh_u_, N * S));
      TM_TRY(floats(&sh_y_, N * static_cast<size_t>(c.n_embd)));
      TM_TRY(floats(&sh_gate_, N));
    }
  }
  return {};
}

Status GpuForward::matmul(const DevMatrix& w, const float* x, int64_t n_tokens, float* y) {
  return ops_.matmul(w.type, w.p, w.rows, w.cols, w.row_bytes, x, n_tokens, y, workspace_, workspace_bytes_);
}

Status GpuForward::moe_ffn(const DevLayer& D, int64_t N) {
  const ModelConfig& c = model_->config();
  const int64_t E = c.n_embd, K = c.n_expert_used, F = c.n_ff_exp, NK = N * K;
  auto matmul_id = [&](const DevMatrix& w, const float* x, int64_t x_div, float* y) {
    return ops_.matmul_id(w.type, w.p, w.row_bytes * static_cast<size_t>(w.rows), w.rows, w.cols, w.row_bytes, x, x_div,
                          route_ids_, NK, y, NK <= kMaxSortedPairs ? route_order_ : nullptr);
  };
  TM_TRY(matmul(D.router, xb_, N, router_logits_));
  if (D.router_b) TM_TRY(ops_.add_rows(router_logits_, D.router_b, N, c.n_expert));
  gpu::GpuMoeRouteArgs ra;
  ra.logits = router_logits_, ra.n_tokens = N, ra.n_expert = c.n_expert, ra.k = K;
  ra.norm = c.arch.moe_norm_topk, ra.softmax_topk = c.arch.moe_softmax_topk, ra.ids = route_ids_, ra.weights = route_w_;
  ra.sigmoid = c.moe_sigmoid, ra.bias = D.sel_bias, ra.groups = c.moe_groups, ra.groups_used = c.moe_groups_used;
  ra.scale = c.moe_weights_scale;
  TM_TRY(ops_.moe_route(ra));
  // the pairs grouped by expert, so the products read each chosen expert's rows once from memory
  if (NK <= kMaxSortedPairs) TM_TRY(ops_.moe_sort(route_ids_, NK, c.n_expert, route_order_));
  TM_TRY(matmul_id(D.exps.gate, xb_, K, eg_));
  TM_TRY(matmul_id(D.exps.up, xb_, K, eu_));
  if (D.gate_b) {  // gpt-oss: each pair's expert biases, the clamped SwiGLU, the down bias
    TM_TRY(ops_.add_rows_id(eg_, D.gate_b, route_ids_, NK, F));
    TM_TRY(ops_.add_rows_id(eu_, D.up_b, route_ids_, NK, F));
  }
  if (c.arch.moe_swiglu_oai) TM_TRY(ops_.swiglu_oai(eg_, eu_, NK * F));
  else TM_TRY(ops_.silu_mul(eg_, eu_, NK * F));
  TM_TRY(matmul_id(D.exps.down, eg_, 1, ey_));
  if (D.down_b) TM_TRY(ops_.add_rows_id(ey_, D.down_b, route_ids_, NK, E));
  const bool shared = D.shared, gated = D.gate_inp_sh.p != nullptr;
  if (shared) {  // down(silu(gate_sh x) * up_sh x), times sigmoid(gate . x) for qwen2moe
    if (gated) TM_TRY(matmul(D.gate_inp_sh, xb_, N, sh_gate_));
    TM_TRY(matmul(D.gate_sh, xb_, N, sh_g_));
    TM_TRY(matmul(D.up_sh, xb_, N, sh_u_));
    TM_TRY(ops_.silu_mul(sh_g_, sh_u_, N * c.n_ff_shexp));
    TM_TRY(matmul(D.down_sh, sh_g_, N, sh_y_));
  }
  return ops_.moe_combine(xb_, ey_, route_w_, N, K, E, shared ? sh_y_ : nullptr, gated ? sh_gate_ : nullptr);
}

Status GpuForward::stage(const ForwardBatch& batch, int64_t n_padded, int64_t max_blocks) {
  const ModelConfig& c = model_->config();
  const ModelWeights& w = model_->weights();
  const int64_t N = static_cast<int64_t>(batch.tokens.size()), E = c.n_embd, half = c.n_rot / 2;
  // Host side: per-token positions, context lengths, block tables (padded to max_blocks), RoPE
  // tables and embedding rows; one upload each. Padding tokens (graph buckets) sit at position 0 of
  // the spare block with zero embeddings: their K/V lands there, no sequence reads it.
  const auto NZ = static_cast<size_t>(n_padded);
  h_pos_.assign(NZ, 0);
  h_n_ctx_.assign(NZ, 1);
  h_tables_.assign(NZ * static_cast<size_t>(max_blocks), n_padded > N ? static_cast<int32_t>(kv_.num_blocks) : 0);
  for (const SeqSlice& s : batch.seqs)
    for (int32_t i = 0; i < s.n_tokens; ++i) {
      const auto t = static_cast<size_t>(s.token_begin + i);
      h_pos_[t] = s.pos_begin + i;
      h_n_ctx_[t] = s.pos_begin + i + 1;
      std::fill_n(h_tables_.begin() + static_cast<std::ptrdiff_t>(t * max_blocks), max_blocks, 0);
      std::copy(s.block_table.begin(), s.block_table.end(), h_tables_.begin() + static_cast<std::ptrdiff_t>(t * max_blocks));
    }
  h_cos_.resize(ropes_.size() * NZ * static_cast<size_t>(half));
  h_sin_.resize(h_cos_.size());
  for (size_t r = 0; r < ropes_.size(); ++r) {
    const RopeTable& rt = ropes_[r];
    for (int64_t t = 0; t < n_padded; ++t) {
      float* cs = h_cos_.data() + (static_cast<int64_t>(r) * n_padded + t) * half;
      float* sn = h_sin_.data() + (static_cast<int64_t>(r) * n_padded + t) * half;
      rope_cos_sin_at(rt, h_pos_[static_cast<size_t>(t)], half, cs, sn);
    }
  }
  // The token ids (padding tokens: 0), whose rows layers() gathers on the device; or (host
  // embeddings) the rows themselves, uploaded into x_ (padding tokens: zeros).
  h_tok_.assign(NZ, 0);
  for (int64_t t = 0; t < N; ++t) {
    const int32_t tok = batch.tokens[static_cast<size_t>(t)];
    if (tok < 0 || tok >= w.token_embd.rows) return Error{fmt::format("GPU forward: token id {} out of range", tok)};
    h_tok_[static_cast<size_t>(t)] = tok;
  }
  h_x_.clear();
  if (!embd_.p) {
    h_x_.assign(NZ * static_cast<size_t>(E), 0.0f);
    for (int64_t t = 0; t < N; ++t) get_row(w.token_embd, h_tok_[static_cast<size_t>(t)], h_x_.data() + t * E);
    if (c.embd_scale != 1.0f)  // gemma: times sqrt(n_embd), as Forward::run
      for (float& v : h_x_) v *= c.embd_scale;
  }
  // Prompt chunks: the attention's tiles, each sequence's tokens in runs of attention_tile_tokens
  // (none when every sequence has one token: decode, and the steps graphs replay).
  h_tiles_.clear();
  const int64_t tile = gpu::attention_tile_tokens(c.n_head, c.n_head_kv, c.head_dim);
  bool chunks = false;
  for (const SeqSlice& s : batch.seqs) chunks = chunks || s.n_tokens > 1;
  if (chunks)
    for (const SeqSlice& s : batch.seqs)
      for (int32_t i = 0; i < s.n_tokens; i += static_cast<int32_t>(tile)) {
        h_tiles_.push_back(s.token_begin + i);
        h_tiles_.push_back(std::min(s.n_tokens - i, static_cast<int32_t>(tile)));
      }
  // Positions, context lengths, token ids, tables, cos, sin (and tiles) back to back in in_ (the layout
  // depends only on n_padded and max_blocks, so a graph bucket finds its inputs where its capture read them).
  h_in_.resize(3 * NZ + h_tables_.size() + 2 * h_cos_.size() + h_tiles_.size());
  int32_t* h = h_in_.data();
  auto put = [&h](const void* src, size_t words) {
    if (words == 0) return;  // (an empty vector's data() may be null: memcpy must not see it)
    std::memcpy(h, src, words * sizeof(int32_t));
    h += words;
  };
  put(h_pos_.data(), NZ);
  put(h_n_ctx_.data(), NZ);
  put(h_tok_.data(), NZ);
  put(h_tables_.data(), h_tables_.size());
  put(h_cos_.data(), h_cos_.size());
  put(h_sin_.data(), h_sin_.size());
  put(h_tiles_.data(), h_tiles_.size());
  pos_ = in_;
  n_ctx_ = pos_ + NZ;
  tok_ = n_ctx_ + NZ;
  tables_ = tok_ + NZ;
  cos_ = reinterpret_cast<float*>(tables_ + h_tables_.size());
  sin_ = cos_ + h_cos_.size();
  tiles_ = reinterpret_cast<int32_t*>(sin_ + h_sin_.size());
  n_tiles_ = static_cast<int64_t>(h_tiles_.size() / 2);
  TM_TRY(ops_.upload(in_, h_in_.data(), h_in_.size() * sizeof(int32_t)));
  if (!embd_.p) TM_TRY(ops_.upload(x_, h_x_.data(), h_x_.size() * sizeof(float)));
  return {};
}

Status GpuForward::layers(int64_t N, int64_t max_blocks, int64_t max_ctx) {
  const ModelConfig& c = model_->config();
  const int64_t E = c.n_embd, QD = c.q_dim(), KD = c.kv_dim(), hd = c.head_dim, F = c.n_ff, half = c.n_rot / 2;
  if (embd_.p)  // the step's embedding rows (gemma: times sqrt(n_embd), as Forward::run)
    TM_TRY(ops_.get_rows(embd_.type, embd_.p, embd_.row_bytes, E, tok_, N, x_, c.embd_scale));
  GpuLora& lora = *lora_;  // (inactive without bindings: every call below a no-op)
  TM_TRY(lora.apply_embedding(x_, E, c.embd_scale));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const DevLayer& D = layers_[static_cast<size_t>(l)];
    // attention: norm (olmo2: none, the stream as it is), Q/K/V, biases, q/k norms, RoPE, K/V into
    // the cache, attention, output
    TM_TRY(pre_norm(D.attn_norm, N));
    TM_TRY(matmul(D.wq, xb_, N, q_));
    TM_TRY(matmul(D.wk, xb_, N, k_));
    TM_TRY(matmul(D.wv, xb_, N, v_));
    TM_TRY(lora.apply(l, LoraSlot::Q, xb_, E, q_, QD));
    TM_TRY(lora.apply(l, LoraSlot::K, xb_, E, k_, KD));
    TM_TRY(lora.apply(l, LoraSlot::V, xb_, E, v_, KD));
    if (D.bq) {
      TM_TRY(ops_.add_rows(q_, D.bq, N, QD));
      TM_TRY(ops_.add_rows(k_, D.bk, N, KD));
      TM_TRY(ops_.add_rows(v_, D.bv, N, KD));
    }
    if (D.q_norm && c.arch.qk_norm_full) {  // olmoe: one norm over the whole q / k of a token
      TM_TRY(ops_.rmsnorm(q_, D.q_norm, q_, N, QD, c.rms_eps));
      TM_TRY(ops_.rmsnorm(k_, D.k_norm, k_, N, KD, c.rms_eps));
    } else if (D.q_norm) {
      TM_TRY(ops_.rmsnorm(q_, D.q_norm, q_, N * c.n_head, hd, c.rms_eps));
      TM_TRY(ops_.rmsnorm(k_, D.k_norm, k_, N * c.n_head_kv, hd, c.rms_eps));
    }
    if (c.has_rope(l)) {  // (smollm3's NoPE layers rotate nothing)
      const int64_t rope_off = static_cast<int64_t>(c.layer_attn[static_cast<size_t>(l)].rope) * N * half;
      const bool neox = c.arch.rope_layout == RopeLayout::NeoX;
      TM_TRY(ops_.rope({q_, N, c.n_head, hd, c.n_rot, cos_ + rope_off, sin_ + rope_off, neox}));
      TM_TRY(ops_.rope({k_, N, c.n_head_kv, hd, c.n_rot, cos_ + rope_off, sin_ + rope_off, neox}));
    }
    if (c.attn_temp_scale != 0.0f)  // mistral3: the queries' attention temperature at their positions
      TM_TRY(ops_.attn_temperature(q_, pos_, N, QD, c.attn_temp_scale, c.attn_temp_floor));
    gpu::GpuKvStoreArgs st;
    st.k = k_, st.v = v_, st.k_tiles = D.k_tiles, st.v_tiles = D.v_tiles;
    st.n_tokens = N, st.n_head_kv = c.n_head_kv, st.head_dim = hd, st.block_size = kv_.block_size;
    st.block_tables = tables_, st.max_blocks = max_blocks, st.pos = pos_, st.kv_dtype = kv_.dtype;
    TM_TRY(ops_.kv_store(st));
    gpu::GpuAttnArgs at;
    at.q = q_, at.out = att_, at.n_tokens = N, at.n_head = c.n_head, at.n_head_kv = c.n_head_kv, at.head_dim = hd;
    at.k_tiles = D.k_tiles, at.v_tiles = D.v_tiles, at.block_size = kv_.block_size;
    at.block_tables = tables_, at.max_blocks = max_blocks, at.n_ctx = n_ctx_, at.scale = c.attn_scale;
    at.window = c.layer_attn[static_cast<size_t>(l)].window, at.softcap = c.attn_softcap;
    at.partial = attn_partial_, at.partial_floats = attn_partial_floats_, at.max_ctx = max_ctx, at.sinks = D.sinks;
    at.tiles = n_tiles_ > 0 ? tiles_ : nullptr, at.n_tiles = n_tiles_, at.kv_dtype = kv_.dtype;
    TM_TRY(ops_.attention(at));
    TM_TRY(matmul(D.wo, att_, N, xb_));
    TM_TRY(lora.apply(l, LoraSlot::O, att_, QD, xb_, E));
    if (D.bo) TM_TRY(ops_.add_rows(xb_, D.bo, N, E));  // gpt-oss
    if (D.attn_post_norm) TM_TRY(ops_.rmsnorm(xb_, D.attn_post_norm, xb_, N, E, c.rms_eps));  // gemma, olmo2
    TM_TRY(ops_.add(x_, xb_, N * E, c.residual_scale));  // (granite scales the block's output)
    // feed-forward: norm, gate/up, SwiGLU, down (or the experts)
    TM_TRY(pre_norm(D.ffn_norm, N));
    if (D.moe) {
      TM_TRY(moe_ffn(D, N));
    } else {
      TM_TRY(matmul(D.gate, xb_, N, hb_));
      TM_TRY(matmul(D.up, xb_, N, hb2_));
      TM_TRY(lora.apply(l, LoraSlot::Gate, xb_, E, hb_, F));
      TM_TRY(lora.apply(l, LoraSlot::Up, xb_, E, hb2_, F));
      if (c.arch.ffn_act == FfnActivation::GeluTanh) TM_TRY(ops_.gelu_mul(hb_, hb2_, N * F));
      else TM_TRY(ops_.silu_mul(hb_, hb2_, N * F));
      TM_TRY(matmul(D.down, hb_, N, xb_));
      TM_TRY(lora.apply(l, LoraSlot::Down, hb_, F, xb_, E));
    }
    if (D.ffn_post_norm) TM_TRY(ops_.rmsnorm(xb_, D.ffn_post_norm, xb_, N, E, c.rms_eps));
    TM_TRY(ops_.add(x_, xb_, N * E, c.residual_scale));
  }
  return {};
}

Status GpuForward::pre_norm(const float* norm, int64_t N) {
  const ModelConfig& c = model_->config();
  if (norm) return ops_.rmsnorm(x_, norm, xb_, N, c.n_embd, c.rms_eps);
  return ops_.copy(xb_, x_, static_cast<size_t>(N * c.n_embd) * sizeof(float));  // olmo2: no pre-norm
}

Status GpuForward::head(const std::vector<int64_t>& rows, bool hidden) {
  const ModelConfig& c = model_->config();
  const int64_t E = c.n_embd, R = static_cast<int64_t>(rows.size());
  // final norm of the rows that need logits (all of them, contiguous, in a decode step)
  bool contiguous = true;
  for (int64_t r = 0; r < R; ++r) contiguous = contiguous && rows[static_cast<size_t>(r)] == rows[0] + r;
  if (contiguous) {
    TM_TRY(ops_.rmsnorm(x_ + rows[0] * E, output_norm_, xb_, R, E, c.rms_eps));
  } else {
    for (int64_t r = 0; r < R; ++r)
      TM_TRY(ops_.rmsnorm(x_ + rows[static_cast<size_t>(r)] * E, output_norm_, xb_ + r * E, 1, E, c.rms_eps));
  }
  if (hidden) return {};
  TM_TRY(matmul(output_, xb_, R, logits_));
  TM_TRY(lora_->apply_output(xb_, E, logits_, c.n_vocab));
  if (c.logit_scale != 1.0f) TM_TRY(ops_.scale(logits_, R * c.n_vocab, 1.0f / c.logit_scale));  // granite
  if (c.final_softcap > 0) TM_TRY(ops_.softcap(logits_, R * c.n_vocab, c.final_softcap));
  return {};
}

int64_t GpuForward::graph_bucket(int64_t n, int64_t max_batch) {
  int64_t b = 1;
  while (b < n && b < 8) b *= 2;
  if (b < n) b = (n + 7) / 8 * 8;
  return std::min(b, max_batch);
}

bool GpuForward::graphable(const ForwardBatch& batch, const std::vector<int64_t>& rows, int64_t max_blocks) const {
  const auto N = static_cast<int64_t>(batch.tokens.size());
  if (opts_.graph_max_batch <= 0 || N > opts_.graph_max_batch || max_blocks > opts_.graph_max_blocks || batch.hidden ||
      lora_->active())
    return false;
  for (const SeqSlice& s : batch.seqs)
    if (s.n_tokens != 1) return false;
  if (static_cast<int64_t>(rows.size()) != N) return false;
  for (int64_t r = 0; r < N; ++r)
    if (rows[static_cast<size_t>(r)] != r) return false;
  return true;
}

void GpuForward::drop_graphs() {
  for (auto& [bucket, g] : graphs_) ops_.drop_graph(g);
  graphs_.clear();
}

Status GpuForward::run_graph(const ForwardBatch& batch) {
  const auto N = static_cast<int64_t>(batch.tokens.size());
  const int64_t B = graph_bucket(N, opts_.graph_max_batch), MB = opts_.graph_max_blocks;
  // Fixed shapes: scratch for the largest bucket, block tables of graph_max_blocks; a graph keeps the
  // pointers it was captured with, so scratch regrown by a larger eager step drops them all.
  TM_TRY(ensure_scratch(opts_.graph_max_batch, MB, opts_.graph_max_batch));
  if (graphs_scratch_gen_ != scratch_gen_) {
    drop_graphs();
    graphs_scratch_gen_ = scratch_gen_;
  }
  TM_TRY(stage(batch, B, MB));
  auto it = graphs_.find(B);
  if (it == graphs_.end()) {
    std::vector<int64_t> all(static_cast<size_t>(B));
    for (int64_t r = 0; r < B; ++r) all[static_cast<size_t>(r)] = r;
    // A capture the backend cannot make (driver, device) turns graphs off for good: the step and all
    // later ones run eagerly, and the log says why.
    auto give_up = [&](const std::string& why) {
      log_warn("GPU forward: CUDA graphs off, decode steps run eagerly ({})", why);
      opts_.graph_max_batch = 0;
      graphs_failed_ = true;
      return Status{Error{why}};
    };
    if (Status b = ops_.begin_capture(); !b.ok()) return give_up(b.error());
    Status st = layers(B, MB, MB * kv_.block_size);  // any context the tables can hold
    if (st.ok()) st = head(all, false);
    auto g = ops_.end_capture();  // always closed, even after a failed call
    if (!st.ok()) {
      if (g.ok()) ops_.drop_graph(*g);
      return st;
    }
    if (!g.ok()) return give_up(g.error());
    it = graphs_.emplace(B, *g).first;
    ++graph_stats_.captured;
  }
  TM_TRY(ops_.replay(it->second));
  ++graph_stats_.replayed;
  return {};
}

Status GpuForward::launch(const ForwardBatch& batch, bool argmax) {
  if (launched_) return Error{"GPU forward: a step is already launched (wait for it first)"};
  const int64_t N = static_cast<int64_t>(batch.tokens.size());
  if (N == 0) return Error{"GPU forward: empty batch"};
  if (argmax && batch.hidden) return Error{"GPU forward: argmax of hidden states"};
  int64_t max_blocks = 1;
  for (const SeqSlice& s : batch.seqs) {
    if (static_cast<int64_t>(s.block_table.size()) * kv_.block_size < s.pos_begin + s.n_tokens)
      return Error{"GPU forward: a block table is too short for its sequence"};
    for (const int32_t b : s.block_table)  // (the kernels would write out of the cache)
      if (b < 0 || b >= kv_.num_blocks) return Error{"GPU forward: a block table names a block outside the KV cache"};
    max_blocks = std::max<int64_t>(max_blocks, static_cast<int64_t>(s.block_table.size()));
  }
  const std::vector<int64_t> rows = batch.logit_rows();  // as Forward::run
  const auto R = static_cast<int64_t>(rows.size());
  TM_TRY(lora_->begin(batch, rows));  // (every step: a step without bindings leaves it inactive)
  bool queued = false;
  if (graphable(batch, rows, max_blocks)) {
    Status st = run_graph(batch);
    if (!st.ok() && !graphs_failed_) return st;
    queued = st.ok();  // else the same step eagerly
  }
  if (!queued) {
    TM_TRY(ensure_scratch(N, max_blocks, std::max<int64_t>(R, 1)));
    TM_TRY(stage(batch, N, max_blocks));
    TM_TRY(layers(N, max_blocks, *std::max_element(h_n_ctx_.begin(), h_n_ctx_.end())));
    if (R > 0) TM_TRY(head(rows, batch.hidden));
  }
  if (R > 0 && argmax) TM_TRY(ops_.argmax_rows(logits_, R, model_->config().n_vocab, argmax_));
  launched_ = true;
  launched_rows_ = R;
  launched_hidden_ = batch.hidden;
  launched_argmax_ = argmax;
  return {};
}

Status GpuForward::wait(std::vector<float>& logits, std::vector<int32_t>* argmax) {
  if (!launched_) return Error{"GPU forward: wait without a launched step"};
  launched_ = false;
  if (launched_argmax_ != (argmax != nullptr)) {
    TM_TRY(ops_.synchronize());
    return Error{"GPU forward: wait must ask for what launch computed (logits or their argmax)"};
  }
  const ModelConfig& c = model_->config();
  const int64_t R = launched_rows_;
  if (R == 0) {
    logits.clear();
    if (argmax) argmax->clear();
    return ops_.synchronize();
  }
  if (argmax) {
    logits.clear();
    argmax->resize(static_cast<size_t>(R));
    return ops_.download(argmax->data(), argmax_, argmax->size() * sizeof(int32_t));
  }
  const float* src = launched_hidden_ ? xb_ : logits_;
  logits.resize(static_cast<size_t>(R * (launched_hidden_ ? c.n_embd : c.n_vocab)));
  return ops_.download(logits.data(), src, logits.size() * sizeof(float));
}

Status GpuForward::run(const ForwardBatch& batch, std::vector<float>& logits, std::vector<int32_t>* argmax) {
  TM_TRY(launch(batch, argmax != nullptr));
  return wait(logits, argmax);
}

Status GpuForward::copy_block(int32_t src, int32_t dst) {
  if (src < 0 || dst < 0 || src >= kv_.num_blocks || dst >= kv_.num_blocks) return Error{"GPU forward: block out of range"};
  const size_t bb = kv_.block_bytes_per_layer();
  for (const DevLayer& D : layers_) {
    TM_TRY(ops_.copy(D.k_tiles + static_cast<size_t>(dst) * bb, D.k_tiles + static_cast<size_t>(src) * bb, bb));
    TM_TRY(ops_.copy(D.v_tiles + static_cast<size_t>(dst) * bb, D.v_tiles + static_cast<size_t>(src) * bb, bb));
  }
  return {};
}

}  // namespace tmill
