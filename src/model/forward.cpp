#include "model/forward.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/log.h"
#include "core/mmap.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "kernels/attention.h"
#include "kernels/ops.h"
#include "kernels/pack.h"
#include "model/gated_delta_net.h"
#include "model/mamba1.h"
#include "model/mamba2.h"
#include "model/shortconv.h"

namespace tmill {

Forward::Forward(std::shared_ptr<const Model> model, ThreadPool* pool) : model_(std::move(model)), pool_(pool) {
  const ModelConfig& c = model_->config();
  const ModelWeights& w = model_->weights();
  // Repack / copy every matrix (PreparedMatrix), the pool's threads taking matrices largest first:
  // the load's time is this conversion and the first touch (zeroing) of the new pages, and both
  // spread over the cores that way (F16 Qwen2.5-0.5B: bf16 copy + huge-page copy of 0.99 GB).
  layers_.resize(w.layers.size());
  std::vector<std::pair<const Matrix*, PreparedMatrix*>> jobs;
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    PreparedLayer& P = layers_[l];
    // (nemotron_h's FFN layers have no mixer; falcon-h1's have a Mamba-2 mixer and attention)
    if (c.is_conv(static_cast<int64_t>(l)) || c.is_ssm(static_cast<int64_t>(l))) {
      jobs.insert(jobs.end(), {{&L.conv_in, &P.conv_in}, {&L.conv_out, &P.conv_out}});
      if (c.is_gdn(static_cast<int64_t>(l)))
        jobs.insert(jobs.end(), {{&L.ssm_gate, &P.gdn_gate}, {&L.ssm_beta, &P.gdn_beta}, {&L.ssm_alpha, &P.gdn_alpha}});
      if (c.is_ssm(static_cast<int64_t>(l))) P.conv_kernel_t = ssm_conv_kernel_t(c, L);
      if (c.arch.mamba1) jobs.insert(jobs.end(), {{&L.ssm_x, &P.mamba_x}, {&L.ssm_dt, &P.mamba_dt}});
    }
    if (c.is_linear_attn(static_cast<int64_t>(l))) {  // deci
      jobs.emplace_back(&L.wo, &P.wo);
    } else if (!c.has_attention(static_cast<int64_t>(l))) {
    } else if (c.is_mla()) {
      jobs.emplace_back(&L.wo, &P.wo);
      P.mla.collect(L, jobs);
    } else {
      jobs.insert(jobs.end(), {{&L.wq, &P.wq}, {&L.wo, &P.wo}});
      if (L.wk.valid()) jobs.emplace_back(&L.wk, &P.wk);  // (gemma4's shared-K/V layers have none)
      if (L.wv.valid() && L.wv.data != L.wk.data) jobs.emplace_back(&L.wv, &P.wv);  // (gemma4's K = V layers: K's)
      if (L.wq_gate.valid()) jobs.emplace_back(&L.wq_gate, &P.attn_gate);  // (afmoe)
    }
    if (L.per_layer_inp_gate.valid())
      jobs.insert(jobs.end(), {{&L.per_layer_inp_gate, &P.pl_gate}, {&L.per_layer_proj, &P.pl_proj}});
    if (!c.has_ffn(static_cast<int64_t>(l))) continue;  // (nemotron_h's mixer and attention layers)
    if (c.layer_is_moe(static_cast<int64_t>(l))) P.moe.collect(L, jobs);
    if (c.layer_is_moe(static_cast<int64_t>(l)) && !c.arch.moe_beside_dense) {
    } else if (L.w_gate.valid()) jobs.insert(jobs.end(), {{&L.w_gate, &P.gate}, {&L.w_up, &P.up}, {&L.w_down, &P.down}});
    else jobs.insert(jobs.end(), {{&L.w_up, &P.up}, {&L.w_down, &P.down}});  // starcoder2's ungated FFN
  }
  jobs.emplace_back(&w.output, &output_);
  if (w.per_layer_model_proj.valid()) jobs.emplace_back(&w.per_layer_model_proj, &pl_model_proj_);
  std::stable_sort(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) { return a.first->bytes() > b.first->bytes(); });
  // A matrix copied or repacked is no longer read from the mapping: its pages leave the resident set
  // at once, so a load holds the file's pages and their copies together for a few matrices only, not
  // for the whole model (several models under one memory budget: a load must not overshoot it).
  const std::shared_ptr<const MappedFile> mapping = model_->file().mapping();
  auto drop_source = [&](const Matrix& m) {
    if (!mapping) return;
    const auto lo = reinterpret_cast<uintptr_t>(m.data), end = lo + m.bytes();
    const auto mlo = reinterpret_cast<uintptr_t>(mapping->data()), mend = mlo + mapping->size();
    if (lo < mlo || end > mend) return;  // not in the mapping (e.g. converted in memory): never drop
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t a = (lo + page - 1) / page * page, b = end / page * page;  // the whole pages inside
    if (b > a) madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
  };
  auto prepare = [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      const auto& job = jobs[static_cast<size_t>(i)];
      *job.second = PreparedMatrix(*job.first);
      if (job.second->own_bytes() > 0) drop_source(*job.first);
    }
  };
  if (pool_) pool_->parallel_for(static_cast<int64_t>(jobs.size()), 1, prepare);
  else prepare(0, static_cast<int64_t>(jobs.size()), 0);
  kern::end_weight_slab();  // the next model's weights get slabs of their own (freed with this model)
  // Every matrix is now repacked or copied (PreparedMatrix); the file's pages are still read for
  // embedding rows only, so let them leave the resident set (they fault back in on use).
  if (mapping) mapping->drop_resident_pages();
  set_context_length(c.n_ctx_train);
  if (c.kq_l2_norm || c.arch.v_norm) ones_.assign(static_cast<size_t>(c.head_dim), 1.0f);
  if (c.arch.ffn_ungated) ones_ff_.assign(static_cast<size_t>(c.n_ff), 1.0f);
  if (c.n_ssm_layers() > 0) ssm_ones_.assign(static_cast<size_t>(c.ssm_conv_dim()), 1.0f);
}

void Forward::set_context_length(int64_t n_ctx) {
  const ModelConfig& c = model_->config();
  ropes_ = rope_tables(c, model_->weights().rope_freq_factors(c, n_ctx));
  rope_half_ = 0;
  for (const RopeTable& rt : ropes_) rope_half_ = std::max<int64_t>(rope_half_, static_cast<int64_t>(rt.inv_freq.size()));
  cap_ = 0;  // (the cos/sin scratch follows rope_half_)
}

