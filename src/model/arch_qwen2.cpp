// Qwen2 / Qwen2.5: the llama block with a bias on the q/k/v projections and NeoX (half-split) RoPE.
#include "model/config.h"

namespace tmill {
ArchSpec arch_qwen2() { return {"qwen2", RopeLayout::NeoX, /*qkv_bias=*/true, /*qk_norm=*/false}; }
}  // namespace tmill
