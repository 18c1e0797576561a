// Cohere's Command R family, as llama.cpp's graphs compute them: LayerNorm (no bias; eps
// attention.layer_norm_epsilon) before each layer and at the end, the parallel block -- attention and
// SwiGLU FFN both read the layer's normed input and both outputs join the residual --, RoPE on
// adjacent pairs, the output tied to the token embedding, and the logits multiplied by logit_scale.
// - "command-r" (Command R, Aya 23 / Aya Expanse): every layer global. Command R+'s per-head q/k
//   LayerNorms (attn_q_norm / attn_k_norm, one weight per head) are refused by name.
// - "cohere2" (Command R7B, Command A): attention.sliding_window on three layers of four
//   (sliding_window_pattern, default 4), the fourth global and without RoPE; logit_scale required.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_cohere(const GgufFile& f, ModelConfig& c, bool require_scale) {
  const std::string a = c.arch.name + ".";
  if (require_scale && !f.find(a + "logit_scale")) return Error{fmt::format("missing metadata key '{}logit_scale'", a)};
  TM_ASSIGN_OR_RETURN(const float scale, read_family_float(f, c, "logit_scale", 0.0f));
  if (!(scale >= 0)) return Error{fmt::format("{}logit_scale {} must not be negative", a, scale)};
  if (scale != 0.0f) c.logit_scale = 1.0f / scale;  // (ModelConfig divides; llama.cpp multiplies: 0 is none)
  if (f.find_tensor("blk.0.attn_q_norm.weight"))
    return Error{fmt::format("{}: Command R+'s per-head q/k LayerNorms (attn_q_norm) are not supported", c.arch.name)};
  if (f.find_tensor("output.weight"))
    return Error{fmt::format("{}: an output.weight -- llama.cpp's {} ties the output to token_embd", c.arch.name,
                             c.arch.name)};
  return {};
}
Status read_command_r(const GgufFile& f, ModelConfig& c) { return read_cohere(f, c, false); }
Status read_cohere2(const GgufFile& f, ModelConfig& c) {
  TM_TRY(read_cohere(f, c, true));
  if (!f.find(c.arch.name + ".attention.sliding_window"))
    return Error{fmt::format("missing metadata key '{}.attention.sliding_window'", c.arch.name)};
  TM_ASSIGN_OR_RETURN(const bool windowed, read_sliding_window(f, c, 0, 4));
  for (auto& la : c.layer_attn)  // the global layers take no RoPE
    if (!windowed || la.window == 0) la.rope = -1;
  return {};
}
ArchSpec cohere_spec(const char* name) {
  ArchSpec s{name, RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.layer_norm = true;
  s.parallel_block = true;
  return s;
}
}  // namespace

ArchSpec arch_command_r() {
  ArchSpec s = cohere_spec("command-r");
  s.read_family = read_command_r;
  return s;
}

ArchSpec arch_cohere2() {
  ArchSpec s = cohere_spec("cohere2");
  s.read_family = read_cohere2;
  return s;
}
}  // namespace tmill
