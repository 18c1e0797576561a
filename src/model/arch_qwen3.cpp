// Qwen3 (dense): no q/k/v bias; RMSNorm over each query and key head (attn_q_norm/attn_k_norm,
// [head_dim]) before NeoX RoPE; head_dim may differ from n_embd / n_head.
#include "model/config.h"

namespace tmill {
ArchSpec arch_qwen3() { return {"qwen3", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true}; }
}  // namespace tmill
