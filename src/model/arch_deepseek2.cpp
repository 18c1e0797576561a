// DeepSeek-V2 / V2.5 / V3 / R1 and their kin (GGUF "deepseek2": DeepSeek-V2-Lite, Kimi K2, Moonlight,
// GLM-4.7-Flash, Mistral Large 3), as llama.cpp's deepseek2 graph runs them with MLA absorbed:
// multi-head latent attention (ModelConfig::mla_*, model/mla.h) -- the cache holds one KV head per
// token of kv_lora_rank normed latent + rope.dimension_count RoPE dimensions (attention.key_length;
// value_length = kv_lora_rank), queries from attn_q (or attn_q_a, its norm and attn_q_b) split into
// key_length_mla - n_rot "nope" dimensions, absorbed into the latent by attn_k_b, and n_rot RoPE ones
// (adjacent pairs); the attention's latent output through attn_v_b per head (value_length_mla rows)
// before attn_output. The q.k scale is mscale^2 / sqrt(key_length_mla), mscale = 1 + 0.1 x
// rope.scaling.yarn_log_multiplier / 0.1 x ln(YaRN factor), and YaRN's own cos/sin gain is cancelled
// when the file has a log multiplier, as llama.cpp computes it. The FFN: the first
// leading_dense_block_count layers dense, then routed experts (softmax gating, or sigmoid with
// exp_probs_b for V3: expert_gating_func; expert_weights_norm, expert_weights_scale) plus
// expert_shared_count ungated shared experts. Mistral Large 3's attention temperature
// (attention.temperature_scale over attention.temperature_length positions) multiplies the queries.
// Refused by name: files from before MLA's split (attn_kv_b, no key_length_mla).
// Mistral 4 (GGUF "mistral4") is this same model under its own name: llama.cpp's mistral4 runs the
// deepseek2 graph with deepseek2's keys and tensors (its experts' down projections in F32 precision,
// which the CPU's float accumulation already is).
#include <cmath>

#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_deepseek2(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch.name + ".";
  auto get = [&](const std::string& key, int64_t def, int64_t lo, int64_t hi) -> Result<int64_t> {
    const GgufValue* v = f.find(a + key);
    if (!v) {
      if (def >= 0) return def;
      return Error{fmt::format("missing metadata key '{}{}'", a, key)};
    }
    auto i = v->as_int();
    if (!i || *i < lo || *i > hi) return Error{fmt::format("metadata key '{}{}' must be an integer in [{}, {}]", a, key, lo, hi)};
    return *i;
  };
  if (!f.find(a + "attention.key_length_mla"))
    return Error{fmt::format("{}: no {}attention.key_length_mla -- a file from before llama.cpp split attn_kv_b into "
                             "attn_k_b / attn_v_b (MLA); convert the model again with a current converter",
                             c.arch.name, a)};
  TM_ASSIGN_OR_RETURN(c.mla_kv_rank, get("attention.kv_lora_rank", -1, 1, 1 << 16));
  TM_ASSIGN_OR_RETURN(c.mla_q_rank, get("attention.q_lora_rank", 0, 0, 1 << 16));
  TM_ASSIGN_OR_RETURN(const int64_t k_mla, get("attention.key_length_mla", -1, 1, 4096));
  TM_ASSIGN_OR_RETURN(c.mla_v, get("attention.value_length_mla", k_mla, 1, 4096));
  TM_ASSIGN_OR_RETURN(const int64_t vlen, get("attention.value_length", c.head_dim, 1, 1 << 16));
  c.mla_nope = k_mla - c.n_rot;
  if (c.mla_nope < 1) return Error{fmt::format("{}attention.key_length_mla {} leaves no dimension without RoPE", a, k_mla)};
  if (c.head_dim != c.mla_kv_rank + c.n_rot || vlen != c.mla_kv_rank)
    return Error{fmt::format("{}: attention.key_length {} / value_length {} must be kv_lora_rank + rope dimensions "
                             "({}) and kv_lora_rank ({}) (MLA's one latent head)",
                             c.arch.name, c.head_dim, vlen, c.mla_kv_rank + c.n_rot, c.mla_kv_rank)};
  if (c.n_head_kv != 1)
    return Error{fmt::format("{}attention.head_count_kv {}: MLA caches one latent head (1)", a, c.n_head_kv)};
  // routing (llama.cpp: absent gating means softmax, as DeepSeek V2 / V2.5 files have none -- but
  // sigmoid for GLM-4.7-Flash's, 47 or 48 layers and 154880 tokens)
  const bool glm47 = (c.n_layer == 47 || c.n_layer == 48) && c.n_vocab == 154880;
  TM_TRY(read_deepseek_moe(f, c, glm47 ? 2 : 1));
  // Mistral Large 3: queries times 1 + s ln(floor(pos / length) + 1)
  TM_ASSIGN_OR_RETURN(c.attn_temp_scale, read_family_float(f, c, "attention.temperature_scale", 0.0f));
  if (c.attn_temp_scale != 0.0f) {
    TM_ASSIGN_OR_RETURN(c.attn_temp_floor, get("attention.temperature_length", -1, 1, int64_t{1} << 32));
  }
  // YaRN as llama.cpp's deepseek2 graph computes it (llama-context.cpp's yarn_attn_factor, then the
  // graph's kq_scale): the file's log multiplier is 0.1 x mscale_all_dim
  RopeParams& r = c.ropes[0];
  TM_ASSIGN_OR_RETURN(r.beta_fast, read_family_float(f, c, "rope.scaling.yarn_beta_fast", r.beta_fast));
  TM_ASSIGN_OR_RETURN(r.beta_slow, read_family_float(f, c, "rope.scaling.yarn_beta_slow", r.beta_slow));
  TM_ASSIGN_OR_RETURN(const float file_log_mul, read_family_float(f, c, "rope.scaling.yarn_log_multiplier", 0.0f));
  const float log_mul = file_log_mul / 0.1f;
  const float ln_factor = r.yarn ? std::log(1.0f / r.freq_scale) : 0.0f;
  float attn_factor = c.rope_attn_factor;  // what llama.cpp hands ggml_rope_ext
  if (r.yarn && log_mul != 0.0f) attn_factor /= 1.0f + 0.1f * ln_factor;  // cancels ggml's YaRN gain
  r.attn_factor = attn_factor;
  const float mscale = attn_factor * (1.0f + 0.1f * ln_factor) * (1.0f + 0.1f * log_mul * ln_factor);
  c.attn_scale = mscale * mscale / std::sqrt(static_cast<float>(k_mla));
  return {};
}
}  // namespace

ArchSpec arch_deepseek2();

ArchSpec arch_mistral4() {
  ArchSpec s = arch_deepseek2();
  s.name = "mistral4";
  return s;
}

ArchSpec arch_deepseek2() {
  ArchSpec s{"deepseek2", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  set_deepseek_style_moe(s);  // (the selection bias: V3's; V2's softmax files have none)
  s.mla = true;
  s.read_family = read_deepseek2;
  return s;
}
}  // namespace tmill
