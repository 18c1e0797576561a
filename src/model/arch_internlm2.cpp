// InternLM2 / InternLM2.5 (GGUF "internlm2": 1.8B, 7B, 20B), as llama.cpp's internlm2 graph: the llama
// block -- RoPE on adjacent pairs (its converter splits the checkpoint's fused wqkv and permutes q/k
// as llama's), SwiGLU, RMSNorm -- with an untied output matrix, which llama.cpp requires.
#include "model/config.h"

namespace tmill {
ArchSpec arch_internlm2() {
  ArchSpec s{"internlm2", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.output_required = true;
  return s;
}
}  // namespace tmill
