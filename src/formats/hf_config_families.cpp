// The llama-block families of config.json beyond llama / qwen / phi3 / gemma (hf_config_reader.h), as
// llama.cpp's converter writes them: GraniteForCausalLM (its four multipliers), SmolLM3ForCausalLM
// (NoPE layers), Olmo2ForCausalLM / Olmo3ForCausalLM (post-norms only, q/k norms over the whole
// projection, OLMo 3's sliding layers), Exaone4ForCausalLM (post-norms only, per-head q/k norms, the
// 32B's sliding layers), Glm4ForCausalLM (sandwich norms, fused gate/up, half-head RoPE).
#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/hf_config.h"
#include "formats/hf_config_reader.h"

namespace tmill::detail {
namespace {
using json = nlohmann::json;

// Granite: embedding_multiplier, residual_multiplier, attention_multiplier, logits_scaling (transformers'
// GraniteConfig defaults 1.0), written as granite.embedding_scale, residual_scale, attention.scale and
// logit_scale. llama.cpp's converter ignores a head_dim (GGUF granite has none), so the head is
// hidden_size / num_attention_heads; FFN biases are refused (GGUF granite here computes none).
Status parse_granite(const HfConfigReader& r, const json& j, HfConfig* c) {
  if (c->head_dim_in_config && c->head_dim * c->num_attention_heads != c->hidden_size)
    return r.err(fmt::format("head_dim {} with {} heads over hidden_size {}: GGUF granite's heads are hidden_size / "
                             "num_attention_heads (llama.cpp's converter drops head_dim)",
                             c->head_dim, c->num_attention_heads, c->hidden_size));
  c->head_dim_in_config = false;
  TM_ASSIGN_OR_RETURN(const bool mlp_bias, r.boolean("mlp_bias", false));
  if (mlp_bias) return r.err("\"mlp_bias\": true on Granite: FFN biases are not supported");
  TM_ASSIGN_OR_RETURN(c->embedding_multiplier, r.number(j, "embedding_multiplier", 1.0, ""));
  TM_ASSIGN_OR_RETURN(c->residual_multiplier, r.number(j, "residual_multiplier", 1.0, ""));
  TM_ASSIGN_OR_RETURN(c->attention_multiplier, r.number(j, "attention_multiplier", 1.0, ""));
  TM_ASSIGN_OR_RETURN(c->logits_scaling, r.number(j, "logits_scaling", 1.0, ""));
  return {};
}

// SmolLM3: no_rope_layers (1: the layer rotates) must be llama.cpp's fixed pattern -- NoPE on every
// fourth layer (3, 7, ...) -- since GGUF smollm3 carries no per-layer flag.
Status parse_smollm3(const HfConfigReader& r, HfConfig* c) {
  const int64_t L = c->num_hidden_layers;
  if (const json* nr = r.get("no_rope_layers")) {
    if (!nr->is_array() || static_cast<int64_t>(nr->size()) != L)
      return r.err(fmt::format("\"no_rope_layers\" must list the {} layers", L));
    for (int64_t i = 0; i < L; ++i) {
      const json& v = (*nr)[static_cast<size_t>(i)];
      const bool rope = (i + 1) % 4 != 0;
      if (!v.is_number_integer() || v.get<int64_t>() != (rope ? 1 : 0))
        return r.err(fmt::format("no_rope_layers[{}] is {}: GGUF smollm3 (as llama.cpp) has RoPE on every layer but "
                                 "every fourth (3, 7, ...), and {} here",
                                 i, v.dump(), rope ? "RoPE" : "none"));
    }
  } else {
    TM_ASSIGN_OR_RETURN(const int64_t every, r.integer("no_rope_layer_interval", 4, 1, 1 << 20));
    if (every != 4)
      return r.err(fmt::format("no_rope_layer_interval {}: GGUF smollm3 (as llama.cpp) has NoPE on every fourth layer",
                               every));
  }
  TM_ASSIGN_OR_RETURN(const bool sliding, r.boolean("use_sliding_window", false));
  if (sliding) return r.err("\"use_sliding_window\": true on SmolLM3: GGUF smollm3 attends to every position");
  return {};
}

// OLMo 2 / OLMo 3: no pre-norms, post_attention_layernorm / post_feedforward_layernorm after each
// block, q_norm [hidden_size] and k_norm [kv heads x head] over the whole projection. OLMo 3's
// sliding_window applies to the layers layer_types says (else all but every fourth), written as a
// per-layer pattern as llama.cpp's Olmo2Model does.
Status parse_olmo2(const HfConfigReader& r, HfConfig* c) {
  c->pre_norms = false;
  c->post_norms = true;
  c->qk_norm_full = true;
  if (c->head_dim * c->num_attention_heads != c->hidden_size)
    return r.err(fmt::format("head_dim {} x {} heads != hidden_size {}: GGUF olmo2's heads are hidden_size / "
                             "num_attention_heads", c->head_dim, c->num_attention_heads, c->hidden_size));
  if (!r.get("sliding_window")) return {};
  TM_ASSIGN_OR_RETURN(c->sliding_window, r.integer("sliding_window", std::nullopt, 1, int64_t{1} << 32));
  if (r.get("layer_types")) {
    TM_ASSIGN_OR_RETURN(c->swa_layers, read_layer_types(r, c->num_hidden_layers));
  } else {
    c->swa_layers = sliding_but_every_nth(c->num_hidden_layers, 4);
  }
  return {};
}

// EXAONE 4.0: OLMo 2's block with per-head q/k norms (q_norm / k_norm [head_dim]); a sliding_window
// (the 32B's) on the layers layer_types names, else sliding_window_pattern's ("LLLG": L slides,
// repeated over the layers; or every n-th layer global), written per layer as Exaone4Model does.
Status parse_exaone4(const HfConfigReader& r, HfConfig* c) {
  c->pre_norms = false;
  c->post_norms = true;
  if (!r.get("sliding_window")) return {};
  TM_ASSIGN_OR_RETURN(c->sliding_window, r.integer("sliding_window", std::nullopt, 1, int64_t{1} << 32));
  if (r.get("layer_types")) {
    TM_ASSIGN_OR_RETURN(c->swa_layers, read_layer_types(r, c->num_hidden_layers));
    return {};
  }
  const json* p = r.get("sliding_window_pattern");
  if (!p) return {};  // (the converter writes no pattern then: llama.cpp's default, three of four)
  const int64_t L = c->num_hidden_layers;
  if (p->is_string() && !p->get<std::string>().empty()) {
    const std::string s = p->get<std::string>();
    c->swa_layers.assign(static_cast<size_t>(L), false);
    for (int64_t i = 0; i < L; ++i) {
      const char ch = s[static_cast<size_t>(i) % s.size()];
      if (ch != 'L' && ch != 'G')
        return r.err(fmt::format("\"sliding_window_pattern\" {} must be made of L (sliding) and G (global)", p->dump()));
      c->swa_layers[static_cast<size_t>(i)] = ch == 'L';
    }
    return {};
  }
  TM_ASSIGN_OR_RETURN(const int64_t every, r.integer("sliding_window_pattern", std::nullopt, 1, 1 << 20));
  c->swa_layers = sliding_but_every_nth(L, every);
  return {};
}

// GLM-4-0414: sandwich norms (input_layernorm, post_self_attn_layernorm, post_attention_layernorm as
// the FFN's pre-norm, post_mlp_layernorm), gate_up_proj kept fused (gate rows first), RoPE on adjacent
// pairs (GLM's interleaved rotary: no q/k permutation) over partial_rotary_factor (default 0.5) of
// each head, as Glm4Model writes rope.dimension_count. GLM-4V's mrope_section is refused.
// GLM-4.5 (glm4moe) shares the partial RoPE and the refusal, with NeoX RoPE and plain pre-norms.
Status parse_glm4(const HfConfigReader& r, const json& j, HfConfig* c) {
  if (c->gguf_arch == "glm4") {
    c->post_norms = true;
    c->fused_ffn = true;
  } else {  // glm4moe: per-head q/k norms when use_qk_norm (GLM-4.5, not Air)
    TM_ASSIGN_OR_RETURN(c->qk_norm, r.boolean("use_qk_norm", false));
  }
  const int64_t hd = c->head_dim;
  TM_ASSIGN_OR_RETURN(c->rope_dims, partial_rotary_dims(r, j, 0.5, hd, [hd](double pct) {
                        return static_cast<int64_t>(static_cast<double>(hd) * pct);
                      }));
  const json* rp = r.get("rope_parameters");
  for (const json* o : {&j, rp})
    if (o && o->is_object() && (o->contains("mrope_section") ||
                                (o->contains("rope_scaling") && (*o)["rope_scaling"].is_object() &&
                                 (*o)["rope_scaling"].contains("mrope_section"))))
      return r.err("mrope_section: GLM-4V's M-RoPE is not supported (text GLM-4 only)");
  return {};
}

// Ministral 3: YaRN is required (as llama.cpp's converter asserts); its mscale_all_dim and
// llama_4_scaling_beta (in rope_parameters, or rope_scaling / the top level) are kept for the GGUF.
Status parse_ministral3(const HfConfigReader& r, HfConfig* c) {
  if (c->rope_scaling.type != HfRopeScalingType::Yarn)
    return r.err("Ministral 3 needs a yarn rope_parameters (rope_type \"yarn\"), as GGUF mistral3 computes it");
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    const json* o = r.get(key);
    if (!o || !o->is_object()) continue;
    for (auto [field, out] : {std::pair{"mscale_all_dim", &c->yarn_log_mul},
                              std::pair{"llama_4_scaling_beta", &c->attn_temperature_scale}}) {
      if (!o->contains(field)) continue;
      const json& v = (*o)[field];
      if (!v.is_number() || !std::isfinite(v.get<double>()))
        return r.err(fmt::format("\"{}.{}\" must be a number, got {}", key, field, v.dump()));
      *out = v.get<double>();
    }
  }
  return {};
}
}  // namespace

