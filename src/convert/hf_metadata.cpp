// The GGUF metadata of a converted Hugging Face model, in the order llama.cpp's converter writes it.
#include "convert/hf_metadata.h"

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace tmill {

namespace {

// llama.cpp's general.file_type (LlamaFileType) for the type of the 2-D weights.
uint32_t file_type_of(DType t) { return t == DType::F16 ? 1 : t == DType::BF16 ? 32 : 0; }

}  // namespace

Status write_hf_metadata(const HfModel& m, const HfConvertOptions& opts, DType wtype, bool any_mxfp4, GgufWriter& w) {
  const HfConfig& c = m.config;
  const std::string& a = c.gguf_arch;
  std::string name = opts.name;
  if (name.empty()) name = std::filesystem::path(m.dir).lexically_normal().filename().string();
  if (name.empty()) name = std::filesystem::path(m.dir).lexically_normal().parent_path().filename().string();
  w.set_string("general.architecture", a);
  w.set_string("general.type", "model");
  if (!name.empty()) w.set_string("general.name", name);
  w.set_u32(a + ".block_count", static_cast<uint32_t>(c.num_hidden_layers));
  w.set_u32(a + ".context_length", static_cast<uint32_t>(c.max_position_embeddings));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(c.hidden_size));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(c.num_attention_heads));
  if (a == "lfm2") {  // as LFM2Model writes it: a count per layer, 0 for a convolution layer
    std::vector<int32_t> kv(static_cast<size_t>(c.num_hidden_layers));
    for (int64_t l = 0; l < c.num_hidden_layers; ++l)
      kv[static_cast<size_t>(l)] = c.is_conv(l) ? 0 : static_cast<int32_t>(c.num_key_value_heads);
    w.set(a + ".attention.head_count_kv", GgufValue::i32_array(kv));
  } else {
    w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(c.num_key_value_heads));
  }
  w.set_f32(a + ".rope.freq_base", static_cast<float>(c.rope_theta));
  // OlmoeModel overwrites the epsilon with 1e-5 whatever config.json says
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", a == "olmoe" ? 1e-5f : static_cast<float>(c.rms_norm_eps));
  if (c.n_expert > 0) {  // TextModel.set_gguf_parameters, then Qwen2MoeModel's expert sizes below
    w.set_u32(a + ".expert_count", static_cast<uint32_t>(c.n_expert));
    w.set_u32(a + ".expert_used_count", static_cast<uint32_t>(c.n_expert_used));
  }
  if (c.is_mla()) {  // as DeepseekV2Model writes MLA: the cached latent head, then the heads' sizes
    w.set_u32(a + ".attention.q_lora_rank", static_cast<uint32_t>(c.mla_q_rank));  // (0: llama.cpp needs no q rank)
    w.set_u32(a + ".attention.kv_lora_rank", static_cast<uint32_t>(c.mla_kv_rank));
    w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(c.mla_kv_rank + c.rope_dims));
    w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(c.mla_kv_rank));
    w.set_u32(a + ".attention.key_length_mla", static_cast<uint32_t>(c.mla_nope + c.rope_dims));
    w.set_u32(a + ".attention.value_length_mla", static_cast<uint32_t>(c.mla_v));
  } else if (c.head_dim_in_config) {
    w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(c.head_dim));
    w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(c.head_dim));
  }
  // with MXFP4 experts llama.cpp's converter says MOSTLY_MXFP4_MOE (38) for any float output type
  w.set_u32("general.file_type", any_mxfp4 ? 38 : file_type_of(wtype));
  if (c.gptoss()) w.set_u32(a + ".attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
  if (a == "minimax-m2") w.set_u32(a + ".expert_gating_func", c.sigmoid_scoring ? 2 : 1);  // from scoring_func
  if (c.moe_intermediate_size > 0 || c.gptoss() || a == "minimax-m2")  // gpt-oss, minimax-m2: intermediate_size
    w.set_u32(a + ".expert_feed_forward_length", static_cast<uint32_t>(c.expert_rows()));
  if (c.shared_expert_intermediate_size > 0)
    w.set_u32(a + ".expert_shared_feed_forward_length", static_cast<uint32_t>(c.shared_expert_intermediate_size));
  if (a == "glm4moe" || a == "deepseek2") {  // as Glm4MoeModel / DeepseekV2Model write them (NextN layers left out)
    w.set_u32(a + ".expert_shared_count", static_cast<uint32_t>(c.n_shared_experts));
    w.set_u32(a + ".leading_dense_block_count", static_cast<uint32_t>(c.first_dense_layers));
    w.set_u32(a + ".expert_gating_func", c.sigmoid_scoring ? 2 : 1);
    w.set_f32(a + ".expert_weights_scale", static_cast<float>(c.routed_scaling_factor));
    w.set_bool(a + ".expert_weights_norm", c.norm_topk_prob);
    if (c.n_group > 0) w.set_u32(a + ".expert_group_count", static_cast<uint32_t>(c.n_group));
    if (c.topk_group > 0) w.set_u32(a + ".expert_group_used_count", static_cast<uint32_t>(c.topk_group));
  }
  w.set_u32(a + ".vocab_size", static_cast<uint32_t>(c.vocab_size));
  if (a == "lfm2") w.set_u32(a + ".shortconv.l_cache", static_cast<uint32_t>(c.conv_l));
  w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(c.rope_dims > 0 ? c.rope_dims : c.head_dim));
  if (a == "phi3") {  // as Phi3MiniModel writes them
    w.set_u32(a + ".rope.scaling.original_context_length", static_cast<uint32_t>(c.original_context));
    w.set_u32(a + ".attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
  }
  if (c.gemma) {  // as Gemma2Model / Gemma3Model write them (gemma2: both caps, 0 when config.json turns one off)
    if (a == "gemma2" || c.attn_softcap > 0) w.set_f32(a + ".attn_logit_softcapping", static_cast<float>(c.attn_softcap));
    if (a == "gemma2" || c.final_softcap > 0) w.set_f32(a + ".final_logit_softcapping", static_cast<float>(c.final_softcap));
    if (c.rope_theta_swa > 0) w.set_f32(a + ".rope.freq_base_swa", static_cast<float>(c.rope_theta_swa));
  }
  if (c.gemma || a == "olmo2" || a == "exaone4") {  // gemma2/gemma3, OLMo 3, EXAONE 4.0 32B: per-layer patterns
    if (c.sliding_window > 0) w.set_u32(a + ".attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
    if (!c.swa_layers.empty()) {  // layers sliding other than the family's pattern: one flag per layer
      std::vector<int32_t> flags(c.swa_layers.begin(), c.swa_layers.end());
      w.set(a + ".attention.sliding_window_pattern", GgufValue::i32_array(flags));
    }
  }
  if (a == "deepseek2" && c.yarn_log_mul != 0)  // 0.1 x mscale_all_dim, as DeepseekV2Model writes it
    w.set_f32(a + ".rope.scaling.yarn_log_multiplier", static_cast<float>(c.yarn_log_mul));
  if (a == "mistral3") {  // as Mistral3Model writes rope_parameters' Ministral fields
    if (c.yarn_log_mul != 0) w.set_f32(a + ".rope.scaling.yarn_log_multiplier", static_cast<float>(c.yarn_log_mul));
    if (c.attn_temperature_scale != 0)
      w.set_f32(a + ".attention.temperature_scale", static_cast<float>(c.attn_temperature_scale));
  }
  if (a == "granite" || a == "granitemoe") {  // as GraniteModel / GraniteMoeModel write config.json's multipliers
    w.set_f32(a + ".attention.scale", static_cast<float>(c.attention_multiplier));
    w.set_f32(a + ".embedding_scale", static_cast<float>(c.embedding_multiplier));
    w.set_f32(a + ".residual_scale", static_cast<float>(c.residual_multiplier));
    w.set_f32(a + ".logit_scale", static_cast<float>(c.logits_scaling));
  }
  const auto& rs = c.rope_scaling;
  if (rs.type == HfRopeScalingType::Linear || rs.type == HfRopeScalingType::Yarn) {
    w.set_string(a + ".rope.scaling.type", rs.type == HfRopeScalingType::Linear ? "linear" : "yarn");
    w.set_f32(a + ".rope.scaling.factor", static_cast<float>(rs.factor));
    if (rs.type == HfRopeScalingType::Yarn && rs.original_max_position_embeddings > 0)
      w.set_u32(a + ".rope.scaling.original_context_length",
                static_cast<uint32_t>(rs.original_max_position_embeddings));
    if (rs.type == HfRopeScalingType::Yarn) {  // the optional ones, as TextModel.set_gguf_parameters copies them
      for (auto [key, v] : {std::pair{".rope.scaling.yarn_ext_factor", rs.extrapolation_factor},
                            std::pair{".rope.scaling.yarn_attn_factor", rs.attention_factor},
                            std::pair{".rope.scaling.yarn_beta_fast", rs.beta_fast},
                            std::pair{".rope.scaling.yarn_beta_slow", rs.beta_slow}})
        if (!std::isnan(v)) w.set_f32(a + key, static_cast<float>(v));
    }
  }
  if (rs.type == HfRopeScalingType::LongRope) {
    // the converter's attention factor: sqrt(1 + ln(scale) / ln(original context)), scale = the extension
    const double scale = static_cast<double>(c.max_position_embeddings) / static_cast<double>(c.original_context);
    const double attn = scale > 1.0 ? std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(c.original_context))) : 1.0;
    w.set_f32(a + ".rope.scaling.attn_factor", static_cast<float>(attn));
  }
  if (opts.add_tokenizer) TM_TRY(opts.add_tokenizer(m.dir, w));
  w.set_u32("general.quantization_version", 2);
  return {};
}

}  // namespace tmill
