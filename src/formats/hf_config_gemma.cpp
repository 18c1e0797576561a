// Gemma 1, Gemma 2 and Gemma 3 in config.json (hf_config_reader.h): transformers' defaults for the fields a
// Gemma config may omit, Gemma3ForConditionalGeneration's nested text_config, transformers 5's
// per-layer-type rope_parameters, and the Gemma fields the GGUF keeps (soft-capping, the sliding
// window and its layers, the sliding layers' RoPE base), as llama.cpp's Gemma2Model / Gemma3Model.
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/hf_config.h"
#include "formats/hf_config_reader.h"

namespace tmill::detail {
namespace {

using json = nlohmann::json;

std::string arch_of(const json& j) {
  auto a = j.find("architectures");
  return a != j.end() && a->is_array() && !a->empty() && (*a)[0].is_string() ? (*a)[0].get<std::string>() : "";
}

}  // namespace

bool is_gemma_arch(const std::string& a) {
  return a == "GemmaForCausalLM" || a == "Gemma2ForCausalLM" || a == "Gemma3ForCausalLM" ||
         a == "Gemma3ForConditionalGeneration";
}

void prepare_gemma_config(json& j) {
  const std::string arch = arch_of(j);
  if (!is_gemma_arch(arch) || arch == "GemmaForCausalLM") return;  // (Gemma 1 configs are complete)
  const bool g2 = arch == "Gemma2ForCausalLM";
  // transformers' Gemma2Config / Gemma3TextConfig defaults (real configs omit some of them)
  const json defaults = {{"vocab_size", g2 ? 256000 : 262208},
                         {"hidden_size", 2304},
                         {"intermediate_size", 9216},
                         {"num_hidden_layers", 26},
                         {"num_attention_heads", 8},
                         {"num_key_value_heads", 4},
                         {"head_dim", 256},
                         {"max_position_embeddings", g2 ? 8192 : 131072},
                         {"rms_norm_eps", 1e-6},
                         {"rope_theta", g2 ? 10000.0 : 1000000.0},
                         {"tie_word_embeddings", true},
                         {"sliding_window", 4096}};
  for (const auto& [k, v] : defaults.items())
    if (!j.contains(k) || j[k].is_null()) j[k] = v;
  if (g2) {
    const json caps = {{"attn_logit_softcapping", 50.0}, {"final_logit_softcapping", 30.0}};
    for (const auto& [k, v] : caps.items())
      if (!j.contains(k)) j[k] = v;  // (an explicit null turns it off)
  }
  // transformers 5: rope_parameters per layer type -> the global layers' theta and scaling, the local base
  if (auto rp = j.find("rope_parameters"); rp != j.end() && rp->is_object() && rp->contains("full_attention")) {
    const json full = (*rp)["full_attention"], slide = rp->value("sliding_attention", json::object());
    if (full.is_object()) {
      if (full.contains("rope_theta")) j["rope_theta"] = full["rope_theta"];
      if (full.value("rope_type", std::string("default")) != "default") j["rope_scaling"] = full;
    }
    if (slide.is_object() && slide.contains("rope_theta")) j["rope_local_base_freq"] = slide["rope_theta"];
    j.erase("rope_parameters");
  }
}

Status parse_gemma(const HfConfigReader& r, const json& j, HfConfig* c) {
  c->gemma = true;
  const bool g3 = c->gguf_arch == "gemma3";
  c->tie_word_embeddings = true;  // (GGUF gemma takes the output from token_embd; an lm_head is skipped)
  // Gemma 1: no sandwich norms, soft-capping or sliding windows (llama.cpp's GemmaModel writes none)
  if (c->gguf_arch == "gemma") return {};
  c->post_norms = true;
  auto softcap = [&](const char* key, double* out) -> Status {
    const json* v = r.get(key);
    if (!v) return {};
    if (!v->is_number() || !(v->get<double>() > 0))
      return r.err(fmt::format("\"{}\" must be a positive number or null, got {}", key, v->dump()));
    *out = v->get<double>();
    return {};
  };
  TM_TRY(softcap("attn_logit_softcapping", &c->attn_softcap));
  TM_TRY(softcap("final_logit_softcapping", &c->final_softcap));
  if (g3 && c->attn_softcap > 0)
    return r.err("attn_logit_softcapping on Gemma 3: GGUF gemma3 has no attention soft-capping");
  TM_ASSIGN_OR_RETURN(c->sliding_window, r.integer("sliding_window", std::nullopt, 1, int64_t{1} << 32));
  if (g3) {
    TM_ASSIGN_OR_RETURN(c->rope_theta_swa, r.number(j, "rope_local_base_freq", 10000.0, ""));
  }
  // which layers slide: layer_types, else sliding_window_pattern (gemma3), else the family's pattern
  const int64_t L = c->num_hidden_layers;
  const int64_t family_pattern = g3 ? 6 : 2;
  std::vector<bool> slides;
  if (r.get("layer_types")) {
    TM_ASSIGN_OR_RETURN(slides, read_layer_types(r, L));
  } else {
    // every p-th layer global (Gemma 2: p = 2, its even layers slide; Gemma 3: p = 6)
    TM_ASSIGN_OR_RETURN(const int64_t p, r.integer("sliding_window_pattern", family_pattern, 1, 1 << 20));
    slides = sliding_but_every_nth(L, p);
  }
  bool any = false, family = true;
  for (int64_t i = 0; i < L; ++i) {
    any = any || slides[static_cast<size_t>(i)];
    family = family && slides[static_cast<size_t>(i)] == (i % family_pattern < family_pattern - 1);
  }
  if (!any) c->sliding_window = 0;  // every layer global (gemma3's pattern 1)
  else if (!family) c->swa_layers = slides;
  // the query scale GGUF gemma computes: 1/sqrt(head_dim), or 1/sqrt(n_embd / n_head) for the 27Bs
  if (const json* q = r.get("query_pre_attn_scalar")) {
    const bool big = (!g3 && L == 46) || (g3 && L == 62);
    const int64_t want = big ? c->hidden_size / c->num_attention_heads : c->head_dim;
    if (!q->is_number() || q->get<double>() != static_cast<double>(want))
      return r.err(fmt::format("query_pre_attn_scalar {} is not the {} GGUF {} scales queries by for {} layers", q->dump(),
                               want, c->gguf_arch, L));
  }
  return {};
}

}  // namespace tmill::detail