// DeepSeek V2 / V3: multi-head latent attention's sizes (kv_lora_rank, q_lora_rank -- null for one
// q_proj --, qk_nope_head_dim, qk_rope_head_dim, v_head_dim), one KV head written (the cached latent),
// YaRN's mscale_all_dim kept as 0.1 x it (llama.cpp's converter's yarn_log_multiplier); q/k/v biases
// are refused (DeepSeek has none).
Status parse_deepseek2(const HfConfigReader& r, HfConfig* c) {
  TM_ASSIGN_OR_RETURN(c->mla_kv_rank, r.integer("kv_lora_rank", std::nullopt, 1, 1 << 16));
  TM_ASSIGN_OR_RETURN(c->mla_q_rank, r.integer("q_lora_rank", 0, 0, 1 << 16));
  TM_ASSIGN_OR_RETURN(c->mla_nope, r.integer("qk_nope_head_dim", std::nullopt, 1, 4096));
  TM_ASSIGN_OR_RETURN(c->rope_dims, r.integer("qk_rope_head_dim", std::nullopt, 2, 4096));
  TM_ASSIGN_OR_RETURN(c->mla_v, r.integer("v_head_dim", std::nullopt, 1, 4096));
  if (c->rope_dims % 2 != 0) return r.err(fmt::format("qk_rope_head_dim {} must be even", c->rope_dims));
  if (c->attention_bias) return r.err("attention_bias: GGUF deepseek2 has no attention biases");
  c->num_key_value_heads = 1;
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    const json* o = r.get(key);
    if (!o || !o->is_object() || !o->contains("mscale_all_dim")) continue;
    const json& v = (*o)["mscale_all_dim"];
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      return r.err(fmt::format("\"{}.mscale_all_dim\" must be a number, got {}", key, v.dump()));
    c->yarn_log_mul = 0.1 * v.get<double>();
    break;
  }
  return {};
}

