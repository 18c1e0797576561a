// OLMoE (GGUF "olmoe", OLMoE-1B-7B): NeoX RoPE, RMSNorm over the whole q and k projections
// (attn_q_norm [n_head*head_dim], attn_k_norm [kv_dim]) before RoPE, and a mixture-of-experts FFN
// in every layer: experts of feed_forward_length rows, softmax over all experts, the top
// expert_used_count's probabilities as weights (not renormalized).
#include "model/config.h"

namespace tmill {
ArchSpec arch_olmoe() {
  ArchSpec s{"olmoe", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.qk_norm_full = true;
  s.moe = ArchSpec::Moe::Required;
  return s;
}
}  // namespace tmill
