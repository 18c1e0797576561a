// PLaMo (GGUF "plamo": PLaMo-13B), as llama.cpp's plamo graph: the parallel block with RMSNorm --
// attention and the SwiGLU FFN both read the layer's one normed input (attn_norm) and both outputs
// join the residual --, q/k/v (or one attn_qkv), NeoX RoPE over the whole head (llama.cpp requires
// it), no biases, the untied output llama.cpp requires.
#include "model/config.h"

namespace tmill {
ArchSpec arch_plamo() {
  ArchSpec s{"plamo", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;
  s.parallel_block = true;
  s.output_required = true;
  s.read_family = read_whole_head_rope;
  return s;
}
}  // namespace tmill