// MiniMax-M2: RoPE over rotary_dim of each head; its q/k norms span the whole projections
// (qk_norm_type per_layer), which GGUF minimax-m2 requires.
Status parse_minimax_m2(const HfConfigReader& r, HfConfig* c) {
  TM_ASSIGN_OR_RETURN(c->rope_dims, r.integer("rotary_dim", c->head_dim, 2, c->head_dim));
  if (c->rope_dims % 2 != 0) return r.err(fmt::format("rotary_dim {} must be even", c->rope_dims));
  TM_ASSIGN_OR_RETURN(const bool qk_norm, r.boolean("use_qk_norm", true));
  if (!qk_norm) return r.err("use_qk_norm false: GGUF minimax-m2 has q/k norms");
  if (const json* t = r.get("qk_norm_type"); t && (!t->is_string() || t->get<std::string>() != "per_layer"))
    return r.err(fmt::format("qk_norm_type {}: GGUF minimax-m2 normalizes the whole projections (per_layer)", t->dump()));
  c->qk_norm_full = true;
  return {};
}

// Seed-OSS: no attn_output bias in GGUF seed_oss.
Status parse_seed_oss(const HfConfigReader& r, HfConfig*) {
  TM_ASSIGN_OR_RETURN(const bool out_bias, r.boolean("attention_out_bias", false));
  if (out_bias) return r.err("attention_out_bias: GGUF seed_oss has no attention output bias");
  return {};
}

