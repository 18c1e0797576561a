#include "formats/hf_config.h"

#include <cmath>
#include <filesystem>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/mmap.h"
#include "formats/hf_config_reader.h"

namespace tmill {
namespace {

using json = nlohmann::json;
using detail::HfConfigReader;
using Reader = HfConfigReader;

struct Family {
  const char* hf_arch;
  const char* gguf_arch;
  int64_t default_max_pos;  // transformers' default max_position_embeddings
  bool qkv_bias;            // q/k/v biases regardless of attention_bias
  bool qk_norm;
  bool permute_qk;
  bool moe = false;  // experts in every layer (their sizes: parse_moe)
};
constexpr Family kFamilies[] = {
    {"LlamaForCausalLM", "llama", 2048, false, false, true},
    {"MistralForCausalLM", "llama", 4096 * 32, false, false, true},
    {"Qwen2ForCausalLM", "qwen2", 32768, true, false, false},
    {"Qwen3ForCausalLM", "qwen3", 32768, false, true, false},
    {"Phi3ForCausalLM", "phi3", 4096, false, false, false},
    {"MixtralForCausalLM", "llama", 4096 * 32, false, false, true, true},
    {"Qwen2MoeForCausalLM", "qwen2moe", 32768, true, false, false, true},
    {"Qwen3MoeForCausalLM", "qwen3moe", 32768, false, true, false, true},
    {"OlmoeForCausalLM", "olmoe", 4096, false, true, false, true},
    // q/k/v/o biases whatever attention_bias says (llama.cpp's gpt-oss requires them)
    {"GptOssForCausalLM", "gpt-oss", 131072, true, false, false, true},
    // NeoX RoPE (no q/k permutation); gemma3 normalizes each q / k head (details: hf_config_gemma.cpp)
    {"Gemma2ForCausalLM", "gemma2", 8192, false, false, false},
    {"Gemma3ForCausalLM", "gemma3", 131072, false, true, false},
    {"Gemma3ForConditionalGeneration", "gemma3", 131072, false, true, false},
    // vision-language models, their language model only (text in, text out): Qwen2-VL / Qwen2.5-VL
    // rotate text positions with M-RoPE, which for text (one position for all three sections) is
    // plain RoPE
    {"Qwen2VLForConditionalGeneration", "qwen2", 32768, true, false, false},
    {"Qwen2_5_VLForConditionalGeneration", "qwen2", 128000, true, false, false},
    {"Qwen3VLForConditionalGeneration", "qwen3", 262144, false, true, false},
    // Mistral Small 3.x's vision-language folder: its text model is a Mistral (GGUF llama)
    {"Mistral3ForConditionalGeneration", "llama", 131072, false, false, true},
    // Gemma 1 (NeoX RoPE, GeGLU, tied, norms stored as w for 1 + w); Granite 3.x and SmolLM3 (llama
    // blocks: q/k permuted); OLMo 2 / 3 (NeoX, q/k norms over the whole projection); EXAONE 4.0 (NeoX,
    // per-head q/k norms): hf_config_families.cpp
    {"GemmaForCausalLM", "gemma", 8192, false, false, false},
    {"GraniteForCausalLM", "granite", 2048, false, false, true},
    {"SmolLM3ForCausalLM", "smollm3", 32768, false, false, true},
    {"Olmo2ForCausalLM", "olmo2", 2048, false, true, false},
    {"Olmo3ForCausalLM", "olmo2", 2048, false, true, false},
    {"Exaone4ForCausalLM", "exaone4", 32768, false, true, false},
    // GLM-4-0414: q/k/v biases as attention_bias says (transformers' default true), no o_proj bias
    {"Glm4ForCausalLM", "glm4", 131072, false, false, false},
    // Granite 3.x MoE: granite's multipliers; experts fused as block_sparse_moe.input_linear (gate rows
    // first) and output_linear, the router block_sparse_moe.router.layer
    {"GraniteMoeForCausalLM", "granitemoe", 2048, false, false, true, true},
    // Ministral 3 (also the text model of Mistral3ForConditionalGeneration with model_type ministral3)
    {"Ministral3ForCausalLM", "mistral3", 262144, false, false, true},
    // GLM-4.5 / 4.6 / 4.5-Air: q/k/v biases as attention_bias says, q/k norms as use_qk_norm says
    // (hf_config_families.cpp), NeoX RoPE; experts after the first_k_dense_replace dense layers
    {"Glm4MoeForCausalLM", "glm4moe", 131072, false, false, false, true},
    // DeepSeek-V2 / V2.5 / V3 / R1, Kimi K2: multi-head latent attention and DeepSeek's experts
    // (hf_config_families.cpp, parse_deepseek_experts below)
    {"DeepseekV2ForCausalLM", "deepseek2", 2048, false, false, false, true},
    {"DeepseekV3ForCausalLM", "deepseek2", 4096, false, false, false, true},
    // MiniMax-M2: q/k norms over the whole projections (use_qk_norm, qk_norm_type per_layer), experts
    // of intermediate_size rows routed as scoring_func says with e_score_correction_bias
    {"MiniMaxM2ForCausalLM", "minimax-m2", 196608, false, true, false, true},
    // Seed-OSS: the llama block with NeoX RoPE, q/k/v biases as attention_bias says (default true)
    {"SeedOssForCausalLM", "seed_oss", 524288, false, false, false},
    // LFM2: gated short convolutions between GQA layers with per-head q/k norms, NeoX RoPE; its config
    // keys are renamed by prepare_lfm2_config (hf_config_families.cpp)
    {"Lfm2ForCausalLM", "lfm2", 128000, false, true, false},
};

// A vision-language checkpoint (*ForConditionalGeneration) with a "text_config": its language model's
// fields lifted to the top, with the checkpoint's architectures, dtype and quantization.
void prepare_multimodal_config(json& j) {
  auto a = j.find("architectures");
  const std::string arch =
      a != j.end() && a->is_array() && !a->empty() && (*a)[0].is_string() ? (*a)[0].get<std::string>() : "";
  if (!arch.ends_with("ForConditionalGeneration") || !j.contains("text_config") || !j["text_config"].is_object()) return;
  json text = j["text_config"];  // the language model's fields; the rest stays with the vision tower
  for (const char* k : {"architectures", "quantization_config", "torch_dtype", "dtype", "tie_word_embeddings"})
    if (j.contains(k) && !text.contains(k)) text[k] = j[k];
  text["architectures"] = j["architectures"];
  // Mistral3: Mistral Small 3.x's text model is a "mistral" (GGUF llama); Ministral 3's a "ministral3"
  // (GGUF mistral3: YaRN and the attention temperature); others are refused naming their type
  const std::string type = text.value("model_type", std::string("mistral"));
  if (arch == "Mistral3ForConditionalGeneration" && type != "mistral" && type != "ministral3")
    text["architectures"] = json::array({"Mistral3ForConditionalGeneration with a text model of type " + type});
  j = std::move(text);
}

Status parse_rope_scaling(const Reader& r, const json& rs, HfConfig* c) {
  if (!rs.is_object()) return r.err(fmt::format("\"rope_scaling\" must be an object, got {}", rs.dump()));
  std::string type;
  for (const char* k : {"rope_type", "type"}) {
    auto it = rs.find(k);
    if (it != rs.end() && it->is_string()) {
      type = it->get<std::string>();
      break;
    }
  }
  auto& s = c->rope_scaling;
  const std::string ctx = "rope_scaling.";
  if (type.empty() || type == "default") return {};
  // Qwen2-VL's M-RoPE: three position sections that text tokens fill with one position -- plain RoPE
  if (type == "mrope") return {};
  auto orig_ctx = [&](int64_t def) -> Result<int64_t> {
    auto it = rs.find("original_max_position_embeddings");
    if (it == rs.end() || it->is_null()) return def;
    if (!it->is_number_integer() || it->get<int64_t>() <= 0)
      return r.err(fmt::format("\"rope_scaling.original_max_position_embeddings\" must be a positive integer"));
    return it->get<int64_t>();
  };
  if (type == "linear") {
    s.type = HfRopeScalingType::Linear;
    TM_ASSIGN_OR_RETURN(s.factor, r.number(rs, "factor", 0, ctx));
    if (s.factor <= 0) return r.err("linear rope_scaling needs a positive \"factor\"");
  } else if (type == "llama3") {
    s.type = HfRopeScalingType::Llama3;
    TM_ASSIGN_OR_RETURN(s.factor, r.number(rs, "factor", 8.0, ctx));
    TM_ASSIGN_OR_RETURN(s.low_freq_factor, r.number(rs, "low_freq_factor", 1.0, ctx));
    TM_ASSIGN_OR_RETURN(s.high_freq_factor, r.number(rs, "high_freq_factor", 4.0, ctx));
    if (s.high_freq_factor <= s.low_freq_factor)
      return r.err("llama3 rope_scaling needs high_freq_factor > low_freq_factor");
    // transformers reads it from rope_scaling; older llama.cpp converters from the top level.
    TM_ASSIGN_OR_RETURN(int64_t top, r.integer("original_max_position_embeddings", 8192, 1, INT64_MAX));
    TM_ASSIGN_OR_RETURN(s.original_max_position_embeddings, orig_ctx(top));
  } else if (type == "yarn") {
    s.type = HfRopeScalingType::Yarn;
    TM_ASSIGN_OR_RETURN(s.factor, r.number(rs, "factor", 0, ctx));
    if (s.factor <= 0) return r.err("yarn rope_scaling needs a positive \"factor\"");
    TM_ASSIGN_OR_RETURN(s.original_max_position_embeddings, orig_ctx(0));
    // copied into rope.scaling.yarn_* as llama.cpp's converter does (attention_factor, or attn_factor)
    for (auto [key, out] : {std::pair{"beta_fast", &s.beta_fast}, std::pair{"beta_slow", &s.beta_slow},
                            std::pair{"extrapolation_factor", &s.extrapolation_factor},
                            std::pair{"attention_factor", &s.attention_factor}}) {
      auto it = rs.find(key);
      if ((it == rs.end() || it->is_null()) && out == &s.attention_factor) it = rs.find("attn_factor");
      if (it == rs.end() || it->is_null()) continue;
      if (!it->is_number() || !std::isfinite(it->get<double>()))
        return r.err(fmt::format("\"rope_scaling.{}\" must be a number, got {}", key, it->dump()));
      *out = it->get<double>();
    }
  } else if (type == "longrope" || type == "su") {
    s.type = HfRopeScalingType::LongRope;
    for (auto [key, out] : {std::pair{"short_factor", &s.short_factor}, std::pair{"long_factor", &s.long_factor}}) {
      auto it = rs.find(key);
      if (it == rs.end() || !it->is_array() || it->empty())
        return r.err(fmt::format("longrope rope_scaling needs a non-empty \"{}\" array", key));
      for (const auto& v : *it) {
        if (!v.is_number() || !(v.get<double>() > 0))
          return r.err(fmt::format("\"rope_scaling.{}\" must hold positive numbers, got {}", key, v.dump()));
        out->push_back(v.get<float>());
      }
    }
    TM_ASSIGN_OR_RETURN(s.original_max_position_embeddings, orig_ctx(0));
  } else {
    return r.err(fmt::format("unsupported rope_scaling type '{}' (supported: linear, llama3, yarn, longrope)", type));
  }
  return {};
}

// phi3: fused tensors, partial rotary, the original context and LongRoPE's factor lengths (as
// llama.cpp's Phi3MiniModel: rope dims = int(partial_rotary_factor * hidden) / heads).
Status parse_phi3(const Reader& r, const json& j, HfConfig* c) {
  c->fused_qkv_ffn = true;
  if (c->q_dim() != c->hidden_size)
    return r.err(fmt::format("phi3 needs num_attention_heads * head_dim == hidden_size ({} != {})", c->q_dim(),
                             c->hidden_size));
  const int64_t hidden = c->hidden_size, heads = c->num_attention_heads;
  TM_ASSIGN_OR_RETURN(c->rope_dims, detail::partial_rotary_dims(r, j, 1.0, c->head_dim, [=](double pct) {
                        return static_cast<int64_t>(pct * static_cast<double>(hidden)) / heads;
                      }));
  auto& s = c->rope_scaling;
  if (s.type != HfRopeScalingType::None && s.type != HfRopeScalingType::LongRope)
    return r.err("phi3 supports longrope rope_scaling only");
  TM_ASSIGN_OR_RETURN(int64_t top, r.integer("original_max_position_embeddings", c->max_position_embeddings, 1,
                                             int64_t{1} << 32));
  c->original_context = s.original_max_position_embeddings > 0 ? s.original_max_position_embeddings : top;
  if (s.type == HfRopeScalingType::LongRope) {
    const auto want = static_cast<size_t>(c->rope_dims / 2);
    if (s.short_factor.size() != want || s.long_factor.size() != want)
      return r.err(fmt::format("rope_scaling short_factor/long_factor have {}/{} values, expected {} (rotary dims / 2)",
                               s.short_factor.size(), s.long_factor.size(), want));
  }
  TM_ASSIGN_OR_RETURN(c->sliding_window, r.integer("sliding_window", 0, 0, int64_t{1} << 32));
  return {};
}

// Mixture of experts, read as llama.cpp's converter reads it (num_local_experts or num_experts,
// num_experts_per_tok, moe_intermediate_size / shared_expert_intermediate_size for the Qwen MoEs).
// What the GGUF families cannot express is refused; what llama.cpp fixes per family (renormalizing
// the chosen experts' weights) is only warned about when config.json says otherwise.
// GLM-4.5 (Glm4MoeConfig's defaults) and DeepSeek V2 / V3 (DeepseekV2Config's, DeepseekV3Config's):
// ungated shared experts, leading dense layers, the routing's scale and renormalization. GLM-4.5
// routes by sigmoid with a selection bias and has no GGUF form for narrowing groups (refused);
// DeepSeek routes as scoring_func and topk_method say, groups written as llama.cpp's converter does.
Status parse_deepseek_experts(const Reader& r, HfConfig* c) {
  const bool glm = c->gguf_arch == "glm4moe", v3 = c->hf_arch == "DeepseekV3ForCausalLM";
  TM_ASSIGN_OR_RETURN(c->moe_intermediate_size, r.integer("moe_intermediate_size", std::nullopt, 1, 1 << 24));
  TM_ASSIGN_OR_RETURN(c->n_shared_experts, r.integer("n_shared_experts", glm || v3 ? 1 : 0, 0, 64));
  TM_ASSIGN_OR_RETURN(c->first_dense_layers, r.integer("first_k_dense_replace", glm ? 1 : 0, 0, c->num_hidden_layers));
  TM_ASSIGN_OR_RETURN(c->nextn_layers, r.integer("num_nextn_predict_layers", 0, 0, 64));
  TM_ASSIGN_OR_RETURN(c->routed_scaling_factor, r.number(r.root(), "routed_scaling_factor", 1.0, ""));
  TM_ASSIGN_OR_RETURN(c->norm_topk_prob, r.boolean("norm_topk_prob", glm || v3));
  TM_ASSIGN_OR_RETURN(const int64_t groups, r.integer("n_group", 1, 1, 1 << 16));
  TM_ASSIGN_OR_RETURN(const int64_t top_groups, r.integer("topk_group", 1, 1, 1 << 16));
  if (glm) {
    c->sigmoid_scoring = c->selection_bias = true;
    if (groups > 1 && top_groups < groups)
      return r.err(fmt::format("n_group {} with topk_group {}: grouped expert routing is not supported (GGUF glm4moe "
                               "chooses among all experts)", groups, top_groups));
    return {};
  }
  if (r.get("n_group")) c->n_group = groups;
  if (r.get("topk_group")) c->topk_group = top_groups;
  if (const json* f = r.get("scoring_func")) {
    if (!f->is_string() || (f->get<std::string>() != "softmax" && f->get<std::string>() != "sigmoid"))
      return r.err(fmt::format("\"scoring_func\" {}: softmax or sigmoid", f->dump()));
    c->sigmoid_scoring = f->get<std::string>() == "sigmoid";
  } else {
    c->sigmoid_scoring = v3;
  }
  const json* method = r.get("topk_method");
  c->selection_bias = method ? method->is_string() && method->get<std::string>() == "noaux_tc" : v3;
  TM_ASSIGN_OR_RETURN(const int64_t every, r.integer("moe_layer_freq", 1, 1, 1 << 20));
  if (every != 1) return r.err(fmt::format("moe_layer_freq {}: GGUF deepseek2 has experts in every layer after the dense ones", every));
  return {};
}

Status parse_moe(const Reader& r, const std::string& source, HfConfig* c) {
  constexpr int64_t kMaxExperts = 1 << 16;
  const char* count_key = r.get("num_local_experts")                              ? "num_local_experts"
                          : c->gguf_arch == "glm4moe" || c->gguf_arch == "deepseek2" ? "n_routed_experts"
                                                                                   : "num_experts";
  TM_ASSIGN_OR_RETURN(c->n_expert, r.integer(count_key, std::nullopt, 2, kMaxExperts));
  // gpt-oss's config.json also spells it experts_per_token
  const char* used_key =
      c->gguf_arch == "gpt-oss" && !r.get("num_experts_per_tok") ? "experts_per_token" : "num_experts_per_tok";
  TM_ASSIGN_OR_RETURN(c->n_expert_used, r.integer(used_key, std::nullopt, 1, c->n_expert));
  if (c->gguf_arch == "glm4moe" || c->gguf_arch == "deepseek2") return parse_deepseek_experts(r, c);
  const bool qwen = c->gguf_arch == "qwen2moe" || c->gguf_arch == "qwen3moe";
  if (qwen) {
    TM_ASSIGN_OR_RETURN(c->moe_intermediate_size, r.integer("moe_intermediate_size", std::nullopt, 1, 1 << 24));
    TM_ASSIGN_OR_RETURN(int64_t step, r.integer("decoder_sparse_step", 1, 1, 1 << 20));
    const json* dense = r.get("mlp_only_layers");
    if (step != 1 || (dense && (!dense->is_array() || !dense->empty())))
      return r.err("layers without experts (decoder_sparse_step != 1 or mlp_only_layers) are not supported: the "
                   "GGUF " + c->gguf_arch + " family has experts in every layer");
  }
  if (c->gguf_arch == "qwen2moe") {
    TM_ASSIGN_OR_RETURN(c->shared_expert_intermediate_size,
                        r.integer("shared_expert_intermediate_size", std::nullopt, 1, 1 << 24));
  }
  if (c->gguf_arch == "olmoe") {
    c->qk_norm_full = true;
    if (c->num_key_value_heads != c->num_attention_heads || c->q_dim() != c->hidden_size)
      return r.err("olmoe needs num_key_value_heads == num_attention_heads and num_attention_heads * head_dim == "
                   "hidden_size (llama.cpp's q/k norms are hidden_size wide)");
  }
  if (c->gguf_arch == "gpt-oss") return {};  // top-k by logit, softmax over those: fixed by the architecture
  if (c->gguf_arch == "minimax-m2") {  // sigmoid (or softmax) scores chosen with e_score_correction_bias
    const json* f = r.get("scoring_func");
    if (!f || !f->is_string() || (f->get<std::string>() != "sigmoid" && f->get<std::string>() != "softmax"))
      return r.err("MiniMax-M2 needs \"scoring_func\" sigmoid or softmax (GGUF minimax-m2 has no default)");
    c->sigmoid_scoring = f->get<std::string>() == "sigmoid";
    c->selection_bias = true;
  }
  // llama.cpp renormalizes the top-k weights for qwen3moe, Mixtral and minimax-m2, never for qwen2moe and olmoe.
  // (granitemoe: softmax over the top-k logits, the same as renormalizing)
  const bool renorm = c->gguf_arch == "qwen3moe" || c->gguf_arch == "llama" || c->gguf_arch == "granitemoe" ||
                      c->gguf_arch == "minimax-m2";
  if (const json* v = r.get("norm_topk_prob"); v && v->is_boolean() && v->get<bool>() != renorm)
    log_warn("{}: norm_topk_prob {} is not what GGUF {} computes (llama.cpp {} the chosen experts' weights)", source,
             v->get<bool>(), c->gguf_arch, renorm ? "always renormalizes" : "never renormalizes");
  return {};
}

// gpt-oss (llama.cpp's GptOssModel): the sliding window is required and slides on the even layers
// (llama.cpp's swa pattern 2), which layer_types must agree with; the output matrix is its own;
// the clamped SwiGLU's limit is llama.cpp's fixed 7.
Status parse_gptoss(const Reader& r, const json& j, const std::string& source, HfConfig* c) {
  TM_ASSIGN_OR_RETURN(c->sliding_window, r.integer("sliding_window", std::nullopt, 1, int64_t{1} << 32));
  if (const json* lt = r.get("layer_types")) {
    if (!lt->is_array() || static_cast<int64_t>(lt->size()) != c->num_hidden_layers)
      return r.err(fmt::format("\"layer_types\" must be an array of {} layer types", c->num_hidden_layers));
    for (size_t i = 0; i < lt->size(); ++i) {
      const char* want = i % 2 == 0 ? "sliding_attention" : "full_attention";
      if (!(*lt)[i].is_string() || (*lt)[i].get<std::string>() != want)
        return r.err(fmt::format("layer_types[{}] is {}, expected \"{}\": GGUF gpt-oss slides the window on the even "
                                 "layers and attends fully on the odd ones",
                                 i, (*lt)[i].dump(), want));
    }
  }
  if (c->tie_word_embeddings) return r.err("gpt-oss with tie_word_embeddings: GGUF gpt-oss needs its own output matrix");
  if (auto it = j.find("swiglu_limit"); it != j.end() && it->is_number() && it->get<double>() != 7.0)
    log_warn("{}: swiglu_limit {} is not the 7 GGUF gpt-oss computes with", source, it->get<double>());
  if (c->rope_scaling.type != HfRopeScalingType::None && c->rope_scaling.type != HfRopeScalingType::Yarn)
    return r.err("gpt-oss supports yarn rope_scaling only");
  return {};
}

}  // namespace


Result<HfConfig> parse_hf_config(std::string_view text, const std::string& source) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{fmt::format("{}: not valid JSON", source)};
  if (!j.is_object()) return Error{fmt::format("{}: not a JSON object", source)};
  prepare_multimodal_config(j);
  detail::prepare_gemma_config(j);
  detail::prepare_lfm2_config(j);
  Reader r(j, source);
  HfConfig c;
  const json* archs = r.get("architectures");
  const std::string arch0 = archs && archs->is_array() && !archs->empty() && (*archs)[0].is_string()
                                ? (*archs)[0].get<std::string>() : "";
  if (const json* q = r.get("quantization_config")) TM_TRY(detail::parse_quantization_config(r, *q, arch0, &c));

