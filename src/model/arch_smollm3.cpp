// SmolLM3 (GGUF "smollm3"): the llama block (RoPE on adjacent pairs, GQA, SwiGLU, tied output) where
// every fourth layer (3, 7, 11, ...: llama.cpp's n_no_rope_layer_step 4, the released checkpoints'
// no_rope_layer_interval) attends without positions (NoPE): its queries and keys are not rotated.
#include "model/config.h"

namespace tmill {
namespace {
Status read_smollm3(const GgufFile&, ModelConfig& c) {
  constexpr int64_t kNoRopeStep = 4;  // fixed in llama.cpp (no GGUF key carries it)
  for (int64_t l = 0; l < c.n_layer; ++l)
    if ((l + 1) % kNoRopeStep == 0) c.layer_attn[static_cast<size_t>(l)].rope = -1;
  return {};
}
}  // namespace

ArchSpec arch_smollm3() {
  ArchSpec s{"smollm3", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.read_family = read_smollm3;
  return s;
}
}  // namespace tmill