uint64_t Forward::weight_bytes() const {
  const ModelWeights& w = model_->weights();
  auto prepared = [](const PreparedMatrix& p) { return p.own_bytes() ? p.own_bytes() : p.source().bytes(); };
  auto floats = [](const std::vector<float>& v) { return v.size() * sizeof(float); };
  // A tied output read in place is the embedding's own bytes: count them once.
  const bool shared = output_.own_bytes() == 0 && w.output.data == w.token_embd.data;
  uint64_t b = w.token_embd.bytes() + (shared ? 0 : prepared(output_)) + floats(w.output_norm) + floats(w.rope_freqs) +
               w.per_layer_tok_embd.bytes() + (w.per_layer_model_proj.valid() ? prepared(pl_model_proj_) : 0) +
               floats(w.per_layer_proj_norm) +
               floats(w.rope_factors_short) + floats(w.rope_factors_long) + w.pos_embd.bytes() +
               floats(w.embd_norm) + floats(w.embd_norm_b) + floats(w.output_norm_b) + floats(w.output_b);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const PreparedLayer& P = layers_[l];
    for (const PreparedMatrix* m : {&P.wq, &P.wk, &P.wv, &P.wo, &P.gate, &P.up, &P.down, &P.conv_in, &P.conv_out,
                                    &P.gdn_gate, &P.gdn_beta, &P.gdn_alpha, &P.mamba_x, &P.mamba_dt, &P.pl_gate, &P.pl_proj})
      b += prepared(*m);
    if (model_->config().layer_is_moe(static_cast<int64_t>(l))) b += P.moe.bytes();
    b += floats(P.conv_kernel_t);
    if (model_->config().is_mla()) b += P.mla.bytes();
    const LayerWeights& L = w.layers[l];
    for (const auto* v : {&L.attn_norm, &L.ffn_norm, &L.attn_norm_b, &L.ffn_norm_b, &L.ffn_gate_b, &L.ffn_up_b, &L.ffn_down_b, &L.bq, &L.bk, &L.bv, &L.q_norm, &L.k_norm, &L.attn_post_norm,
                          &L.ffn_post_norm, &L.bo, &L.attn_sinks, &L.ffn_gate_inp_b, &L.gate_exps_b, &L.up_exps_b,
                          &L.down_exps_b, &L.q_a_norm, &L.kv_a_norm, &L.conv_kernel, &L.ssm_conv_b, &L.ssm_dt_b,
                          &L.ssm_a, &L.ssm_d, &L.ssm_norm, &L.ssm_dt_norm, &L.ssm_b_norm, &L.ssm_c_norm,
                          &L.per_layer_post_norm})
      b += floats(*v);
  }
  return b;
}

uint64_t Forward::mapped_weight_bytes() const {
  const ModelWeights& w = model_->weights();
  auto in_place = [](const PreparedMatrix& p) -> uint64_t { return p.own_bytes() ? 0 : p.source().bytes(); };
  const bool shared = output_.own_bytes() == 0 && w.output.data == w.token_embd.data;
  uint64_t b = w.token_embd.bytes() + (shared ? 0 : in_place(output_)) + w.pos_embd.bytes() +  // (0 when none)
               w.per_layer_tok_embd.bytes();
  for (const PreparedLayer& P : layers_)
    for (const PreparedMatrix* m : {&P.wq, &P.wk, &P.wv, &P.wo, &P.gate, &P.up, &P.down, &P.conv_in, &P.conv_out,
                                    &P.gdn_gate, &P.gdn_beta, &P.gdn_alpha})
      b += in_place(*m);
  return std::min(b, weight_bytes());
}

void Forward::ensure_scratch(int64_t n) {
  if (n <= cap_) return;
  const ModelConfig& c = model_->config();
  cap_ = n;
  const auto N = static_cast<size_t>(n);
  x_.resize(N * c.n_embd);
  xb_.resize(N * c.n_embd);
  q_.resize(N * c.q_dim());
  k_.resize(N * c.kv_dim());
  v_.resize(N * c.kv_dim());
  // (a convolution's or a Mamba-2 mixer's output too)
  att_.resize(N * std::max({c.q_dim(), c.n_conv_layers() > 0 ? c.n_embd : 0, c.ssm_d_inner}));
  if (c.n_ssm_layers() > 0) {
    zx_.resize(N * (c.arch.gated_delta_net ? gdn_in_dim(c) : c.ssm_in_dim()));
    ssm_conv_.resize(N * c.ssm_conv_dim());
    if (c.arch.mamba1) {
      m1_xdb_.resize(N * (c.ssm_dt_rank + 2 * c.ssm_d_state));
      m1_dt_.resize(N * c.ssm_d_inner);
    }
  }
  if (c.arch.attn_output_gate) qg_.resize(N * 2 * c.q_dim());
  if (c.arch.attn_output_gate || c.arch.attn_gate_proj) gate_.resize(N * c.q_dim());
  if (c.is_mla()) ao_.resize(N * c.attn_out_dim());
  if (c.n_conv_layers() > 0) bcx_.resize(N * 3 * c.n_embd);
  hb_.resize(N * c.n_ff);
  hb2_.resize(N * c.n_ff);
  pos_.resize(N);
  seq_of_.resize(N);
  rope_cos_.resize(c.ropes.size() * N * static_cast<size_t>(rope_half_));
  rope_sin_.resize(c.ropes.size() * N * static_cast<size_t>(rope_half_));
  if (c.n_embd_per_layer > 0) {
    pl_in_.resize(N * static_cast<size_t>(c.n_layer * c.n_embd_per_layer));
    pl_h_.resize(N * static_cast<size_t>(c.n_embd_per_layer));
  }
}

void Forward::parallel(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (pool_ && n > grain) pool_->parallel_for(n, grain, [&](int64_t b, int64_t e, int) { fn(b, e); });
  else fn(0, n);
}