// LFM2: which layers convolve (layer_types "conv" / "full_attention", or full_attn_idxs; transformers:
// every layer attends when neither is given), the kernel's length, and the FFN's width as Lfm2MLP
// (and llama.cpp's converter) adjusts it: 2/3 of it, times block_ffn_dim_multiplier, rounded up to a
// multiple of block_multiple_of.
Status parse_lfm2(const HfConfigReader& r, HfConfig* c) {
  const int64_t L = c->num_hidden_layers;
  c->conv_layers.assign(static_cast<size_t>(L), 0);
  if (const json* lt = r.get("layer_types")) {
    if (!lt->is_array() || static_cast<int64_t>(lt->size()) != L)
      return r.err(fmt::format("\"layer_types\" must list the {} layers", L));
    for (int64_t i = 0; i < L; ++i) {
      const json& t = (*lt)[static_cast<size_t>(i)];
      if (t != "conv" && t != "full_attention")
        return r.err(fmt::format("layer_types[{}] is {}, expected \"conv\" or \"full_attention\"", i, t.dump()));
      c->conv_layers[static_cast<size_t>(i)] = t == "conv";
    }
  } else if (const json* idx = r.get("full_attn_idxs"); idx && !idx->is_null()) {
    if (!idx->is_array()) return r.err("\"full_attn_idxs\" must be a list of layer numbers");
    c->conv_layers.assign(static_cast<size_t>(L), 1);
    for (const json& i : *idx) {
      if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= L)
        return r.err(fmt::format("\"full_attn_idxs\" holds {}, not a layer of {}", i.dump(), L));
      c->conv_layers[static_cast<size_t>(i.get<int64_t>())] = 0;
    }
  }
  if (std::find(c->conv_layers.begin(), c->conv_layers.end(), 0) == c->conv_layers.end())
    return r.err("no layer has attention (GGUF lfm2 needs one)");
  TM_ASSIGN_OR_RETURN(c->conv_l, r.integer("conv_L_cache", 3, 2, 64));
  TM_ASSIGN_OR_RETURN(const bool conv_bias, r.boolean("conv_bias", false));
  if (conv_bias) return r.err("conv_bias true: GGUF lfm2's convolutions have no bias");
  TM_ASSIGN_OR_RETURN(const bool adjust, r.boolean("block_auto_adjust_ff_dim", true));
  if (adjust) {
    int64_t ff = 2 * c->intermediate_size / 3;
    if (const json* m = r.get("block_ffn_dim_multiplier"); m && !m->is_null()) {
      TM_ASSIGN_OR_RETURN(const double mul, r.number(r.root(), "block_ffn_dim_multiplier", 1.0, ""));
      ff = static_cast<int64_t>(mul * static_cast<double>(ff));
    }
    TM_ASSIGN_OR_RETURN(const int64_t multiple, r.integer("block_multiple_of", 256, 1, 1 << 20));
    c->intermediate_size = multiple * ((ff + multiple - 1) / multiple);
  }
  return {};
}

