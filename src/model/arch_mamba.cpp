// Mamba (GGUF "mamba": state-spaces/mamba 130M .. 2.8B, Falcon-Mamba-7B) and Mamba-2 (GGUF "mamba2":
// mamba2 130M .. 2.7B, Mamba-Codestral-7B), as llama.cpp's mamba graph: no attention and no FFN, every
// layer RMSNorm (attn_norm) then one mixer, added to the residual stream; the final norm and the
// output (tied when the file has no output.weight). Mamba-2's mixer is model/mamba2.h's (granitehybrid's);
// Mamba-1's is model/mamba1.h's. The state of each layer lives in the request's sequence-state slot
// (KvLayout::num_state_slots); with no K/V at all the paged cache's blocks cost nothing and only count
// positions (engine/memory_plan.cpp).
#include "model/config.h"

namespace tmill {
ArchSpec arch_mamba2() {
  ArchSpec s{"mamba2", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.ssm = true;
  s.attention_free = true;
  return s;
}

ArchSpec arch_mamba() {
  ArchSpec s = arch_mamba2();
  s.name = "mamba";
  s.mamba1 = true;
  return s;
}
}  // namespace tmill
