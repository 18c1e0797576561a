// OLMo (GGUF "olmo": OLMo-1B / 7B, OLMo-1.7-7B, the first OLMo), as llama.cpp's olmo graph: the llama
// block -- q/k/v (or one attn_qkv), RoPE on adjacent pairs, SwiGLU -- with LayerNorms that have no
// weights and no biases (eps attention.layer_norm_epsilon) before attention, before the FFN and at
// the end; q, k and v clamped to attention.clamp_kqv when the file sets it; the output tied to
// token_embd when the file has none.
#include <fmt/format.h>

#include <cmath>

#include "model/config.h"

namespace tmill {
namespace {
Status read_olmo(const GgufFile& f, ModelConfig& c) {
  TM_ASSIGN_OR_RETURN(c.clamp_kqv, read_family_float(f, c, "attention.clamp_kqv", 0.0f));
  if (!(c.clamp_kqv >= 0.0f) || !std::isfinite(c.clamp_kqv))
    return Error{fmt::format("olmo.attention.clamp_kqv {} must be finite and not negative", c.clamp_kqv)};
  return {};
}
}  // namespace

ArchSpec arch_olmo() {
  ArchSpec s{"olmo", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;  // (one attn_qkv or q/k/v apart, as llama.cpp's create_tensor_qkv)
  s.layer_norm = true;
  s.norm_weightless = true;
  s.read_family = read_olmo;
  return s;
}
}  // namespace tmill