void Forward::residual_norm(bool add, const std::vector<float>* norm, int64_t n, const std::vector<float>* bias) {
  const ModelConfig& c = model_->config();
  const int64_t E = c.n_embd;
  const float rs = c.residual_scale;  // granite: the block's output scaled before the add
  // Row by row, so the norm reads the row the add has just written while it is in L1.
  parallel(n, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* x = x_.data() + t * E;
      float* xb = xb_.data() + t * E;
      if (add) {
        if (rs == 1.0f) add_inplace(x, xb, E);
        else axpy(x, xb, rs, E);
      }
      if (!norm) continue;
      if (norm->empty()) std::copy(x, x + E, xb);  // olmo2: no pre-norm, the block reads the stream as it is
      else if (c.arch.layer_norm)  // cohere, starcoder2 (with a bias)
        layernorm_rows(x, E, norm->data(), bias && !bias->empty() ? bias->data() : nullptr, xb, E, 1, E, c.rms_eps);
      else {
        rmsnorm_rows(x, E, norm->data(), xb, E, 1, E, c.rms_eps);
        if (bias && !bias->empty()) add_inplace(xb, bias->data(), E);  // phimoe: RMS norms with biases
      }
    }
  });
}

void Forward::post_norm(const std::vector<float>& norm, int64_t n) {
  if (norm.empty()) return;
  const ModelConfig& c = model_->config();
  const int64_t E = c.n_embd;
  parallel(n, 16, [&](int64_t t0, int64_t t1) {
    rmsnorm_rows(xb_.data() + t0 * E, E, norm.data(), xb_.data() + t0 * E, E, t1 - t0, E, c.rms_eps);
  });
}

// Attention of every batch token over its sequence's cached positions: those of the layer's sliding
// window when it has one (the kernel masks the rest), scores q.k * attn_scale, soft-capped when the
// model says so (gemma2). Bidirectional models (gemma-embedding) see their whole sequence, every
// position's K/V stored by attention_block before any token attends.
void Forward::attention(const ForwardBatch& batch, const KvStorage& kv, int64_t layer) {
  const ModelConfig& c = model_->config();
  const PagedKvView view = kv.view(c.slot(layer));
  const int64_t group = c.gqa_group_of(layer), hd = c.head_dim_of(layer), n_kv = c.n_head_kv_of(layer);
  const int64_t QD = c.q_dim_of(layer);
  const float scale = c.attn_scale;
  const LayerWeights& L = model_->weights().layers[static_cast<size_t>(layer)];  // attention sinks (gpt-oss)
  const LayerAttention& la = c.layer_attn[static_cast<size_t>(layer)];  // its window or chunks (llama4)
  // Work items: (token, run of kc adjacent KV heads), each attending the run's kc * group query heads
  // over the token's context. Runs read each block's kc tiles as one contiguous stretch of the pool,
  // which DRAM serves faster than scattered tiles when attention is bound by reading the KV (few query
  // heads per KV head: bench_attention BM_AttentionDecodeStep, OLMoE's 16 heads 24.7 -> 19.5 ms, a
  // group of 4 -5 %, Qwen2.5's group of 7 no gain); they are kept short enough that each thread still
  // gets about four items.
  const int64_t n_tokens = static_cast<int64_t>(batch.tokens.size());
  const int64_t threads = pool_ ? pool_->size() : 1;
  // the AVX-512 kernel: <= 16 query heads (8 of gemma4's 512 dimensions)
  const int64_t max_heads = paged_attention_max_heads(hd);
  int64_t kc = group <= 4 ? std::max<int64_t>(1, std::min<int64_t>(n_kv, max_heads / group)) : 1;
  while (kc > 1 && n_tokens * ((n_kv + kc - 1) / kc) < 4 * threads) kc = (kc + 1) / 2;
  const int64_t runs = (n_kv + kc - 1) / kc;
  auto body = [&](int64_t i0, int64_t i1, int) {
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t t = item / runs, h = item % runs * kc, nh = std::min(kc, n_kv - h);
      const SeqSlice& s = batch.seqs[seq_of_[t]];
      const float* q = q_.data() + t * QD + h * group * hd;
      float* out = att_.data() + t * QD + h * group * hd;
      const LayerAttention::Keys keys = la.keys(pos_[t], s.pos_begin + s.n_tokens, c.arch.bidirectional);
      const AttnMask mask{keys.first, c.attn_softcap,
                          L.attn_sinks.empty() ? nullptr : L.attn_sinks.data() + h * group,
                          c.alibi.empty() ? nullptr : c.alibi.data() + h * group};
      paged_attention_heads(q, group, h, nh, view, s.block_table.data(), keys.end, scale, out, mask);
    }
  };
  // Below ~256K multiply-adds (e.g. one decode token over < ~300 positions of Qwen2.5-0.5B) a fork/join
  // (~3 us on a busy 2-core machine) costs about what the second core would save.
  int64_t macs = 0;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const SeqSlice& s = batch.seqs[seq_of_[t]];
    const LayerAttention::Keys keys = la.keys(pos_[t], s.pos_begin + s.n_tokens, c.arch.bidirectional);
    macs += (keys.end - keys.first) * c.n_head_of(layer) * hd;
  }
  if (pool_ && macs >= (int64_t{1} << 18)) pool_->parallel_for(n_tokens * runs, 1, body);
  else body(0, n_tokens * runs, 0);
}

