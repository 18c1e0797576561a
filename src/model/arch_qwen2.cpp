// Qwen2 / Qwen2.5: the llama block with a bias on the q/k/v projections and NeoX (half-split) RoPE.
#include "model/config.h"

namespace tmill {
ArchSpec arch_qwen2() { return {"qwen2", RopeLayout::NeoX, /*qkv_bias=*/true, /*qk_norm=*/false}; }
}  // namespace tmill

#include "model/dummy.h"

namespace tmill {
// Qwen2/2.5 shapes for `tokenmill dummy` (values from the models' config.json).
std::vector<ModelShape> qwen2_shapes() {
  return {
      {"qwen2.5-0.5b", "qwen2", 151936, 896, 24, 14, 2, 64, 4864, 32768, 1000000.0f, 1e-6f, true},
      {"qwen2.5-1.5b", "qwen2", 151936, 1536, 28, 12, 2, 128, 8960, 32768, 1000000.0f, 1e-6f, true},
      {"qwen2.5-3b", "qwen2", 151936, 2048, 36, 16, 2, 128, 11008, 32768, 1000000.0f, 1e-6f, true},
      {"qwen2.5-7b", "qwen2", 152064, 3584, 28, 28, 4, 128, 18944, 32768, 1000000.0f, 1e-6f, false},
      {"tiny-qwen2", "qwen2", 512, 64, 2, 4, 2, 16, 160, 256, 1000000.0f, 1e-6f, true},
  };
}
}  // namespace tmill
