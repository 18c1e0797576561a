#include "convert/hf_tensor_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "convert/hf_tensor_ops.h"
#include "core/fp16.h"
#include "core/log.h"

namespace tmill {
namespace {

// Expected HF shape (outermost first) of every tensor the config implies, keyed by GGUF name.
std::map<std::string, std::vector<int64_t>> expected_tensors(const HfConfig& c) {
  const int64_t H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), F = c.intermediate_size;
  std::map<std::string, std::vector<int64_t>> m;
  m["token_embd.weight"] = {c.vocab_size, H};
  m[c.gguf_arch == "lfm2" ? "token_embd_norm.weight" : "output_norm.weight"] = {H};
  if (!c.tie_word_embeddings) m["output.weight"] = {c.vocab_size, H};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string b = fmt::format("blk.{}.", i);
    if (c.pre_norms) m[b + "attn_norm.weight"] = {H};  // (olmo2: none)
    if (c.fused_qkv_ffn) {  // phi3: q, k, v rows stacked; gate rows then up rows
      m[b + "attn_qkv.weight"] = {Q + 2 * KV, H};
      m[b + "ffn_up.weight"] = {2 * F, H};
    } else if (!c.dense_layer(i)) {  // experts stacked along the outermost axis (HF order: [n_expert, rows, cols])
      const int64_t E = c.n_expert, FE = c.expert_rows();
      m[b + "attn_q.weight"] = {Q, H};
      m[b + "attn_k.weight"] = {KV, H};
      m[b + "attn_v.weight"] = {KV, H};
      m[b + "ffn_gate_inp.weight"] = {E, H};
      m[b + "ffn_gate_exps.weight"] = {E, FE, H};
      m[b + "ffn_up_exps.weight"] = {E, FE, H};
      m[b + "ffn_down_exps.weight"] = {E, H, FE};
      if (c.gptoss()) {  // router and expert biases, the sinks (expert biases: from gate_up_proj_bias / down_proj_bias)
        m[b + "ffn_gate_inp.bias"] = {E};
        m[b + "ffn_gate_exps.bias"] = {E, FE};
        m[b + "ffn_up_exps.bias"] = {E, FE};
        m[b + "ffn_down_exps.bias"] = {E, H};
        m[b + "attn_sinks.weight"] = {c.num_attention_heads};
      }
      if (const int64_t S = c.shared_expert_intermediate_size; S > 0) {
        m[b + "ffn_gate_inp_shexp.weight"] = {1, H};
        m[b + "ffn_gate_shexp.weight"] = {S, H};
        m[b + "ffn_up_shexp.weight"] = {S, H};
        m[b + "ffn_down_shexp.weight"] = {H, S};
      }
      if (c.gguf_arch == "minimax-m2") m[b + "exp_probs_b.bias"] = {E};
      if (c.gguf_arch == "glm4moe" || c.gguf_arch == "deepseek2") {  // the selection bias; the ungated shared experts
        if (c.selection_bias) m[b + "exp_probs_b.bias"] = {E};
        if (const int64_t S = c.n_shared_experts * FE; S > 0) {
          m[b + "ffn_gate_shexp.weight"] = {S, H};
          m[b + "ffn_up_shexp.weight"] = {S, H};
          m[b + "ffn_down_shexp.weight"] = {H, S};
        }
      }
    } else {
      m[b + "attn_q.weight"] = {Q, H};
      m[b + "attn_k.weight"] = {KV, H};
      m[b + "attn_v.weight"] = {KV, H};
      if (c.fused_ffn) {  // glm4: gate rows then up rows
        m[b + "ffn_up.weight"] = {2 * F, H};
      } else {
        m[b + "ffn_gate.weight"] = {F, H};
        m[b + "ffn_up.weight"] = {F, H};
      }
    }
    m[b + "attn_output.weight"] = {H, Q};
    if (c.pre_norms) m[b + (c.ffn_norm_is_post_attention_norm() ? "post_attention_norm.weight" : "ffn_norm.weight")] = {H};
    if (c.post_norms) {  // the attention output's and the FFN output's norms (gemma2/gemma3, olmo2)
      m[b + "post_attention_norm.weight"] = {H};
      m[b + "post_ffw_norm.weight"] = {H};
    }
    if (c.dense_layer(i)) m[b + "ffn_down.weight"] = {H, F};
    if (c.attention_bias) {
      m[b + "attn_q.bias"] = {Q};
      m[b + "attn_k.bias"] = {KV};
      m[b + "attn_v.bias"] = {KV};
      if (c.gguf_arch != "qwen2" && c.gguf_arch != "qwen2moe" && c.gguf_arch != "glm4" && c.gguf_arch != "glm4moe" &&
          c.gguf_arch != "seed_oss")
        m[b + "attn_output.bias"] = {H};
    }
    if (c.mlp_bias) {
      m[b + "ffn_gate.bias"] = {F};
      m[b + "ffn_up.bias"] = {F};
      m[b + "ffn_down.bias"] = {H};
    }
    if (c.is_mla()) {  // deepseek2's latent attention in place of q / k / v (attn_k_b / attn_v_b: from kv_b_proj)
      const int64_t NH = c.num_attention_heads, R = c.mla_kv_rank, QP = NH * (c.mla_nope + c.rope_dims);
      for (const char* t : {"attn_q.weight", "attn_k.weight", "attn_v.weight"}) m.erase(b + t);
      if (c.mla_q_rank > 0) {
        m[b + "attn_q_a.weight"] = {c.mla_q_rank, H};
        m[b + "attn_q_a_norm.weight"] = {c.mla_q_rank};
        m[b + "attn_q_b.weight"] = {QP, c.mla_q_rank};
      } else {
        m[b + "attn_q.weight"] = {QP, H};
      }
      m[b + "attn_kv_a_mqa.weight"] = {R + c.rope_dims, H};
      m[b + "attn_kv_a_norm.weight"] = {R};
      m[b + "attn_k_b.weight"] = {NH, R, c.mla_nope};
      m[b + "attn_v_b.weight"] = {NH, c.mla_v, R};
      m[b + "attn_output.weight"] = {H, NH * c.mla_v};
    }
    if (c.qk_norm && !c.is_conv(i)) {  // per head; olmoe: over the whole q / k projection
      m[b + "attn_q_norm.weight"] = {c.qk_norm_full ? Q : c.head_dim};
      m[b + "attn_k_norm.weight"] = {c.qk_norm_full ? KV : c.head_dim};
    }
    if (c.is_conv(i)) {  // lfm2: the short convolution in place of attention (conv.conv: [H, 1, L])
      for (const char* t : {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight"}) m.erase(b + t);
      m[b + "shortconv.in_proj.weight"] = {3 * H, H};
      m[b + "shortconv.conv.weight"] = {H, 1, c.conv_l};
      m[b + "shortconv.out_proj.weight"] = {H, H};
    }
  }
  return m;
}

// An FP8 matrix's scale (rows x cols weights): one value, one per row ([rows] or [rows, 1]), or one per
// block of block[0] x block[1] ([ceil(rows / b0), ceil(cols / b1)]); value(r, c) multiplies element (r, c).
struct Fp8Scale {
  std::vector<float> v;
  int64_t per_row = 0, b0 = 0, b1 = 0, bcols = 0;  // per_row: 1; blocks: b0, b1 and blocks per row
  float at(int64_t r, int64_t c) const {
    if (v.size() == 1) return v[0];
    if (per_row) return v[static_cast<size_t>(r)];
    return v[static_cast<size_t>((r / b0) * bcols + c / b1)];
  }
};
Result<Fp8Scale> read_fp8_scale(const SafetensorsModel::Ref& s, int64_t rows, int64_t cols, const int64_t (&block)[2]) {
  const SafetensorsTensor& t = *s.tensor;
  Fp8Scale f;
  f.v.resize(static_cast<size_t>(t.n_elements));
  TM_TRY(s.file->read_f32(t, f.v.data()));
  const int64_t br = (rows + block[0] - 1) / block[0], bc = (cols + block[1] - 1) / block[1];
  if (t.n_elements == 1) return f;
  if (t.n_elements == rows && (t.shape.size() == 1 || (t.shape.size() == 2 && t.shape[1] == 1))) {
    f.per_row = 1;
    return f;
  }
  if (t.shape == std::vector<int64_t>{br, bc}) {
    f.b0 = block[0], f.b1 = block[1], f.bcols = bc;
    return f;
  }
  return Error{fmt::format("{}: tensor '{}': an FP8 scale of shape {} fits neither the tensor, its {} rows nor its "
                           "{} x {} blocks of {} x {}",
                           s.file->path(), t.name, shape_str(t.shape), rows, br, bc, block[0], block[1])};
}

// One GGUF tensor converted from one HF tensor: rows of `cols` elements, optionally row-permuted; an FP8
// source (scale non-null) dequantized with its scale.
Status convert_rows(const SafetensorsModel::Ref& src, DType out, int64_t permute_head_dim, uint8_t* dst,
                    size_t nbytes, const SafetensorsModel::Ref* scale = nullptr, const int64_t (&block)[2] = {128, 128},
                    float shift = 0) {
  const SafetensorsTensor& t = *src.tensor;
  const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
  const int64_t cols = rows ? t.n_elements / rows : 0;
  const size_t out_esz = out == DType::F32 ? 4 : 2;
  if (nbytes != static_cast<size_t>(t.n_elements) * out_esz) return Error{"internal: tensor size mismatch"};
  const bool raw = float_dtype(t.dtype) == out && shift == 0;  // same type: copy bits (exact, NaN payloads kept)
  std::optional<Fp8Scale> fs;
  if (scale) {
    TM_ASSIGN_OR_RETURN(fs, read_fp8_scale(*scale, rows, cols, block));
  }
  std::vector<float> tmp(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t sr = permute_head_dim ? llama_qk_permuted_source_row(r, permute_head_dim) : r;
    uint8_t* d = dst + static_cast<size_t>(r * cols) * out_esz;
    if (raw) {
      std::memcpy(d, t.data + static_cast<size_t>(sr * cols) * out_esz, static_cast<size_t>(cols) * out_esz);
      continue;
    }
    TM_TRY(src.file->read_f32(t, static_cast<uint64_t>(sr * cols), static_cast<uint64_t>(cols), tmp.data()));
    if (fs)
      for (int64_t k = 0; k < cols; ++k) tmp[static_cast<size_t>(k)] *= fs->at(sr, k);
    if (shift != 0)
      for (float& v : tmp) v += shift;
    for (int64_t k = 0; k < cols; ++k) {
      if (out == DType::F32) {
        std::memcpy(d + k * 4, &tmp[k], 4);
      } else {
        const uint16_t h = out == DType::F16 ? fp32_to_fp16(tmp[k]) : fp32_to_bf16(tmp[k]);
        std::memcpy(d + k * 2, &h, 2);
      }
    }
  }
  return {};
}

std::vector<int64_t> reversed(const std::vector<int64_t>& v) { return std::vector<int64_t>(v.rbegin(), v.rend()); }

// An FP8 or INT8 matrix: multiplied by its scale at conversion.
bool scaled_dtype(StDType t) { return st_dtype_is_fp8(t) || t == StDType::I8; }

Status check_dtype(const SafetensorsModel::Ref& ref, const std::string& where, bool scaled_ok = false) {
  if (scaled_ok && scaled_dtype(ref.tensor->dtype)) return {};
  if (scaled_dtype(ref.tensor->dtype))
    return Error{fmt::format("{}: {} is read for the 2-D matrices of an FP8 or INT8 checkpoint (with their scales), not "
                             "for fused expert tensors or biases",
                             where, st_dtype_name(ref.tensor->dtype))};
  if (!st_dtype_is_float(ref.tensor->dtype))
    return Error{fmt::format("{}: unsupported dtype {} (only F32, F16 and BF16 weights are supported)", where,
                             st_dtype_name(ref.tensor->dtype))};
  return {};
}

Status check_shape(const SafetensorsModel::Ref& ref, const std::vector<int64_t>& want, const std::string& where) {
  if (ref.tensor->shape != want)
    return Error{fmt::format("{}: shape {} does not match config.json (expected {})", where,
                             shape_str(ref.tensor->shape), shape_str(want))};
  return {};
}

Error unexpected_expert(const HfConfig& c, const std::string& where) {
  return Error{fmt::format("{}: unexpected for {} with this config.json ({} layers, {} experts)", where, c.hf_arch,
                           c.num_hidden_layers, c.n_expert)};
}

// The routers (ffn_gate_inp, ffn_gate_inp_shexp) stay F32 whatever the output type, as llama.cpp's converter.
bool is_router(const std::string& gg) { return gg.find(".ffn_gate_inp") != std::string::npos; }

}  // namespace

// llama-family q / k rows are permuted per head (0: not this tensor).
int64_t HfTensorPlan::qk_permute_head_dim(const std::string& gg) const {
  const bool qk = gg.find(".attn_q.") != std::string::npos || gg.find(".attn_k.") != std::string::npos;
  return m_->config.permute_qk && qk ? m_->config.head_dim : 0;
}

HfTensorPlan::HfTensorPlan(const HfModel& m) : m_(&m), expected_(expected_tensors(m.config)) {}

Result<HfTensorPlan> HfTensorPlan::make(const HfModel& m) {
  HfTensorPlan p(m);
  for (const std::string& hf : m.weights.names()) TM_TRY(p.add(hf));
  TM_TRY(p.finish());
  return p;
}

Status HfTensorPlan::add(const std::string& hf) {
  const auto ref = *m_->weights.find(hf);
  const std::string where = fmt::format("{}: tensor '{}'", ref.file->path(), hf);
  // a multimodal checkpoint's language model is mapped under the text model's names; its vision tower skipped
  const bool multimodal = m_->config.hf_arch.ends_with("ForConditionalGeneration");
  const std::optional<std::string> name = multimodal ? hf_text_tensor_name(hf) : hf;
  if (!name) {
    if (skipped_vision_++ == 0) log_info("{}: the vision tower's tensors are skipped (text only)", m_->dir);
    return {};
  }
  if (m_->config.scaled()) {  // FP8 / INT8 scales: read with their matrices; activation and KV scales: not used
    for (const char* s : {".weight_scale", ".weight_scale_inv", ".input_scale", ".input_zero_point", ".k_scale",
                          ".v_scale", ".kv_scale"})
      if (hf.ends_with(s)) return {};
  }
  if (auto part = packed_part(hf, m_->config.packed)) {  // taken with their module's packed weight
    packed_parts_.try_emplace(part->first, hf);
    if (part->second != PackedPart::Weight) return {};
    return add_packed(part->first, packed_part(*name, m_->config.packed)->first, where);
  }
  if (const auto layer = hf_layer_of(*name); layer && *layer >= m_->config.num_hidden_layers && m_->config.nextn_layers > 0 &&
                                             *layer < m_->config.num_hidden_layers + m_->config.nextn_layers) {
    if (skipped_nextn_++ == 0)
      log_info("{}: the NextN (multi-token prediction) layer's tensors are left out (tokenmill does not run MTP heads)",
               m_->dir);
    return {};
  }
  if (m_->config.is_mla() && name->ends_with(".self_attn.kv_b_proj.weight")) return add_kv_b(*hf_layer_of(*name), ref, hf, where);
  if (auto f = hf_fused_expert_tensor(*name)) return add_fused(*f, ref, hf, where);
  if (auto part = hf_expert_tensor(*name)) return add_expert(*part, ref, where);
  return add_plain(hf, *name, ref, where);
}

Status HfTensorPlan::claim(const std::string& gg, const std::string& where) {
  if (stacked_.count(gg) || fused_.count(gg))
    return Error{fmt::format("{}: '{}' is given twice (per-expert and fused expert tensors)", where, gg)};
  if (!expected_.erase(gg)) return unexpected_expert(m_->config, where);
  fused_.insert(gg);
  return {};
}

// Fused expert tensors (transformers 5's gate_up_proj / down_proj; gpt-oss's, MXFP4 or not, and biases).
Status HfTensorPlan::add_fused(const HfFusedExpert& f, const SafetensorsModel::Ref& ref, const std::string& hf,
                               const std::string& where) {
  using P = HfFusedExpertPart;
  const HfConfig& c = m_->config;
  const bool oss = c.gptoss();
  const int64_t E = c.n_expert, F = c.expert_rows(), H = c.hidden_size;
  const std::string b = fmt::format("blk.{}.", f.layer);
  const bool bias = f.part == P::GateUpBias || f.part == P::DownBias;
  const bool mx = f.part == P::GateUpBlocks || f.part == P::GateUpScales || f.part == P::DownBlocks ||
                  f.part == P::DownScales;
  if (c.n_expert == 0 || ((bias || mx) && !oss) || f.layer >= c.num_hidden_layers) return unexpected_expert(c, where);
  if (mx) return add_mxfp4(f, ref, hf, where);
  auto add_gather = [&](const std::string& gg, std::vector<int64_t> ne, bool keep_f32, Gather g) -> Status {
    TM_TRY(claim(gg, where));
    items_.push_back({gg, {ref}, std::move(ne), true, keep_f32, 0, std::nullopt,
                      [g](uint8_t* dst, size_t n, DType out) { return gather(g, out, dst, n); }});
    return {};
  };
  switch (f.part) {
    case P::GateUp: {  // transformers 5: [E, 2F, H], gate rows first; gpt-oss: [E, H, 2F], gate columns even
      TM_TRY(check_shape(ref, oss ? std::vector<int64_t>{E, H, 2 * F} : std::vector<int64_t>{E, 2 * F, H}, where));
      TM_TRY(check_dtype(ref, where));
      weight_dtypes_.insert(ref.tensor->dtype);
      for (int half = 0; half < 2; ++half) {
        const Gather g = oss ? Gather{ref, E, H, 2 * F, half, 2, F, H, true}
                             : Gather{ref, E, 2 * F, H, half * F, 1, F, H, false};
        TM_TRY(add_gather(b + (half ? "ffn_up_exps.weight" : "ffn_gate_exps.weight"), {H, F, E}, false, g));
      }
      return {};
    }
    case P::Down: {  // transformers 5: [E, H, F]; gpt-oss: [E, F, H]
      TM_TRY(check_shape(ref, oss ? std::vector<int64_t>{E, F, H} : std::vector<int64_t>{E, H, F}, where));
      TM_TRY(check_dtype(ref, where));
      weight_dtypes_.insert(ref.tensor->dtype);
      const Gather g = oss ? Gather{ref, E, F, H, 0, 1, H, F, true} : Gather{ref, E, H, F, 0, 1, H, F, false};
      return add_gather(b + "ffn_down_exps.weight", {F, H, E}, false, g);
    }
    case P::GateUpBias: {  // [E, 2F], gate even: F32 [F, E] each
      TM_TRY(check_shape(ref, {E, 2 * F}, where));
      TM_TRY(check_dtype(ref, where));
      for (int half = 0; half < 2; ++half)
        TM_TRY(add_gather(b + (half ? "ffn_up_exps.bias" : "ffn_gate_exps.bias"), {F, E}, true,
                          Gather{ref, E, 1, 2 * F, half, 2, F, 1, true}));
      return {};
    }
    case P::DownBias:
      TM_TRY(check_shape(ref, {E, H}, where));
      TM_TRY(check_dtype(ref, where));
      return add_gather(b + "ffn_down_exps.bias", {H, E}, true, Gather{ref, E, H, 1, 0, 1, H, 1, false});
    default:
      return {};
  }
}

// deepseek2: self_attn.kv_b_proj [heads x (nope + v), kv_lora_rank] split per head into attn_k_b (the
// nope rows, transposed: [heads, kv_lora_rank, nope]) and attn_v_b (the v rows: [heads, v,
// kv_lora_rank]), as llama.cpp's DeepseekV2Model does; an FP8 / INT8 source is dequantized first.
Status HfTensorPlan::add_kv_b(int64_t layer, const SafetensorsModel::Ref& ref, const std::string& hf,
                              const std::string& where) {
  const HfConfig& c = m_->config;
  const int64_t NH = c.num_attention_heads, N = c.mla_nope, V = c.mla_v, R = c.mla_kv_rank;
  if (layer >= c.num_hidden_layers) return unexpected_expert(c, where);
  TM_TRY(check_shape(ref, {NH * (N + V), R}, where));
  TM_TRY(check_dtype(ref, where, c.scaled()));
  TM_ASSIGN_OR_RETURN(auto scales, fp8_scale(hf, ref, where));
  weight_dtypes_.insert(scales.empty() ? ref.tensor->dtype : StDType::BF16);
  const std::optional<SafetensorsModel::Ref> scale = scales.empty() ? std::nullopt : std::optional(scales.front());
  const int64_t block[2] = {c.fp8_block[0], c.fp8_block[1]};
  for (int part = 0; part < 2; ++part) {
    const std::string gg = fmt::format("blk.{}.{}", layer, part ? "attn_v_b.weight" : "attn_k_b.weight");
    TM_TRY(claim(gg, where));
    std::vector<int64_t> ne = part ? std::vector<int64_t>{R, V, NH} : std::vector<int64_t>{N, R, NH};
    items_.push_back({gg, {ref}, std::move(ne), true, false, 0, std::nullopt,
                      [=](uint8_t* dst, size_t n, DType out) -> Status {
                        std::vector<float> all(static_cast<size_t>(NH * (N + V) * R));
                        TM_TRY(convert_rows(ref, DType::F32, 0, reinterpret_cast<uint8_t*>(all.data()), all.size() * 4,
                                            scale ? &*scale : nullptr, {block[0], block[1]}));
                        const int64_t rows = part ? V : R, cols = part ? R : N;
                        const size_t esz = out == DType::F32 ? 4 : 2;
                        if (n != static_cast<size_t>(NH * rows * cols) * esz) return Error{"internal: tensor size mismatch"};
                        for (int64_t h = 0; h < NH; ++h)
                          for (int64_t r = 0; r < rows; ++r)
                            for (int64_t k = 0; k < cols; ++k) {
                              // k_b_h(r, k) = kv_b(h, k, r); v_b_h(r, k) = kv_b(h, N + r, k)
                              const float v = part ? all[static_cast<size_t>((h * (N + V) + N + r) * R + k)]
                                                   : all[static_cast<size_t>((h * (N + V) + k) * R + r)];
                              uint8_t* d = dst + static_cast<size_t>((h * rows + r) * cols + k) * esz;
                              if (out == DType::F32) {
                                std::memcpy(d, &v, 4);
                              } else {
                                const uint16_t x = out == DType::F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
                                std::memcpy(d, &x, 2);
                              }
                            }
                        return {};
                      }});
  }
  return {};
}

// gpt-oss's MXFP4 experts: `_blocks` are taken with their `_scales`, repacked bit for bit.
Status HfTensorPlan::add_mxfp4(const HfFusedExpert& f, const SafetensorsModel::Ref& ref, const std::string& hf,
                               const std::string& where) {
  using P = HfFusedExpertPart;
  const HfConfig& c = m_->config;
  const int64_t E = c.n_expert, F = c.expert_rows(), H = c.hidden_size;
  const std::string b = fmt::format("blk.{}.", f.layer);
  if (f.part == P::GateUpBlocks || f.part == P::DownBlocks) {  // taken with their scales
    const std::string scales = hf.substr(0, hf.size() - 7) + "_scales";
    if (!m_->weights.find(scales)) return Error{fmt::format("{}: MXFP4 blocks without their '{}'", where, scales)};
    return {};
  }
  const bool gate_up = f.part == P::GateUpScales;
  const std::string bname = hf.substr(0, hf.size() - 7) + "_blocks";
  const auto blocks = m_->weights.find(bname);
  if (!blocks) return Error{fmt::format("{}: MXFP4 scales without their '{}'", where, bname)};
  const int64_t R = gate_up ? 2 * F : H, cols = gate_up ? H : F;
  if (cols % 32 != 0) return Error{fmt::format("{}: MXFP4 rows of {} values are not whole blocks of 32", where, cols)};
  const int64_t G = cols / 32;
  const std::string bwhere = fmt::format("{}: tensor '{}'", blocks->file->path(), bname);
  for (auto [r, w] : {std::pair{&ref, &where}, std::pair{&*blocks, &bwhere}})
    if (r->tensor->dtype != StDType::U8)
      return Error{fmt::format("{}: MXFP4 {} must be U8, not {}", *w, r == &ref ? "scales" : "blocks",
                               st_dtype_name(r->tensor->dtype))};
  TM_TRY(check_shape(ref, {E, R, G}, where));
  TM_TRY(check_shape(*blocks, {E, R, G, 16}, bwhere));
  const int64_t rows = gate_up ? F : H;
  for (int half = 0; half < (gate_up ? 2 : 1); ++half) {
    const std::string gg = b + (!gate_up ? "ffn_down_exps.weight" : half ? "ffn_up_exps.weight" : "ffn_gate_exps.weight");
    TM_TRY(claim(gg, where));
    const Mxfp4Rows mr{*blocks, ref, E, R, G, half, gate_up ? 2 : 1, rows};
    items_.push_back({gg, {ref}, {cols, rows, E}, true, false, 0, DType::MXFP4,
                      [mr](uint8_t* dst, size_t n, DType) { return repack_mxfp4(mr, dst, n); }});
  }
  return {};
}

// One expert's matrix (HF stores each expert apart), stacked into its 3-D GGUF tensor.
Status HfTensorPlan::add_expert(const std::pair<std::string, int64_t>& part, const SafetensorsModel::Ref& ref,
                                const std::string& where) {
  const HfConfig& c = m_->config;
  if (fused_.count(part.first))
    return Error{fmt::format("{}: '{}' is given twice (per-expert and fused expert tensors)", where, part.first)};
  auto e = expected_.find(part.first);
  if (e == expected_.end() || e->second.size() != 3) return unexpected_expert(c, where);
  if (part.second >= e->second[0])
    return Error{fmt::format("{}: expert {} is out of range (config.json: {} experts)", where, part.second,
                             e->second[0])};
  TM_TRY(check_shape(ref, std::vector<int64_t>(e->second.begin() + 1, e->second.end()), where));
  TM_TRY(check_dtype(ref, where, m_->config.scaled()));
  TM_ASSIGN_OR_RETURN(auto scale, fp8_scale(ref.tensor->name, ref, where));
  weight_dtypes_.insert(scale.empty() ? ref.tensor->dtype : StDType::BF16);
  auto [it, fresh] = stacked_.try_emplace(part.first, items_.size());
  if (fresh)
    items_.push_back({part.first, std::vector<SafetensorsModel::Ref>(static_cast<size_t>(e->second[0])),
                      reversed(e->second), true, false, 0});
  Item& item = items_[it->second];
  SafetensorsModel::Ref& slot = item.srcs[static_cast<size_t>(part.second)];
  if (slot.tensor) return Error{fmt::format("{}: expert {} of '{}' given twice", where, part.second, part.first)};
  slot = ref;
  if (!scale.empty()) {  // (every expert of an FP8 checkpoint has one; finish() checks)
    item.scales.resize(item.srcs.size());
    item.scales[static_cast<size_t>(part.second)] = scale.front();
  }
  return {};
}

// An FP8 matrix's scale tensor (`<name>_scale`, or `<name>_scale_inv` per block); none for other dtypes.
Result<std::vector<SafetensorsModel::Ref>> HfTensorPlan::fp8_scale(const std::string& hf, const SafetensorsModel::Ref& ref,
                                                                  const std::string& where) const {
  if (!scaled_dtype(ref.tensor->dtype)) return std::vector<SafetensorsModel::Ref>{};
  if (ref.tensor->shape.size() != 2)
    return Error{fmt::format("{}: an {} tensor that is no matrix", where, st_dtype_name(ref.tensor->dtype))};
  for (const char* suffix : {"_scale", "_scale_inv"})
    if (auto s = m_->weights.find(hf + suffix)) return std::vector<SafetensorsModel::Ref>{*s};
  return Error{fmt::format("{}: {} weights without their scale ('{}_scale' or '{}_scale_inv')", where,
                           st_dtype_name(ref.tensor->dtype), hf, hf)};
}

Status HfTensorPlan::add_plain(const std::string& hf, const std::string& name, const SafetensorsModel::Ref& ref,
                               const std::string& where) {
  const HfConfig& c = m_->config;
  TM_ASSIGN_OR_RETURN(std::string gg, hf_tensor_to_gguf_name(name));
  if (gg.empty()) return {};
  if ((c.ffn_norm_is_post_attention_norm() || c.post_attention_is_output_norm()) &&
      name.ends_with(".post_attention_layernorm.weight"))  // their maps' name
    gg = gg.substr(0, gg.size() - 16) + ".post_attention_norm.weight";
  if (gg == "output.weight" && c.tie_word_embeddings) {
    log_info("{}: skipped (tie_word_embeddings: the output projection is token_embd)", where);
    return {};
  }
  auto e = expected_.find(gg);
  const bool conv_kernel = gg.ends_with(".shortconv.conv.weight");  // lfm2's [H, 1, L]: squeezed to [H, L], F32
  if (e == expected_.end() || (e->second.size() == 3 && !conv_kernel))
    return Error{fmt::format("{}: unexpected for {} with this config.json ({} layers, attention_bias={}, "
                             "tie_word_embeddings={})",
                             where, c.hf_arch, c.num_hidden_layers, c.attention_bias, c.tie_word_embeddings)};
  TM_TRY(check_shape(ref, e->second, where));
  TM_TRY(check_dtype(ref, where, m_->config.scaled()));
  TM_ASSIGN_OR_RETURN(auto scales, fp8_scale(hf, ref, where));
  expected_.erase(e);
  const bool matrix = ref.tensor->shape.size() == 2 || conv_kernel;
  const bool keep_f32 = is_router(gg) || conv_kernel;  // (as llama.cpp's converter keeps them)
  if (matrix && !keep_f32) weight_dtypes_.insert(scales.empty() ? ref.tensor->dtype : StDType::BF16);  // FP8: BF16 out
  std::vector<int64_t> ne = reversed(ref.tensor->shape);
  if (conv_kernel) ne = {ne[0], ne[2]};
  items_.push_back({gg, {ref}, std::move(ne), matrix, keep_f32, qk_permute_head_dim(gg)});
  items_.back().scales = std::move(scales);
  if (c.gemma && name.ends_with("norm.weight")) items_.back().shift = 1.0f;  // Gemma's RMSNorm scales by 1 + w
  return {};
}

// GPTQ / AWQ / compressed-tensors: Q4_0 / Q4_1 when the values fit (fixed), else dequantized as the weight type.
Status HfTensorPlan::add_packed(const std::string& base, const std::string& name_base, const std::string& where) {
  const HfConfig& c = m_->config;
  const std::string hf = name_base + ".weight";
  const auto expert = hf_expert_tensor(hf);
  std::string gg;
  if (expert) {
    gg = expert->first;
  } else {
    TM_ASSIGN_OR_RETURN(gg, hf_tensor_to_gguf_name(hf));
  }
  if (fused_.count(gg))
    return Error{fmt::format("{}: '{}' is given twice (per-expert and fused expert tensors)", where, gg)};
  auto e = expected_.find(gg);
  if (e == expected_.end() || e->second.size() != (expert ? 3u : 2u))
    return Error{fmt::format("{}: packed weights of '{}', which is no matrix of {} with this config.json", where, hf,
                             c.hf_arch)};
  const int64_t rows = e->second[e->second.size() - 2], cols = e->second.back();
  TM_ASSIGN_OR_RETURN(PackedMatrix pm, open_packed(m_->weights, c, base, rows, cols));
  TM_ASSIGN_OR_RETURN(const std::optional<DType> blocks, packed_block_type(pm));
  packed_bases_.insert(base);
  const bool keep_f32 = is_router(gg);
  if (!expert) {
    expected_.erase(e);
    items_.push_back(
        {gg, {pm.weight}, {cols, rows}, true, keep_f32, qk_permute_head_dim(gg), keep_f32 ? std::nullopt : blocks});
    items_.back().packed.push_back(std::move(pm));
    return {};
  }
  if (expert->second >= e->second[0])
    return Error{fmt::format("{}: expert {} is out of range (config.json: {} experts)", where, expert->second,
                             e->second[0])};
  auto [it, fresh] = stacked_.try_emplace(gg, items_.size());
  const size_t n = static_cast<size_t>(e->second[0]);
  if (fresh) items_.push_back({gg, std::vector<SafetensorsModel::Ref>(n), reversed(e->second), true, false, 0});
  Item& item = items_[it->second];
  item.packed.resize(n);
  SafetensorsModel::Ref& slot = item.srcs[static_cast<size_t>(expert->second)];
  if (slot.tensor) return Error{fmt::format("{}: expert {} of '{}' given twice", where, expert->second, gg)};
  slot = pm.weight;
  pm.blocks = blocks;  // (the experts share one type: finish)
  item.packed[static_cast<size_t>(expert->second)] = std::move(pm);
  return {};
}

Status HfTensorPlan::finish() {
  for (const auto& [base, part] : packed_parts_)
    if (!packed_bases_.count(base))
      return Error{fmt::format("{}: '{}' without its packed weight ('{}{}')", m_->dir, part, base,
                               m_->config.packed == HfConfig::Packed::CompressedTensors ? ".weight_packed" : ".qweight")};
  for (const auto& [name, index] : stacked_) {
    Item& item = items_[index];
    const auto& srcs = item.srcs;
    for (size_t x = 0; x < srcs.size(); ++x)
      if (!srcs[x].tensor)
        return Error{fmt::format("{}: '{}' lacks expert {} ({} experts in config.json)", m_->dir, name, x, srcs.size())};
    for (size_t x = 0; x < item.packed.size(); ++x)
      if (!item.packed[x].weight.tensor)
        return Error{fmt::format("{}: expert {} of '{}' is not packed like the others", m_->dir, x, name)};
    if (!item.packed.empty()) {  // Q4_0 / Q4_1 when every expert's values fit that type, else dequantized
      item.fixed = item.packed.front().blocks;
      for (const PackedMatrix& pm : item.packed)
        if (pm.blocks != item.fixed) item.fixed = std::nullopt;
    }
    for (size_t x = 0; x < items_[index].scales.size(); ++x)
      if (!items_[index].scales[x].tensor)
        return Error{fmt::format("{}: expert {} of '{}' is not FP8 / INT8 like the others", m_->dir, x, name)};
    expected_.erase(name);
  }
  if (!expected_.empty())
    return Error{fmt::format("{}: missing tensor '{}' ({} missing in all)", m_->dir, expected_.begin()->first,
                             expected_.size())};
  // llama.cpp writes the MXFP4 experts first (GptOssModel.generate_extra_tensors), in its visiting order
  std::stable_partition(items_.begin(), items_.end(), [](const Item& it) { return it.fixed == DType::MXFP4; });
  return {};
}

bool HfTensorPlan::any_mxfp4() const { return !items_.empty() && items_.front().fixed == DType::MXFP4; }

Result<DType> HfTensorPlan::weight_type(const std::string& outtype) const {
  if (outtype == "auto") return weight_dtypes_.size() == 1 ? *float_dtype(*weight_dtypes_.begin()) : DType::F32;
  if (outtype == "f32" || outtype == "F32") return DType::F32;
  if (outtype == "f16" || outtype == "F16") return DType::F16;
  if (outtype == "bf16" || outtype == "BF16") return DType::BF16;
  return Error{fmt::format("unknown output type '{}' (use f32, f16, bf16 or auto)", outtype)};
}

HfTensorPlan::Bytes HfTensorPlan::bytes(DType wtype) const {
  Bytes b;
  for (const Item& it : items_) {
    const DType out = it.out_type(wtype);
    int64_t rows = 1;
    for (size_t d = 1; d < it.ne.size(); ++d) rows *= it.ne[d];
    const uint64_t n = dtype_row_bytes(out, static_cast<uint64_t>(it.ne.front())).value_or(0) * static_cast<uint64_t>(rows);
    b.total += n;
    if (it.matrix && !it.keep_f32) {
      b.matrices += n;
      b.matrix_elements += static_cast<double>(rows) * static_cast<double>(it.ne.front());
    }
  }
  return b;
}

Status HfTensorPlan::write(GgufWriter& w, DType wtype) const {
  for (const Item& it : items_) {
    const DType out = it.out_type(wtype);
    if (!it.packed.empty()) {  // packed integer matrices (experts: one after the other)
      const auto packed = it.packed;
      const int64_t perm = it.permute_head_dim;
      TM_TRY(w.add_tensor(it.name, out, it.ne, [packed, out, perm](uint8_t* dst, size_t n) -> Status {
        const size_t part = n / packed.size();
        for (size_t x = 0; x < packed.size(); ++x) TM_TRY(write_packed(packed[x], out, perm, dst + x * part, part));
        return {};
      }));
      continue;
    }
    if (it.produce) {
      TM_TRY(w.add_tensor(it.name, out, it.ne, [produce = it.produce, out](uint8_t* dst, size_t n) -> Status {
        return produce(dst, n, out);
      }));
      continue;
    }
    const auto srcs = it.srcs;
    const auto scales = it.scales;
    const int64_t perm = it.permute_head_dim;
    const int64_t block[2] = {m_->config.fp8_block[0], m_->config.fp8_block[1]};
    const float shift = it.shift;
    TM_TRY(w.add_tensor(it.name, out, it.ne, [srcs, scales, out, perm, block, shift](uint8_t* dst, size_t n) -> Status {
      const size_t part = n / srcs.size();  // experts: one matrix after the other
      for (size_t x = 0; x < srcs.size(); ++x)
        TM_TRY(convert_rows(srcs[x], out, perm, dst + x * part, part, scales.empty() ? nullptr : &scales[x], block, shift));
      return {};
    }));
  }
  return {};
}

}  // namespace tmill
