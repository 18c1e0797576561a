// XVERSE (GGUF "xverse": XVERSE-7B / 13B / 65B), as llama.cpp's xverse graph: the llama block (RoPE on
// adjacent pairs, RMSNorm, SwiGLU) with the untied output llama.cpp requires.
#include "model/config.h"

namespace tmill {
ArchSpec arch_xverse() {
  ArchSpec s{"xverse", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.output_required = true;
  return s;
}
}  // namespace tmill