void Forward::run(const ForwardBatch& batch, KvStorage& kv, std::vector<float>& logits) {
  const ModelConfig& c = model_->config();
  const ModelWeights& w = model_->weights();
  const int64_t N = static_cast<int64_t>(batch.tokens.size());
  TM_ASSERT(N > 0, "empty batch");
  ensure_scratch(N);
  const int64_t E = c.n_embd;

  for (const SeqSlice& s : batch.seqs) {
    TM_ASSERT(static_cast<int64_t>(s.block_table.size()) * kv.layout().block_size >= s.pos_begin + s.n_tokens,
              "block table too short for the sequence");
    for (int32_t i = 0; i < s.n_tokens; ++i) {
      pos_[s.token_begin + i] = s.pos_begin + i;
      seq_of_[s.token_begin + i] = static_cast<int32_t>(&s - batch.seqs.data());
    }
  }
  // RoPE cos/sin per token and RoPE table, shared by the layers of that table
  for (size_t r = 0; r < ropes_.size(); ++r) {
    const RopeTable& rt = ropes_[r];
    const auto half = static_cast<int64_t>(rt.inv_freq.size());  // (gemma4: its own n_rot / 2)
    parallel(N, 16, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* cs = rope_cos_.data() + (static_cast<int64_t>(r) * N + t) * rope_half_;
        float* sn = rope_sin_.data() + (static_cast<int64_t>(r) * N + t) * rope_half_;
        rope_cos_sin_at(rt, pos_[t], half, cs, sn);
      }
    });
  }
  // token embeddings: x (N, E)
  for (int64_t t = 0; t < N; ++t) get_row(w.token_embd, batch.tokens[t], x_.data() + t * E);
  lora_.begin(batch);
  const bool lora = lora_.active();
  if (lora) lora_.apply_embedding(batch, x_.data(), E);
  if (c.embd_scale != 1.0f)  // gemma: times sqrt(n_embd)
    for (int64_t i = 0; i < N * E; ++i) x_[static_cast<size_t>(i)] *= c.embd_scale;
  if (w.pos_embd.valid()) {  // gpt2, starcoder: + the position's learned embedding
    for (int64_t t = 0; t < N; ++t) {
      TM_ASSERT(pos_[t] < w.pos_embd.rows, "position past the learned position embeddings (the plan caps the context)");
      get_row(w.pos_embd, pos_[t], xb_.data());
      add_inplace(x_.data() + t * E, xb_.data(), E);
    }
  }
  if (!w.embd_norm.empty())  // bloom: a LayerNorm of the embeddings
    layernorm_rows(x_.data(), E, w.embd_norm.data(), w.embd_norm_b.data(), x_.data(), E, N, E, c.rms_eps);
  if (c.n_embd_per_layer > 0) per_layer_inputs(batch, N);  // gemma4

  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = w.layers[l];
    const PreparedLayer& P = layers_[l];
    // attention or convolution block (layers after the first got their norm from the previous layer's
    // residual step)
    if (l == 0) residual_norm(false, &L.attn_norm, N, &L.attn_norm_b);
    const bool parallel_block = c.arch.parallel_block;  // cohere: the FFN reads this same normed input
    // (nemotron_h: a layer is a mixer, attention or an FFN alone, each reading the layer's norm)
    const bool mixer = c.has_mixer(l), ffn = c.has_ffn(l);
    if (mixer) {
      if (parallel_block && !L.ffn_norm.empty()) {  // gptneox, falcon-40b: the FFN's own norm of the layer's input
        xn_.resize(static_cast<size_t>(N * E));
        parallel(N, 16, [&](int64_t t0, int64_t t1) {
          layernorm_rows(x_.data() + t0 * E, E, L.ffn_norm.data(), L.ffn_norm_b.empty() ? nullptr : L.ffn_norm_b.data(),
                         xn_.data() + t0 * E, E, t1 - t0, E, c.rms_eps);
        });
      } else if (parallel_block || c.arch.parallel_ssm) {
        xn_.assign(xb_.begin(), xb_.begin() + N * E);
      }
      if (c.is_conv(l)) conv_block(batch, kv, l);
      else if (c.is_gdn(l)) gdn_block(batch, kv, l);
      else if (c.is_ssm(l) && c.arch.mamba1) mamba1_block(batch, kv, l);
      else if (c.is_ssm(l) && !c.arch.parallel_ssm) ssm_block(batch, kv, l);
      else if (c.is_linear_attn(l)) linear_block(l, N);
      else attention_block(batch, kv, l, lora);
      if (c.arch.parallel_ssm) {  // falcon-h1: + the Mamba-2 mixer of the same normed input
        xs_.assign(xb_.begin(), xb_.begin() + N * E);
        std::copy(xn_.begin(), xn_.begin() + N * E, xb_.begin());
        ssm_block(batch, kv, l);
        for (int64_t i = 0; i < N * E; ++i) xb_[static_cast<size_t>(i)] += xs_[static_cast<size_t>(i)];
      }
      post_norm(L.attn_post_norm, N);
    }
    // feed-forward block (SwiGLU or GeGLU, or the experts: model/moe.h); the parallel block adds the
    // attention's output and runs the FFN on the layer's normed input
    if (ffn) {
      if (!mixer) {  // (deci's layers without attention: the FFN on its own norm of the input)
        if (!L.ffn_norm.empty()) residual_norm(false, &L.ffn_norm, N, &L.ffn_norm_b);
      } else if (parallel_block) {
        residual_norm(true, nullptr, N);
        std::copy(xn_.begin(), xn_.begin() + N * E, xb_.begin());
      } else {
        residual_norm(true, &L.ffn_norm, N, &L.ffn_norm_b);
      }
      if (c.layer_is_moe(l) && c.arch.moe_beside_dense) {
        gemma4_moe_ffn(l, N, lora);
      } else if (c.layer_is_moe(l)) {
        observe(P.moe.router, xb_.data(), N);
        moe_.run(c, P.moe, xb_.data(), xb_.data(), E, N, pool_, observer_);
      } else {
        dense_ffn(l, N, lora);
      }
      post_norm(L.ffn_post_norm, N);
    }
    const std::vector<float>* next_norm = l + 1 < c.n_layer ? &w.layers[l + 1].attn_norm : nullptr;
    const std::vector<float>* next_bias = l + 1 < c.n_layer ? &w.layers[l + 1].attn_norm_b : nullptr;
    if (!mixer && !ffn) {  // (deci: a layer with neither -- the stream passes on, normed for the next layer)
      residual_norm(false, next_norm, N, next_bias);
    } else if (c.n_embd_per_layer > 0 || L.out_scale != 1.0f) {  // gemma4: the per-layer embedding, the layer's scale
      residual_norm(true, nullptr, N);
      if (c.n_embd_per_layer > 0) per_layer_block(l, N);
      if (L.out_scale != 1.0f)
        for (int64_t i = 0; i < N * E; ++i) x_[static_cast<size_t>(i)] *= L.out_scale;
      residual_norm(false, next_norm, N, next_bias);
    } else {
      residual_norm(true, next_norm, N, next_bias);
    }
  }

  // Final norm and classifier, only for the rows that need logits.
  const std::vector<int64_t> rows = batch.logit_rows();
  const auto R = static_cast<int64_t>(rows.size());
  logits.resize(static_cast<size_t>(R * (batch.hidden ? E : c.n_vocab)));
  if (R == 0) return;
  for (int64_t r = 0; r < R; ++r) {
    if (c.arch.layer_norm)
      layernorm_rows(x_.data() + rows[r] * E, E, w.output_norm.data(),
                     w.output_norm_b.empty() ? nullptr : w.output_norm_b.data(), xb_.data() + r * E, E, 1, E, c.rms_eps);
    else rmsnorm_rows(x_.data() + rows[r] * E, E, w.output_norm.data(), xb_.data() + r * E, E, 1, E, c.rms_eps);
    if (!c.arch.layer_norm && !w.output_norm_b.empty()) add_inplace(xb_.data() + r * E, w.output_norm_b.data(), E);
  }
  if (batch.hidden) {  // embeddings: the normed hidden states are the output
    logits.assign(xb_.begin(), xb_.begin() + R * E);
    return;
  }
  observe(output_, xb_.data(), R);
  matmul(output_, xb_.data(), E, logits.data(), c.n_vocab, R, pool_);
  if (lora) lora_.apply_output(rows, xb_.data(), E, logits.data(), c.n_vocab, pool_);
  if (!w.output_b.empty())  // phi2
    for (int64_t r = 0; r < R; ++r) add_inplace(logits.data() + r * c.n_vocab, w.output_b.data(), c.n_vocab);
  if (c.logit_scale != 1.0f)  // granite: logits / logit_scale (times the reciprocal, as llama.cpp)
    for (float& v : logits) v *= 1.0f / c.logit_scale;
  if (c.final_softcap > 0) softcap_inplace(logits.data(), R * c.n_vocab, c.final_softcap);
}

