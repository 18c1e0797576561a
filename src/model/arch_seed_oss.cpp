// Seed-OSS (GGUF "seed_oss": ByteDance Seed-OSS-36B), as llama.cpp's seed_oss graph: the llama block
// with NeoX RoPE, q/k/v biases when the file has them, and the FFN's pre-norm named
// post_attention_norm; the q.k scale is 1 / sqrt(head_dim) (llama.cpp reads no attention.scale for it).
#include "model/config.h"

namespace tmill {
ArchSpec arch_seed_oss() {
  ArchSpec s{"seed_oss", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};  // biases loaded when present
  s.ffn_norm_name = "post_attention_norm";
  return s;
}
}  // namespace tmill
