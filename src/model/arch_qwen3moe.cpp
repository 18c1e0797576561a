// Qwen3 MoE (Qwen3-30B-A3B, Qwen3-235B-A22B; GGUF "qwen3moe"): the qwen3 block (per-head q/k
// RMSNorm, NeoX RoPE, no q/k/v bias) with a mixture-of-experts FFN in every layer: router
// ffn_gate_inp, experts ffn_{gate,up,down}_exps of expert_feed_forward_length rows, softmax over
// all experts, top expert_used_count, chosen weights renormalized to sum 1 (llama.cpp's norm_w).
#include "model/config.h"

namespace tmill {
ArchSpec arch_qwen3moe() {
  ArchSpec s{"qwen3moe", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.moe = ArchSpec::Moe::Required;
  s.moe_norm_topk = true;
  s.moe_expert_ff_key = true;
  return s;
}
}  // namespace tmill