  if (!archs || !archs->is_array() || archs->empty() || !(*archs)[0].is_string())
    return r.err("missing \"architectures\" (e.g. [\"LlamaForCausalLM\"])");
  c.hf_arch = (*archs)[0].get<std::string>();
  const Family* fam = nullptr;
  for (const auto& f : kFamilies)
    if (c.hf_arch == f.hf_arch) fam = &f;
  if (!fam) {
    std::string known;
    for (const auto& f : kFamilies) known += (known.empty() ? "" : ", ") + std::string(f.hf_arch);
    return r.err(fmt::format("unsupported architecture '{}' (supported: {})", c.hf_arch, known));
  }
  c.gguf_arch = fam->gguf_arch;
  if (c.hf_arch == "Mistral3ForConditionalGeneration" && j.value("model_type", std::string()) == "ministral3")
    c.gguf_arch = "mistral3";  // Ministral 3's text model
  c.qk_norm = fam->qk_norm;
  c.permute_qk = fam->permute_qk;

  constexpr int64_t kMaxDim = 1 << 24;
  TM_ASSIGN_OR_RETURN(c.hidden_size, r.integer("hidden_size", std::nullopt, 1, kMaxDim));
  TM_ASSIGN_OR_RETURN(c.intermediate_size, r.integer("intermediate_size", std::nullopt, 1, kMaxDim));
  TM_ASSIGN_OR_RETURN(c.num_hidden_layers, r.integer("num_hidden_layers", std::nullopt, 1, 100000));
  TM_ASSIGN_OR_RETURN(c.num_attention_heads, r.integer("num_attention_heads", std::nullopt, 1, 65536));
  TM_ASSIGN_OR_RETURN(c.num_key_value_heads, r.integer("num_key_value_heads", c.num_attention_heads, 1, 65536));
  TM_ASSIGN_OR_RETURN(c.vocab_size, r.integer("vocab_size", std::nullopt, 1, 1 << 28));
  TM_ASSIGN_OR_RETURN(c.max_position_embeddings,
                      r.integer("max_position_embeddings", fam->default_max_pos, 1, int64_t{1} << 32));
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    return r.err(fmt::format("num_attention_heads {} is not a multiple of num_key_value_heads {}",
                             c.num_attention_heads, c.num_key_value_heads));
  c.head_dim_in_config = r.get("head_dim") != nullptr;
  if (c.head_dim_in_config) {
    TM_ASSIGN_OR_RETURN(c.head_dim, r.integer("head_dim", std::nullopt, 1, 65536));
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      return r.err(fmt::format("hidden_size {} is not a multiple of num_attention_heads {} (and no head_dim given)",
                               c.hidden_size, c.num_attention_heads));
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) return r.err(fmt::format("head_dim {} must be even for RoPE", c.head_dim));

