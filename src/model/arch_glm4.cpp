// GLM-4 dense (GGUF "glm4": GLM-4-9B-0414, GLM-4-32B-0414, GLM-Z1): sandwich norms -- RMSNorm before
// and after attention and before and after the FFN (attn_norm, post_attention_norm, ffn_norm,
// post_ffw_norm) --, q/k/v biases (attn_q/k/v.bias, or one attn_qkv with its bias), RoPE on adjacent
// pairs over half of each head (rope.dimension_count), and gate/up fused into ffn_up (gate rows
// first), as llama.cpp's glm4 graph. GLM-4V's M-RoPE (rope.dimension_sections) is refused: its text
// positions are not checked here.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_glm4(const GgufFile& f, ModelConfig&) {
  if (const GgufValue* s = f.find("glm4.rope.dimension_sections")) {
    auto v = s->as_int_array();
    bool any = false;
    if (v)
      for (int64_t x : *v) any = any || x != 0;
    if (any || !v) return Error{"glm4.rope.dimension_sections: GLM-4V's M-RoPE is not supported (text GLM-4 only)"};
  }
  return {};
}
}  // namespace

ArchSpec arch_glm4() {
  ArchSpec s{"glm4", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;  // ffn_up holds gate and up (an attn_qkv, when present, q, k and v)
  s.post_norms = true;
  s.read_family = read_glm4;
  return s;
}
}  // namespace tmill
