// Qwen1.5-MoE / Qwen2-MoE (GGUF "qwen2moe"): the qwen2 block (q/k/v bias, NeoX RoPE) with experts
// routed as qwen3moe's but without renormalizing the chosen weights, plus a shared expert
// (ffn_{gate,up,down}_shexp, expert_shared_feed_forward_length rows) every token runs, scaled by
// sigmoid(ffn_gate_inp_shexp . x).
#include "model/config.h"

namespace tmill {
ArchSpec arch_qwen2moe() {
  ArchSpec s{"qwen2moe", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};  // biases loaded when present
  s.moe = ArchSpec::Moe::Required;
  s.moe_expert_ff_key = true;
  s.moe_shared_expert = true;
  return s;
}
}  // namespace tmill
