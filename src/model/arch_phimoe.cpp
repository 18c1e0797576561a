// Phi-3.5-MoE (GGUF "phimoe"), as llama.cpp's phi3 graph runs it: phi3's attention (q/k/v fused or apart,
// with biases when present, NeoX RoPE, LongRoPE factors when the file has them) with an attn_output bias,
// RMS norms with biases (rms_norm(x) w + b: attn_norm, ffn_norm, output_norm), softmax experts of
// feed_forward_length rows (expert_used_count of expert_count, renormalized -- llama.cpp's reading of
// the model's sparse mixer), and an untied output with a bias.
#include "model/config.h"

namespace tmill {
ArchSpec arch_phimoe() {
  ArchSpec s{"phimoe", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;
  s.moe = ArchSpec::Moe::Required;
  s.moe_norm_topk = true;
  s.norm_bias = true;  // (on RMS norms: ArchSpec::layer_norm stays false)
  s.attn_out_bias = true;
  s.output_bias = true;
  s.output_required = true;
  return s;
}
}  // namespace tmill
