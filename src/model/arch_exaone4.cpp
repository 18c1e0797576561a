// EXAONE 4.0 (GGUF "exaone4"): no norm before attention or FFN (as olmo2: each block's output is
// RMSNormed -- post_attention_norm, post_ffw_norm -- before the residual add), RMSNorm over each query
// and key head before NeoX RoPE, SwiGLU, Llama 3 rope scaling from rope_freqs.weight. The 64-layer
// 32B (and only it, as llama.cpp decides by the layer count) has sliding windows: attention.
// sliding_window (default 4096) on three layers of four (or the file's sliding_window_pattern), and
// RoPE on those sliding layers only -- its global layers attend without positions (NoPE).
#include "model/config.h"

namespace tmill {
namespace {
Status read_exaone4(const GgufFile& f, ModelConfig& c) {
  if (c.n_layer != 64) return {};  // llama.cpp: windows for the 32B only (the key is ignored otherwise)
  TM_ASSIGN_OR_RETURN(const bool swa, read_sliding_window(f, c, 4096, 4));
  if (!swa) return {};
  for (auto& la : c.layer_attn)
    if (la.window == 0) la.rope = -1;  // global layers: no RoPE
  return {};
}
}  // namespace

ArchSpec arch_exaone4() {
  ArchSpec s{"exaone4", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.post_norms = true;
  s.pre_norms = false;
  s.read_family = read_exaone4;
  return s;
}
}  // namespace tmill