  TM_ASSIGN_OR_RETURN(c.rms_norm_eps, r.number(j, "rms_norm_eps", 1e-6, ""));
  TM_ASSIGN_OR_RETURN(c.tie_word_embeddings, r.boolean("tie_word_embeddings", false));
  // (Glm4Config's default is true: q/k/v biases)
  TM_ASSIGN_OR_RETURN(bool attn_bias, r.boolean("attention_bias", c.gguf_arch == "glm4" || c.gguf_arch == "seed_oss"));
  c.attention_bias = fam->qkv_bias || (attn_bias && std::string(fam->gguf_arch) != "qwen2");
  if (c.gguf_arch == "llama" && !fam->moe) {
    TM_ASSIGN_OR_RETURN(c.mlp_bias, r.boolean("mlp_bias", false));
  }
  for (const char* k : {"torch_dtype", "dtype"})
    if (const json* d = r.get(k); d && d->is_string() && c.torch_dtype.empty()) c.torch_dtype = d->get<std::string>();

  // transformers >= 5 folds rope_theta and the scaling into "rope_parameters".
  const json* rp = r.get("rope_parameters");
  if (rp && !rp->is_object()) return r.err("\"rope_parameters\" must be an object");
  TM_ASSIGN_OR_RETURN(c.rope_theta, r.number(rp && !r.get("rope_theta") ? *rp : j, "rope_theta", 10000.0, ""));
  if (const json* rs = r.get("rope_scaling")) {
    TM_TRY(parse_rope_scaling(r, *rs, &c));
  } else if (rp) {
    TM_TRY(parse_rope_scaling(r, *rp, &c));
  }

