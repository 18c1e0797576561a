// Mistral 3 (GGUF "mistral3": Ministral 3 3B/8B/14B, Devstral 2's text model): the llama block (RoPE
// on adjacent pairs, SwiGLU, tied or untied output) with YaRN as llama.cpp's mistral3 computes it --
// the file's rope.scaling.yarn_beta_fast / yarn_beta_slow, and rope.scaling.yarn_log_multiplier
// dividing the attention factor by 1 + 0.1 log_mul ln(factor) -- and Llama 4's attention temperature:
// with attention.temperature_scale s, a query at position p is multiplied by
// 1 + s ln(floor(p / n_orig) + 1), n_orig the YaRN original context (1 within it).
#include <cmath>

#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_mistral3(const GgufFile& f, ModelConfig& c) {
  TM_ASSIGN_OR_RETURN(c.attn_temp_scale, read_family_float(f, c, "attention.temperature_scale", 0.0f));
  if (c.attn_temp_scale != 0.0f) {
    c.attn_temp_floor = c.n_ctx_orig;
    if (c.attn_temp_floor <= 0) return Error{"mistral3: attention temperature scaling needs an original context length"};
  }
  RopeParams& r = c.ropes[0];
  TM_ASSIGN_OR_RETURN(r.beta_fast, read_family_float(f, c, "rope.scaling.yarn_beta_fast", r.beta_fast));
  TM_ASSIGN_OR_RETURN(r.beta_slow, read_family_float(f, c, "rope.scaling.yarn_beta_slow", r.beta_slow));
  TM_ASSIGN_OR_RETURN(const float log_mul, read_family_float(f, c, "rope.scaling.yarn_log_multiplier", 0.0f));
  if (r.yarn && log_mul != 0.0f && r.freq_scale < 1.0f)
    r.attn_factor /= 0.1f * log_mul * std::log(1.0f / r.freq_scale) + 1.0f;
  return {};
}
}  // namespace

ArchSpec arch_mistral3() {
  ArchSpec s{"mistral3", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.read_family = read_mistral3;
  return s;
}
}  // namespace tmill
