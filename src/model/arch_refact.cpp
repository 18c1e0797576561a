// Refact (GGUF "refact": Refact-1.6B-fim), as llama.cpp's refact graph: the llama block -- RMSNorm, q/k/v
// (or one attn_qkv) with their biases when the file has them, SwiGLU -- with ALiBi (maximum bias 8)
// instead of RoPE and multi-query attention; the output tied to token_embd when the file has none.
#include "model/config.h"

namespace tmill {
namespace {
Status read_refact(const GgufFile&, ModelConfig& c) {
  set_alibi(c, 8.0f);  // (llama.cpp: fixed for refact)
  return {};
}
}  // namespace

ArchSpec arch_refact() {
  ArchSpec s{"refact", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;
  s.read_family = read_refact;
  return s;
}
}  // namespace tmill
