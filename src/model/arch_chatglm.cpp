// ChatGLM (GGUF "chatglm": ChatGLM2-6B, ChatGLM3-6B, GLM-4-9B as first converted, GLM-Edge), as llama.cpp's
// chatglm graph: the llama block with RMSNorm, one attn_qkv (or q/k/v apart) with its bias when the file
// has one, RoPE on adjacent pairs over rope.dimension_count of each head (half, in the released models),
// gate and up fused in one ffn_up of 2 x feed_forward_length rows (SwiGLU over its halves), no
// attn_output bias; the output tied to token_embd when the file has none.
#include "model/config.h"

namespace tmill {
ArchSpec arch_chatglm() {
  ArchSpec s{"chatglm", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;  // (biases read when present, as llama.cpp's create_tensor_qkv)
  return s;
}
}  // namespace tmill