  if (fam->moe) TM_TRY(parse_moe(r, source, &c));

  c.rope_dims = c.head_dim;
  if (c.gguf_arch == "gpt-oss") TM_TRY(parse_gptoss(r, j, source, &c));
  if (detail::is_gemma_arch(c.hf_arch)) TM_TRY(detail::parse_gemma(r, j, &c));
  TM_TRY(detail::parse_family(r, j, &c));
  if (c.gguf_arch == "phi3") TM_TRY(parse_phi3(r, j, &c));
  else if (c.rope_scaling.type == HfRopeScalingType::LongRope)
    return r.err(fmt::format("longrope rope_scaling is supported for Phi3ForCausalLM only, not {}", c.hf_arch));

  if (const json* sw = r.get("sliding_window"); sw && sw->is_number_integer() && c.gguf_arch == "llama" &&
                                                 sw->get<int64_t>() < c.max_position_embeddings)
    log_warn("{}: sliding_window {} is ignored (GGUF llama models use full attention, as in llama.cpp)", source,
             sw->get<int64_t>());
  return c;
}

Result<HfConfig> load_hf_config(const std::string& hf_dir) {
  const std::string path = (std::filesystem::path(hf_dir) / "config.json").string();
  TM_ASSIGN_OR_RETURN(std::string text, read_file(path));
  // Older AutoGPTQ / AutoAWQ folders keep their settings apart (quantize_config.json, quant_config.json),
  // as vLLM reads them: taken as config.json's quantization_config when it has none
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && !j.contains("quantization_config")) {
    for (const char* name : {"quantize_config.json", "quant_config.json"}) {
      const std::string qpath = (std::filesystem::path(hf_dir) / name).string();
      std::error_code ec;
      if (!std::filesystem::is_regular_file(qpath, ec)) continue;
      TM_ASSIGN_OR_RETURN(std::string qtext, read_file(qpath));
      json q = json::parse(qtext, nullptr, /*allow_exceptions=*/false);
      if (!q.is_object()) return Error{fmt::format("{}: not a JSON object", qpath)};
      if (!q.contains("quant_method"))  // AutoAWQ writes w_bit / q_group_size; AutoGPTQ bits / group_size
        q["quant_method"] = q.contains("w_bit") || q.contains("q_group_size") ? "awq" : "gptq";
      j["quantization_config"] = std::move(q);
      log_info("{}: quantization settings from {}", hf_dir, name);
      return parse_hf_config(j.dump(), path);
    }
  }
  return parse_hf_config(text, path);
}

std::vector<float> llama3_rope_factors(const HfConfig& c) {
  const auto& s = c.rope_scaling;
  const int64_t dim = c.head_dim;
  const float base = static_cast<float>(c.rope_theta);
  const float factor = static_cast<float>(s.factor);
  const float lo = static_cast<float>(s.low_freq_factor), hi = static_cast<float>(s.high_freq_factor);
  const float old_ctx = static_cast<float>(s.original_max_position_embeddings);
  const float low_freq_wavelen = old_ctx / lo;
  const float high_freq_wavelen = old_ctx / hi;
  std::vector<float> out;
  for (int64_t i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(base, static_cast<float>(i) / static_cast<float>(dim));
    const float wavelen = static_cast<float>(6.283185307179586) / freq;
    if (wavelen < high_freq_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      out.push_back(factor);
    } else {
      const float smooth = (old_ctx / wavelen - lo) / (hi - lo);
      out.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return out;
}

}  // namespace tmill
