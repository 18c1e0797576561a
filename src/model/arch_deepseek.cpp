// DeepSeek (GGUF "deepseek": DeepSeek-MoE-16B base and chat), as llama.cpp's deepseek graph: the llama
// block (RMSNorm, q/k/v or one attn_qkv, RoPE on adjacent pairs, SwiGLU) whose first
// leading_dense_block_count layers are dense and the others softmax experts -- the top expert_used_count
// by probability, not renormalized, times expert_weights_scale when the file sets one -- beside
// expert_shared_count shared experts as one SwiGLU of count x expert_feed_forward_length rows; the
// output tied to token_embd when the file has none. llama.cpp reads no gating or renormalization key
// for it: softmax, as written, whatever a file says.
#include "model/config.h"

namespace tmill {
namespace {
Status read_deepseek(const GgufFile& f, ModelConfig& c) {
  TM_TRY(read_deepseek_moe(f, c, /*default_gating=*/1));
  c.moe_sigmoid = false;
  c.arch.moe_norm_topk = false;
  return {};
}
}  // namespace

ArchSpec arch_deepseek() {
  ArchSpec s{"deepseek", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;  // (one attn_qkv or q/k/v apart, as llama.cpp's create_tensor_qkv)
  set_deepseek_style_moe(s);
  s.moe_selection_bias = false;
  s.read_family = read_deepseek;
  return s;
}
}  // namespace tmill
