#include "convert/hf_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "core/fp16.h"
#include "core/log.h"
#include "convert/hf_metadata.h"
#include "convert/hf_packed.h"
#include "convert/hf_tensor_ops.h"
#include "convert/hf_tensor_plan.h"

namespace tmill {
namespace {

// HF sub-module of a decoder layer -> GGUF tensor base name (gguf-py's tensor_mapping for these archs).
constexpr std::pair<const char*, const char*> kLayerNames[] = {
    {"input_layernorm", "attn_norm"},         {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},           {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},      {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},      {"post_attention_layernorm", "ffn_norm"},
    {"mlp.gate_proj", "ffn_gate"},            {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
    {"self_attn.qkv_proj", "attn_qkv"},       {"mlp.gate_up_proj", "ffn_up"},  // phi3, kept fused
    // mixtures of experts: the router (Qwen MoE, OLMoE; Mixtral), qwen2moe's shared expert and its gate
    {"mlp.gate", "ffn_gate_inp"},             {"block_sparse_moe.gate", "ffn_gate_inp"},
    {"mlp.shared_expert.gate_proj", "ffn_gate_shexp"}, {"mlp.shared_expert.up_proj", "ffn_up_shexp"},
    {"mlp.shared_expert.down_proj", "ffn_down_shexp"}, {"mlp.shared_expert_gate", "ffn_gate_inp_shexp"},
    {"mlp.router", "ffn_gate_inp"},  // gpt-oss (weight and bias)
    {"block_sparse_moe.router.layer", "ffn_gate_inp"},  // granitemoe
    // deepseek2: multi-head latent attention (kv_b_proj is split into attn_k_b / attn_v_b by the plan)
    {"self_attn.q_a_proj", "attn_q_a"},       {"self_attn.q_a_layernorm", "attn_q_a_norm"},
    {"self_attn.q_b_proj", "attn_q_b"},       {"self_attn.kv_a_proj_with_mqa", "attn_kv_a_mqa"},
    {"self_attn.kv_a_layernorm", "attn_kv_a_norm"},
    // glm4moe, deepseek2: the ungated shared experts (one SwiGLU of n_shared_experts x moe_intermediate_size rows)
    {"mlp.shared_experts.gate_proj", "ffn_gate_shexp"}, {"mlp.shared_experts.up_proj", "ffn_up_shexp"},
    {"mlp.shared_experts.down_proj", "ffn_down_shexp"},
    // gemma: the FFN's pre-norm, the FFN output's norm (its attention output's: post_attention_layernorm,
    // renamed by the plan)
    {"pre_feedforward_layernorm", "ffn_norm"}, {"post_feedforward_layernorm", "post_ffw_norm"},
    // glm4: the attention output's and the FFN output's norms
    {"post_self_attn_layernorm", "post_attention_norm"}, {"post_mlp_layernorm", "post_ffw_norm"},
    // lfm2: its norms, attention and FFN names, the short convolution (conv.conv: squeezed by the plan)
    {"operator_norm", "attn_norm"},           {"ffn_norm", "ffn_norm"},
    {"self_attn.out_proj", "attn_output"},    {"self_attn.q_layernorm", "attn_q_norm"},
    {"self_attn.k_layernorm", "attn_k_norm"}, {"feed_forward.w1", "ffn_gate"},
    {"feed_forward.w3", "ffn_up"},            {"feed_forward.w2", "ffn_down"},
    {"conv.in_proj", "shortconv.in_proj"},    {"conv.out_proj", "shortconv.out_proj"},
    {"conv.conv", "shortconv.conv"},
};

// One expert's matrix (HF stores each expert apart) -> the 3-D GGUF tensor it is stacked into.
// Qwen MoE / OLMoE: mlp.experts.E.{gate,up,down}_proj; Mixtral: block_sparse_moe.experts.E.w1 (gate),
// w3 (up), w2 (down), as convert_hf_to_gguf.py merges them.
constexpr std::pair<const char*, const char*> kExpertNames[] = {
    {"gate_proj", "ffn_gate_exps"}, {"up_proj", "ffn_up_exps"}, {"down_proj", "ffn_down_exps"},
    {"w1", "ffn_gate_exps"},        {"w3", "ffn_up_exps"},      {"w2", "ffn_down_exps"},
};

}  // namespace

std::optional<HfFusedExpert> hf_fused_expert_tensor(const std::string& n) {
  const auto l = hf_layer_of(n);
  if (!l) return std::nullopt;
  const int64_t layer = *l;
  std::string rest = n.substr(n.find('.', std::strlen("model.layers.")) + 1);
  // granitemoe: gate and up of every expert in input_linear [E, 2F, H] (gate rows first), down in
  // output_linear [E, H, F]: transformers 5's fused layout under other names
  if (rest == "block_sparse_moe.input_linear.weight") return HfFusedExpert{layer, HfFusedExpertPart::GateUp};
  if (rest == "block_sparse_moe.output_linear.weight") return HfFusedExpert{layer, HfFusedExpertPart::Down};
  bool found = false;
  for (const std::string mod : {"mlp.experts.", "block_sparse_moe.experts."}) {
    if (rest.compare(0, mod.size(), mod) == 0) {
      rest = rest.substr(mod.size());
      found = true;
      break;
    }
  }
  if (!found) return std::nullopt;
  using P = HfFusedExpertPart;
  static const std::pair<const char*, P> kParts[] = {
      {"gate_up_proj", P::GateUp},          {"gate_up_proj.weight", P::GateUp},
      {"down_proj", P::Down},               {"down_proj.weight", P::Down},
      {"gate_up_proj_bias", P::GateUpBias}, {"down_proj_bias", P::DownBias},
      {"gate_up_proj_blocks", P::GateUpBlocks}, {"gate_up_proj_scales", P::GateUpScales},
      {"down_proj_blocks", P::DownBlocks},  {"down_proj_scales", P::DownScales},
  };
  for (const auto& [name, part] : kParts)
    if (rest == name) return HfFusedExpert{layer, part};
  return std::nullopt;
}

std::optional<std::string> hf_text_tensor_name(const std::string& n) {
  for (const char* vision : {"vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector.",
                             "visual.", "model.visual."})
    if (n.starts_with(vision)) return std::nullopt;
  for (const auto& [from, to] : {std::pair{"language_model.model.", "model."}, std::pair{"model.language_model.", "model."},
                                 std::pair{"language_model.lm_head.", "lm_head."}})
    if (n.starts_with(from)) return to + n.substr(std::strlen(from));
  return n;
}

Result<std::string> hf_tensor_to_gguf_name(const std::string& n) {
  if (n == "model.embed_tokens.weight") return std::string("token_embd.weight");
  if (n == "model.norm.weight") return std::string("output_norm.weight");
  if (n == "model.embedding_norm.weight") return std::string("token_embd_norm.weight");  // lfm2's final norm
  if (n == "lm_head.weight") return std::string("output.weight");
  if (n.ends_with(".rotary_emb.inv_freq")) return std::string();  // recomputed at run time
  const std::string prefix = "model.layers.";
  if (n.compare(0, prefix.size(), prefix) == 0) {
    size_t p = prefix.size(), q = p;
    while (q < n.size() && n[q] >= '0' && n[q] <= '9') ++q;
    if (q > p && q - p < 7 && q < n.size() && n[q] == '.' && !(n[p] == '0' && q - p > 1)) {
      const std::string rest = n.substr(q + 1);
      if (rest == "self_attn.sinks") return fmt::format("blk.{}.attn_sinks.weight", n.substr(p, q - p));  // gpt-oss
      if (rest == "mlp.gate.e_score_correction_bias" || rest == "block_sparse_moe.e_score_correction_bias")  // selection bias
        return fmt::format("blk.{}.exp_probs_b.bias", n.substr(p, q - p));
      for (const std::string suffix : {".weight", ".bias"}) {
        if (!rest.ends_with(suffix)) continue;
        const std::string mod = rest.substr(0, rest.size() - suffix.size());
        for (const auto& [hf, gg] : kLayerNames)
          if (mod == hf) return fmt::format("blk.{}.{}{}", n.substr(p, q - p), gg, suffix);
      }
    }
  }
  return Error{fmt::format("cannot map tensor '{}' to a GGUF name", n)};
}

std::optional<std::pair<std::string, int64_t>> hf_expert_tensor(const std::string& n) {
  // model.layers.<L>.{mlp,block_sparse_moe}.experts.<E>.<matrix>.weight; numbers without leading zeros
  auto number = [&](size_t& p, int64_t& out) {
    size_t q = p;
    while (q < n.size() && n[q] >= '0' && n[q] <= '9') ++q;
    if (q == p || q - p > 6 || (n[p] == '0' && q - p > 1) || q >= n.size() || n[q] != '.') return false;
    out = std::stoll(n.substr(p, q - p));
    p = q + 1;
    return true;
  };
  const std::string prefix = "model.layers.";
  if (n.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  size_t p = prefix.size();
  int64_t layer = 0, expert = 0;
  if (!number(p, layer)) return std::nullopt;
  bool found = false;
  for (const std::string mod : {"mlp.experts.", "block_sparse_moe.experts."}) {
    if (n.compare(p, mod.size(), mod) == 0) {
      p += mod.size();
      found = true;
      break;
    }
  }
  if (!found || !number(p, expert)) return std::nullopt;
  for (const auto& [hf, gg] : kExpertNames)
    if (n.compare(p, std::string::npos, std::string(hf) + ".weight") == 0)
      return std::pair{fmt::format("blk.{}.{}.weight", layer, gg), expert};
  return std::nullopt;
}

std::optional<int64_t> hf_layer_of(const std::string& n) {
  const std::string prefix = "model.layers.";
  if (n.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  size_t p = prefix.size(), q = p;
  while (q < n.size() && n[q] >= '0' && n[q] <= '9') ++q;
  if (q == p || q - p > 6 || (n[p] == '0' && q - p > 1) || q >= n.size() || n[q] != '.') return std::nullopt;
  return std::stoll(n.substr(p, q - p));
}

int64_t llama_qk_permuted_source_row(int64_t out_row, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  const int64_t h = out_row / head_dim, w = out_row % head_dim;
  return h * head_dim + (w % 2) * half + w / 2;
}

std::optional<std::string> hf_quantized_weights(const SafetensorsModel& w, bool fp8, HfConfig::Packed packed) {
  auto ends = [](const std::string& s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  bool qweight = false, g_idx = false;
  for (const std::string& name : w.names()) {  // the weights' dtypes first: they tell the format best
    if (fp8) break;                             // (config.json names FP8 or INT8: such dtypes are expected)
    const SafetensorsTensor& t = *w.find(name)->tensor;
    if (packed_part(name, packed)) continue;  // the format config.json names
    if (t.dtype == StDType::I8 && t.shape.size() == 2)
      return fmt::format("INT8 (tensor '{}' is I8, and config.json has no int-quantized quantization_config)", name);
    if (t.dtype == StDType::F8_E4M3 || t.dtype == StDType::F8_E5M2)
      return fmt::format("FP8 (tensor '{}' is {}, and config.json has no FP8 quantization_config)", name,
                         st_dtype_name(t.dtype));
  }
  for (const std::string& name : w.names()) {
    if (packed_part(name, packed)) continue;  // the format config.json names (convert/hf_packed.h)
    if (!fp8 && (ends(name, ".weight_scale") || ends(name, ".weight_scale_inv") || ends(name, ".input_scale")))
      return fmt::format("FP8 (tensor '{}')", name);
    if (ends(name, ".absmax") || ends(name, ".quant_map") || ends(name, ".SCB") || name.find(".quant_state.") != std::string::npos)
      return fmt::format("bitsandbytes (tensor '{}')", name);
    qweight = qweight || ends(name, ".qweight") || ends(name, ".qzeros");
    g_idx = g_idx || ends(name, ".g_idx");
  }
  if (qweight) return g_idx ? "GPTQ (qweight, qzeros and g_idx tensors)" : "AWQ (qweight and qzeros tensors)";
  return std::nullopt;
}

Result<HfModel> HfModel::open(const std::string& hf_dir) {
  HfModel m;
  m.dir = hf_dir;
  TM_ASSIGN_OR_RETURN(m.config, load_hf_config(hf_dir));
  TM_ASSIGN_OR_RETURN(m.weights, SafetensorsModel::open(hf_dir));
  if (auto format = hf_quantized_weights(m.weights, m.config.scaled(), m.config.packed))
    return Error{fmt::format("{}: the weights are quantized: {}; tokenmill does not load such weights. Use the "
                             "model's original (unquantized) weights, quantized at load with --quantization (q8_0, "
                             "q4_k_m, ...) or with `tokenmill quantize`, or a GGUF file",
                             hf_dir, *format)};
  return m;
}

Status add_hf_model_to_gguf(const HfModel& m, const HfConvertOptions& opts, GgufWriter& w) {
  const HfConfig& c = m.config;
  // Map, validate and type every tensor before touching the writer.
  TM_ASSIGN_OR_RETURN(const HfTensorPlan plan, HfTensorPlan::make(m));
  TM_ASSIGN_OR_RETURN(const DType wtype, plan.weight_type(opts.outtype));
  TM_TRY(write_hf_metadata(m, opts, wtype, plan.any_mxfp4(), w));
  const auto& rs = c.rope_scaling;

  // Tensors: generated ones first, then the HF tensors in llama.cpp's visiting order.
  if (rs.type == HfRopeScalingType::Llama3) {
    auto factors = std::make_shared<std::vector<float>>(llama3_rope_factors(c));
    TM_TRY(w.add_tensor("rope_freqs.weight", DType::F32, {static_cast<int64_t>(factors->size())},
                        [factors](uint8_t* dst, size_t n) -> Status {
                          std::memcpy(dst, factors->data(), n);
                          return {};
                        }));
  }
  if (rs.type == HfRopeScalingType::LongRope) {
    for (auto [name, v] : {std::pair{"rope_factors_long.weight", &rs.long_factor},
                           std::pair{"rope_factors_short.weight", &rs.short_factor}}) {
      auto factors = std::make_shared<std::vector<float>>(*v);
      TM_TRY(w.add_tensor(name, DType::F32, {static_cast<int64_t>(factors->size())},
                          [factors](uint8_t* dst, size_t n) -> Status {
                            std::memcpy(dst, factors->data(), n);
                            return {};
                          }));
    }
  }
  TM_TRY(plan.write(w, wtype));
  log_info("{}: {} tensors, weights as {}", m.dir, plan.size(), dtype_name(wtype));
  return {};
}

Status convert_hf_to_gguf(const std::string& hf_dir, const std::string& out_path, const HfConvertOptions& opts) {
  TM_ASSIGN_OR_RETURN(HfModel m, HfModel::open(hf_dir));
  GgufWriter w;
  TM_TRY(add_hf_model_to_gguf(m, opts, w));
  return w.write(out_path);
}

}  // namespace tmill
