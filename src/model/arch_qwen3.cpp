// Qwen3 (dense): no q/k/v bias; RMSNorm over each query and key head (attn_q_norm/attn_k_norm,
// [head_dim]) before NeoX RoPE; head_dim may differ from n_embd / n_head.
#include "model/config.h"

namespace tmill {
ArchSpec arch_qwen3() { return {"qwen3", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true}; }
}  // namespace tmill

#include "model/dummy.h"

namespace tmill {
// Qwen3 shapes for `tokenmill dummy` (values from the models' config.json).
std::vector<ModelShape> qwen3_shapes() {
  return {
      {"qwen3-0.6b", "qwen3", 151936, 1024, 28, 16, 8, 128, 3072, 40960, 1000000.0f, 1e-6f, true},
      {"qwen3-8b", "qwen3", 151936, 4096, 36, 32, 8, 128, 12288, 40960, 1000000.0f, 1e-6f, false},
      {"tiny-qwen3", "qwen3", 512, 64, 2, 4, 2, 32, 160, 256, 1000000.0f, 1e-6f, true},
  };
}
}  // namespace tmill
