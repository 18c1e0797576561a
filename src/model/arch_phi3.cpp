// Phi-3 / Phi-3.5 / Phi-4-mini (GGUF "phi3"): the llama block with NeoX RoPE (partial when
// rope.dimension_count < head_dim), q/k/v fused into attn_qkv and gate/up into ffn_up (gate rows
// first), and LongRoPE: per-dimension frequency divisors rope_factors_short/long.weight chosen by the
// context length against rope.scaling.original_context_length, cos/sin scaled by
// rope.scaling.attn_factor. llama.cpp ignores phi3's sliding_window (its SWA is disabled), so do we.
#include "model/config.h"

namespace tmill {
ArchSpec arch_phi3() {
  ArchSpec s{"phi3", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;
  return s;
}
}  // namespace tmill
