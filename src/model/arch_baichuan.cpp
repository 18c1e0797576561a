// Baichuan (GGUF "baichuan": Baichuan-7B / 13B, Baichuan2-7B / 13B, base and chat), as llama.cpp's
// baichuan graph: the llama block (RMSNorm, q/k/v or one attn_qkv, SwiGLU, the untied output llama.cpp
// requires) whose positions llama.cpp picks by the layer count: 32 layers (the 7B models) RoPE on
// adjacent pairs, 40 (the 13B ones) ALiBi with maximum bias 8, any other count neither -- as it does.
#include "model/config.h"

namespace tmill {
namespace {
Status read_baichuan(const GgufFile&, ModelConfig& c) {
  if (c.n_layer == 40) set_alibi(c, 8.0f);
  else if (c.n_layer != 32) set_no_rope(c);
  return {};
}
}  // namespace

ArchSpec arch_baichuan() {
  ArchSpec s{"baichuan", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;
  s.output_required = true;
  s.read_family = read_baichuan;
  return s;
}
}  // namespace tmill