void Forward::attention_block(const ForwardBatch& batch, KvStorage& kv, int64_t l, bool lora) {
  const ModelConfig& c = model_->config();
  const LayerWeights& L = model_->weights().layers[static_cast<size_t>(l)];
  const PreparedLayer& P = layers_[static_cast<size_t>(l)];
  const int64_t N = static_cast<int64_t>(batch.tokens.size());
  // (gemma4: each layer its own head size, K/V heads and RoPE dimensions)
  const int64_t E = c.n_embd, QD = c.q_dim_of(l), KD = c.kv_dim_of(l), hd = c.head_dim_of(l), n_kv = c.n_head_kv_of(l);
  const int64_t rot = c.n_rot_of(l), half = rope_half_, nq = c.n_head_of(l);  // (deci: query heads per layer)
  const bool neox = c.arch.rope_layout == RopeLayout::NeoX;
  const PagedKvView view = kv.view(c.slot(l));
  const int64_t rope_off = c.has_rope(l) ? static_cast<int64_t>(c.layer_attn[static_cast<size_t>(l)].rope) * N * half : -1;
  const bool stores = c.stores_kv(l);  // (gemma4's shared-K/V layers read an earlier layer's)
  const bool v_is_k = stores && L.wv.data == L.wk.data;  // (gemma4's K = V layers)
  const bool mla = c.is_mla();
  const bool gated = c.arch.attn_output_gate;
  const bool gate_proj = L.wq_gate.valid();  // afmoe: the gate from its own projection
  if (mla) {  // deepseek2: q and the latent K (= V) with their RoPE parts rotated (model/mla.h)
    mla_.project(c, L, P.mla, xb_.data(), E, N, rope_off >= 0 ? rope_cos_.data() + rope_off : nullptr,
                 rope_off >= 0 ? rope_sin_.data() + rope_off : nullptr, q_.data(), k_.data(), pool_);
  } else {
    // a fused attn_qkv (phi3) is one weight to the observer: reported once
    observe(P.wq, xb_.data(), N);
    if (stores && P.wk.source().name != P.wq.source().name) {
      observe(P.wk, xb_.data(), N);
      if (!v_is_k) observe(P.wv, xb_.data(), N);
    }
    // (qwen35: the q projection holds each head's queries and gates, split below)
    float* qy = gated ? qg_.data() : q_.data();
    const int64_t QY = gated ? 2 * QD : QD;
    // (afmoe: its gate's projection of the same input goes with them, the input converted once)
    MatmulOutput qkv[4] = {{&P.wq, qy, QY}};
    int n_out = 1;
    if (stores) qkv[n_out++] = {&P.wk, k_.data(), KD};
    if (stores && !v_is_k) qkv[n_out++] = {&P.wv, v_.data(), KD};
    if (gate_proj) {
      observe(P.attn_gate, xb_.data(), N);
      qkv[n_out++] = {&P.attn_gate, gate_.data(), QD};
    }
    matmul_many(qkv, n_out, xb_.data(), E, N, pool_);
    if (v_is_k) std::copy(k_.begin(), k_.begin() + N * KD, v_.begin());
    if (lora) {
      lora_.apply(l, LoraSlot::Q, xb_.data(), E, qy, QY, pool_);
      if (stores) {
        lora_.apply(l, LoraSlot::K, xb_.data(), E, k_.data(), KD, pool_);
        lora_.apply(l, LoraSlot::V, xb_.data(), E, v_.data(), KD, pool_);
      }
    }
  }
  // per token: bias, q/k norm, RoPE, then its K/V into the cache (all before attention, so the
  // tokens of one chunk see each other causally)
  parallel(N, 4, [&](int64_t t0, int64_t t1) {
    // the K/V stores' lines one token ahead: K's transposed tiles put a token's values in every
    // line of its 16 heads' tiles (64 KiB for OLMoE), which otherwise miss one by one (the 16-stream
    // step's stores: 1.6-1.8 -> 0.8 ms). Once per block: a prompt's next tokens in the same block
    // write lines already fetched.
    auto prefetch_store = [&](int64_t t) {
      if (t >= t1 || !stores) return;
      const bool same_block = t > t0 && seq_of_[t] == seq_of_[t - 1] && pos_[t] % view.block_size != 0;
      if (!same_block) paged_kv_prefetch_store(view, batch.seqs[seq_of_[t]].block_table.data(), pos_[t]);
    };
    prefetch_store(t0);
    for (int64_t t = t0; t < t1; ++t) {
      prefetch_store(t + 1);
      float* q = q_.data() + t * QD;
      if (gated)  // per head: hd queries, then hd gates
        for (int64_t h = 0; h < nq; ++h) {
          const float* src = qg_.data() + t * 2 * QD + h * 2 * hd;
          std::copy(src, src + hd, q + h * hd);
          std::copy(src + hd, src + 2 * hd, gate_.data() + t * QD + h * hd);
        }
      float* k = k_.data() + t * KD;
      float* v = v_.data() + t * KD;
      if (!L.bq.empty()) {
        add_inplace(q, L.bq.data(), QD);
        add_inplace(k, L.bk.data(), KD);
        add_inplace(v, L.bv.data(), KD);
      }
      if (c.clamp_kqv > 0.0f) {  // mpt, olmo
        for (float* y : {q, k, v}) {
          const int64_t n = y == q ? QD : KD;
          for (int64_t i = 0; i < n; ++i) y[i] = std::clamp(y[i], -c.clamp_kqv, c.clamp_kqv);
        }
      }
      auto qk_norm = [&] {
        if (L.q_norm.empty()) return;
        if (c.arch.qk_norm_full) {  // olmoe: one norm over the whole q / k
          rmsnorm_rows(q, QD, L.q_norm.data(), q, QD, 1, QD, c.rms_eps);
          rmsnorm_rows(k, KD, L.k_norm.data(), k, KD, 1, KD, c.rms_eps);
        } else {
          rmsnorm_rows(q, hd, L.q_norm.data(), q, hd, nq, hd, c.rms_eps);
          if (stores) rmsnorm_rows(k, hd, L.k_norm.data(), k, hd, n_kv, hd, c.rms_eps);
        }
        if (c.arch.v_norm && stores) rmsnorm_rows(v, hd, ones_.data(), v, hd, n_kv, hd, c.rms_eps);  // gemma4
      };
      if (!c.arch.qk_norm_after_rope) qk_norm();
      if (rope_off >= 0 && !mla) {  // (smollm3's NoPE layers rotate nothing; MLA's RoPE is done)
        const float* cs = rope_cos_.data() + rope_off + t * half;
        const float* sn = rope_sin_.data() + rope_off + t * half;
        rope_heads_cs(q, nq, hd, rot, cs, sn, neox);
        if (stores) rope_heads_cs(k, n_kv, hd, rot, cs, sn, neox);
      }
      if (c.arch.qk_norm_after_rope) qk_norm();  // (hunyuan-dense)
      if (c.attn_temp_scale != 0.0f) {  // mistral3, llama4: the query's attention temperature at its position
        const float tq = c.attn_temperature_at(l, pos_[t]);
        if (tq != 1.0f)
          for (int64_t i = 0; i < QD; ++i) q[i] *= tq;
      }
      if (c.kq_l2_norm && rope_off >= 0) {  // llama4: q and k heads RMS-normalized, no weight
        rmsnorm_rows(q, hd, ones_.data(), q, hd, nq, hd, c.rms_eps);
        rmsnorm_rows(k, hd, ones_.data(), k, hd, n_kv, hd, c.rms_eps);
      }
      const SeqSlice& s = batch.seqs[seq_of_[t]];
      if (stores) paged_kv_store(view, s.block_table.data(), pos_[t], k, mla ? k : v);  // (MLA: V is K's row)
    }
  });
  attention(batch, kv, l);
  if (gated || gate_proj)  // qwen35, afmoe: the output times sigmoid(gate)
    parallel(N, 16, [&](int64_t t0, int64_t t1) {
      for (int64_t i = t0 * QD; i < t1 * QD; ++i)
        att_[static_cast<size_t>(i)] *= 1.0f / (1.0f + std::exp(-gate_[static_cast<size_t>(i)]));
    });
  const float* ao = att_.data();
  int64_t AO = QD;
  if (mla) {  // each head's latent output through its attn_v_b
    AO = c.attn_out_dim();
    mla_.output(c, P.mla, att_.data(), N, ao_.data(), pool_);
    ao = ao_.data();
  }
  observe(P.wo, ao, N);
  matmul(P.wo, ao, AO, xb_.data(), E, N, pool_);
  if (lora) lora_.apply(l, LoraSlot::O, ao, AO, xb_.data(), E, pool_);
  if (!L.bo.empty())  // attn_output.bias (gpt-oss)
    for (int64_t t = 0; t < N; ++t) add_inplace(xb_.data() + t * E, L.bo.data(), E);
}