void prepare_lfm2_config(json& j) {
  const json* archs = j.contains("architectures") ? &j["architectures"] : nullptr;
  if (!archs || !archs->is_array() || archs->empty() || (*archs)[0] != "Lfm2ForCausalLM") return;
  auto rename = [&](const char* from, const char* to) {
    if (j.contains(from) && !j.contains(to)) j[to] = j[from];
  };
  if (j.contains("block_ff_dim")) j["intermediate_size"] = j["block_ff_dim"];  // (Lfm2Config: it wins)
  rename("norm_eps", "rms_norm_eps");
  rename("theta", "rope_theta");
  rename("tie_embedding", "tie_word_embeddings");
  const json defaults = {{"vocab_size", 65536}, {"intermediate_size", 12288}, {"rms_norm_eps", 1e-5},
                         {"tie_word_embeddings", true}, {"max_position_embeddings", 128000}};
  for (const auto& [k, v] : defaults.items())
    if (!j.contains(k)) j[k] = v;
  if (!j.contains("rope_theta") && !j.contains("rope_parameters")) j["rope_theta"] = 1000000.0;
}

Status parse_family(const HfConfigReader& r, const json& j, HfConfig* c) {
  if (c->gguf_arch == "lfm2") return parse_lfm2(r, c);
  if (c->gguf_arch == "deepseek2") return parse_deepseek2(r, c);
  if (c->gguf_arch == "minimax-m2") return parse_minimax_m2(r, c);
  if (c->gguf_arch == "seed_oss") return parse_seed_oss(r, c);
  if (c->gguf_arch == "granite" || c->gguf_arch == "granitemoe") return parse_granite(r, j, c);
  if (c->gguf_arch == "smollm3") return parse_smollm3(r, c);
  if (c->gguf_arch == "olmo2") return parse_olmo2(r, c);
  if (c->gguf_arch == "exaone4") return parse_exaone4(r, c);
  if (c->gguf_arch == "glm4" || c->gguf_arch == "glm4moe") return parse_glm4(r, j, c);
  if (c->gguf_arch == "mistral3") return parse_ministral3(r, c);
  return {};
}

Result<std::vector<bool>> read_layer_types(const HfConfigReader& r, int64_t n_layer) {
  const json* lt = r.get("layer_types");
  if (!lt || !lt->is_array() || static_cast<int64_t>(lt->size()) != n_layer)
    return r.err(fmt::format("\"layer_types\" must list the {} layers", n_layer));
  std::vector<bool> slides(static_cast<size_t>(n_layer));
  for (int64_t i = 0; i < n_layer; ++i) {
    const json& t = (*lt)[static_cast<size_t>(i)];
    if (t != "sliding_attention" && t != "full_attention")
      return r.err(fmt::format("layer_types[{}] is {}, expected \"sliding_attention\" or \"full_attention\"", i, t.dump()));
    slides[static_cast<size_t>(i)] = t == "sliding_attention";
  }
  return slides;
}

std::vector<bool> sliding_but_every_nth(int64_t n_layer, int64_t n) {
  std::vector<bool> slides(static_cast<size_t>(n_layer));
  for (int64_t i = 0; i < n_layer; ++i) slides[static_cast<size_t>(i)] = (i + 1) % n != 0;
  return slides;
}

Result<int64_t> partial_rotary_dims(const HfConfigReader& r, const json& j, double def, int64_t head_dim,
                                    const std::function<int64_t(double)>& dims_of) {
  const json* rp = r.get("rope_parameters");
  const json& src = r.get("partial_rotary_factor") || !rp || !rp->is_object() ? j : *rp;
  TM_ASSIGN_OR_RETURN(const double pct, r.number(src, "partial_rotary_factor", def, ""));
  if (!(pct > 0 && pct <= 1)) return r.err(fmt::format("\"partial_rotary_factor\" {} must be in (0, 1]", pct));
  const int64_t dims = dims_of(pct);
  if (dims < 2 || dims % 2 != 0 || dims > head_dim)
    return r.err(fmt::format("partial_rotary_factor {} gives {} rotary dimensions (must be even, 2 .. head_dim)", pct,
                             dims));
  return dims;
}

}  // namespace tmill::detail