void Forward::conv_block(const ForwardBatch& batch, KvStorage& kv, int64_t l) {
  const ModelConfig& c = model_->config();
  const LayerWeights& L = model_->weights().layers[static_cast<size_t>(l)];
  const PreparedLayer& P = layers_[static_cast<size_t>(l)];
  const int64_t N = static_cast<int64_t>(batch.tokens.size()), E = c.n_embd;
  observe(P.conv_in, xb_.data(), N);
  matmul(P.conv_in, xb_.data(), E, bcx_.data(), 3 * E, N, pool_);
  shortconv_mix(c, L.conv_kernel, batch, pos_.data(), seq_of_.data(), kv.layout(), kv.conv_state(c.slot(l)),
                bcx_.data(), att_.data(), N, pool_);
  observe(P.conv_out, att_.data(), N);
  matmul(P.conv_out, att_.data(), E, xb_.data(), E, N, pool_);
}

void Forward::ssm_block(const ForwardBatch& batch, KvStorage& kv, int64_t l) {
  const ModelConfig& c = model_->config();
  const LayerWeights& L = model_->weights().layers[static_cast<size_t>(l)];
  const PreparedLayer& P = layers_[static_cast<size_t>(l)];
  const int64_t N = static_cast<int64_t>(batch.tokens.size()), E = c.n_embd;
  observe(P.conv_in, xb_.data(), N);
  matmul(P.conv_in, xb_.data(), E, zx_.data(), c.ssm_in_dim(), N, pool_);
  mamba2_mix(c, L, batch, kv, c.slot(l), ssm_step(l), zx_.data(), att_.data(), N, pool_);
  observe(P.conv_out, att_.data(), N);
  matmul(P.conv_out, att_.data(), c.ssm_d_inner, xb_.data(), E, N, pool_);
}

void Forward::mamba1_block(const ForwardBatch& batch, KvStorage& kv, int64_t l) {
  const ModelConfig& c = model_->config();
  const LayerWeights& L = model_->weights().layers[static_cast<size_t>(l)];
  const PreparedLayer& P = layers_[static_cast<size_t>(l)];
  const int64_t N = static_cast<int64_t>(batch.tokens.size()), E = c.n_embd, DI = c.ssm_d_inner;
  const int64_t R = c.ssm_dt_rank, DS = c.ssm_d_state, XW = R + 2 * DS;
  observe(P.conv_in, xb_.data(), N);
  matmul(P.conv_in, xb_.data(), E, zx_.data(), 2 * DI, N, pool_);  // [x | z]
  const SsmStep step = ssm_step(l);
  ssm_causal_conv(c, L, batch, kv, c.slot(l), step, zx_.data(), 2 * DI, pool_);
  observe(P.mamba_x, step.conv, N);
  matmul(P.mamba_x, step.conv, DI, m1_xdb_.data(), XW, N, pool_);  // [dt | B | C]
  if (c.ssm_dt_b_c_rms || !L.ssm_dt_norm.empty()) {  // each part RMS-normalized (falcon-mamba: no weights; jamba's)
    // (ssm_ones_ spans d_inner, wider than dt's rank and d_state)
    auto weights = [&](const std::vector<float>& v) { return v.empty() ? ssm_ones_.data() : v.data(); };
    float* x = m1_xdb_.data();
    rmsnorm_rows(x, XW, weights(L.ssm_dt_norm), x, XW, N, R, c.rms_eps);
    rmsnorm_rows(x + R, XW, weights(L.ssm_b_norm), x + R, XW, N, DS, c.rms_eps);
    rmsnorm_rows(x + R + DS, XW, weights(L.ssm_c_norm), x + R + DS, XW, N, DS, c.rms_eps);
  }
  observe(P.mamba_dt, m1_xdb_.data(), N);
  matmul(P.mamba_dt, m1_xdb_.data(), XW, m1_dt_.data(), DI, N, pool_);
  mamba1_scan(c, L, batch, kv, c.slot(l), step.conv, m1_xdb_.data(), XW, m1_dt_.data(), zx_.data(), att_.data(), pool_);
  observe(P.conv_out, att_.data(), N);
  matmul(P.conv_out, att_.data(), DI, xb_.data(), E, N, pool_);
}

void Forward::gdn_block(const ForwardBatch& batch, KvStorage& kv, int64_t l) {
  const ModelConfig& c = model_->config();
  const LayerWeights& L = model_->weights().layers[static_cast<size_t>(l)];
  const PreparedLayer& P = layers_[static_cast<size_t>(l)];
  const int64_t N = static_cast<int64_t>(batch.tokens.size()), E = c.n_embd, W = gdn_in_dim(c);
  const int64_t CD = c.ssm_conv_dim(), DI = c.ssm_d_inner, H = c.ssm_n_head;
  for (const PreparedMatrix* m : {&P.conv_in, &P.gdn_gate, &P.gdn_beta, &P.gdn_alpha}) observe(*m, xb_.data(), N);
  const MatmulOutput outs[] = {{&P.conv_in, zx_.data(), W},
                               {&P.gdn_gate, zx_.data() + CD, W},
                               {&P.gdn_beta, zx_.data() + CD + DI, W},
                               {&P.gdn_alpha, zx_.data() + CD + DI + H, W}};
  matmul_many(outs, 4, xb_.data(), E, N, pool_);
  gated_delta_net_mix(c, L, batch, kv, c.slot(l), ssm_step(l), zx_.data(), att_.data(), N, pool_);
  observe(P.conv_out, att_.data(), N);
  matmul(P.conv_out, att_.data(), DI, xb_.data(), E, N, pool_);
}

void Forward::linear_block(int64_t l, int64_t N) {
  const ModelConfig& c = model_->config();
  const LayerWeights& L = model_->weights().layers[static_cast<size_t>(l)];
  const int64_t E = c.n_embd;
  xn_.assign(xb_.begin(), xb_.begin() + N * E);
  observe(layers_[static_cast<size_t>(l)].wo, xn_.data(), N);
  matmul(layers_[static_cast<size_t>(l)].wo, xn_.data(), E, xb_.data(), E, N, pool_);
  if (!L.bo.empty())
    for (int64_t t = 0; t < N; ++t) add_inplace(xb_.data() + t * E, L.bo.data(), E);
}

void Forward::gemma4_moe_ffn(int64_t l, int64_t N, bool lora) {
  const ModelConfig& c = model_->config();
  const LayerWeights& L = model_->weights().layers[static_cast<size_t>(l)];
  const PreparedLayer& P = layers_[static_cast<size_t>(l)];
  const int64_t E = c.n_embd;
  xm_.resize(static_cast<size_t>(N * E));
  xr_.resize(static_cast<size_t>(N * E));
  // the experts' input (pre_ffw_norm_2's norm of x) and the router's (x normed, times 1/sqrt(n_embd) and
  // ffn_gate_inp.scale)
  const float rs = 1.0f / std::sqrt(static_cast<float>(E));
  parallel(N, 16, [&](int64_t t0, int64_t t1) {
    rmsnorm_rows(x_.data() + t0 * E, E, L.pre_ffw_norm_2.data(), xm_.data() + t0 * E, E, t1 - t0, E, c.rms_eps);
    rmsnorm_rows(x_.data() + t0 * E, E, L.ffn_gate_inp_s.data(), xr_.data() + t0 * E, E, t1 - t0, E, c.rms_eps);
    for (int64_t i = t0 * E; i < t1 * E; ++i) xr_[static_cast<size_t>(i)] *= rs;
  });
  observe(P.moe.router, xr_.data(), N);
  moe_.run(c, P.moe, xm_.data(), xm_.data(), E, N, pool_, observer_, xr_.data());
  dense_ffn(l, N, lora);  // (on xb: ffn_norm's norm of x)
  post_norm(L.post_ffw_norm_1, N);
  parallel(N, 16, [&](int64_t t0, int64_t t1) {  // + post_ffw_norm_2 of the experts' sum
    for (int64_t t = t0; t < t1; ++t) {
      float* m = xm_.data() + t * E;
      rmsnorm_rows(m, E, L.post_ffw_norm_2.data(), m, E, 1, E, c.rms_eps);
      add_inplace(xb_.data() + t * E, m, E);
    }
  });
}

void Forward::per_layer_inputs(const ForwardBatch& batch, int64_t N) {
  const ModelConfig& c = model_->config();
  const ModelWeights& w = model_->weights();
  const int64_t E = c.n_embd, PL = c.n_embd_per_layer, W = c.n_layer * PL;
  // llama.cpp's project_per_layer_inputs: the scaled embedding's projection times 1/sqrt(n_embd), each
  // layer's slice RMS-normed, plus the token's per-layer row times sqrt(PL), all times 1/sqrt(2)
  observe(pl_model_proj_, x_.data(), N);
  matmul(pl_model_proj_, x_.data(), E, pl_in_.data(), W, N, pool_);
  const float proj_scale = 1.0f / std::sqrt(static_cast<float>(E)), tok_scale = std::sqrt(static_cast<float>(PL));
  const float in_scale = 1.0f / std::sqrt(2.0f);
  parallel(N, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> row(static_cast<size_t>(W));
    for (int64_t t = t0; t < t1; ++t) {
      float* y = pl_in_.data() + t * W;
      for (int64_t i = 0; i < W; ++i) y[i] *= proj_scale;
      rmsnorm_rows(y, PL, w.per_layer_proj_norm.data(), y, PL, c.n_layer, PL, c.rms_eps);
      get_row(w.per_layer_tok_embd, batch.tokens[static_cast<size_t>(t)], row.data());
      for (int64_t i = 0; i < W; ++i) y[i] = (y[i] + row[static_cast<size_t>(i)] * tok_scale) * in_scale;
    }
  });
}

void Forward::per_layer_block(int64_t l, int64_t N) {
  const ModelConfig& c = model_->config();
  const LayerWeights& L = model_->weights().layers[static_cast<size_t>(l)];
  const PreparedLayer& P = layers_[static_cast<size_t>(l)];
  const int64_t E = c.n_embd, PL = c.n_embd_per_layer, W = c.n_layer * PL;
  observe(P.pl_gate, x_.data(), N);
  matmul(P.pl_gate, x_.data(), E, pl_h_.data(), PL, N, pool_);
  parallel(N, 16, [&](int64_t t0, int64_t t1) {  // gelu(gate x) * the layer's input
    for (int64_t t = t0; t < t1; ++t) gelu_mul(pl_h_.data() + t * PL, pl_in_.data() + t * W + l * PL, PL);
  });
  observe(P.pl_proj, pl_h_.data(), N);
  matmul(P.pl_proj, pl_h_.data(), PL, xb_.data(), E, N, pool_);
  post_norm(L.per_layer_post_norm, N);
  residual_norm(true, nullptr, N);
}

void Forward::dense_ffn(int64_t l, int64_t N, bool lora) {
  const ModelConfig& c = model_->config();
  const PreparedLayer& P = layers_[static_cast<size_t>(l)];
  const int64_t E = c.n_embd, F = c.n_ff_of(l);  // (gemma4: per layer)
  if (c.arch.ffn_ungated) {  // starcoder2: down(gelu(up x + b_up)) + b_down; arcee: down(relu(up x)^2)
    const LayerWeights& L = model_->weights().layers[static_cast<size_t>(l)];
    observe(P.up, xb_.data(), N);
    matmul(P.up, xb_.data(), E, hb_.data(), F, N, pool_);
    if (lora) lora_.apply(l, LoraSlot::Up, xb_.data(), E, hb_.data(), F, pool_);
    parallel(N, 4, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* h = hb_.data() + t * F;
        if (!L.ffn_up_b.empty()) add_inplace(h, L.ffn_up_b.data(), F);
        if (c.arch.ffn_act == FfnActivation::GeluTanh) {
          gelu_mul(h, ones_ff_.data(), F);
        } else if (c.arch.ffn_act == FfnActivation::ReluSqr) {  // arcee: relu(h)^2
          for (int64_t i = 0; i < F; ++i) h[i] = h[i] > 0.0f ? h[i] * h[i] : 0.0f;
        } else if (c.arch.ffn_act == FfnActivation::XIelu) {  // apertus: the layer's xIELU
          const ModelConfig::XIelu& act = c.xielu[static_cast<size_t>(l)];
          for (int64_t i = 0; i < F; ++i) h[i] = act(h[i]);
        } else {
          silu_mul(h, ones_ff_.data(), F);
        }
      }
    });
    observe(P.down, hb_.data(), N);
    matmul(P.down, hb_.data(), F, xb_.data(), E, N, pool_);
    if (lora) lora_.apply(l, LoraSlot::Down, hb_.data(), F, xb_.data(), E, pool_);
    if (!L.ffn_down_b.empty())
      for (int64_t t = 0; t < N; ++t) add_inplace(xb_.data() + t * E, L.ffn_down_b.data(), E);
    return;
  }
  observe(P.gate, xb_.data(), N);
  if (P.up.source().name != P.gate.source().name) observe(P.up, xb_.data(), N);
  const MatmulOutput gate_up[] = {{&P.gate, hb_.data(), F}, {&P.up, hb2_.data(), F}};
  matmul_many(gate_up, 2, xb_.data(), E, N, pool_);
  if (lora) {
    lora_.apply(l, LoraSlot::Gate, xb_.data(), E, hb_.data(), F, pool_);
    lora_.apply(l, LoraSlot::Up, xb_.data(), E, hb2_.data(), F, pool_);
  }
  const bool gelu = c.arch.ffn_act == FfnActivation::GeluTanh;
  const LayerWeights& L = model_->weights().layers[static_cast<size_t>(l)];
  const bool biased = !L.ffn_gate_b.empty();  // jais: gate, up and down biases
  // The observer, an adapted down projection, GeGLU and biases need the product's input, so the
  // activation runs first there.
  if (gelu || biased || observer_ || (lora && lora_.touches(l, LoraSlot::Down))) {
    parallel(N, 4, [&](int64_t t0, int64_t t1) {
      if (biased)
        for (int64_t t = t0; t < t1; ++t) {
          add_inplace(hb_.data() + t * F, L.ffn_gate_b.data(), F);
          add_inplace(hb2_.data() + t * F, L.ffn_up_b.data(), F);
        }
      if (gelu) gelu_mul(hb_.data() + t0 * F, hb2_.data() + t0 * F, (t1 - t0) * F);
      else silu_mul(hb_.data() + t0 * F, hb2_.data() + t0 * F, (t1 - t0) * F);
    });
    observe(P.down, hb_.data(), N);
    matmul(P.down, hb_.data(), F, xb_.data(), E, N, pool_);
    if (lora) lora_.apply(l, LoraSlot::Down, hb_.data(), F, xb_.data(), E, pool_);
    if (biased)
      for (int64_t t = 0; t < N; ++t) add_inplace(xb_.data() + t * E, L.ffn_down_b.data(), E);
  } else {
    // SwiGLU tile by tile inside the product, each tile just before it is quantized
    matmul_swiglu(P.down, hb_.data(), F, hb2_.data(), F, xb_.data(), E, N, pool_);
  }
}

}  // namespace tmill
