// Gemma (the first generation, GGUF "gemma": Gemma-2B/7B, CodeGemma): token embeddings times
// sqrt(n_embd), NeoX RoPE, queries scaled by 1/sqrt(head_dim) (256 on the 7B, wider than
// n_embd / n_head), GeGLU FFN (gelu-tanh gate) and the output tied to token_embd, as llama.cpp
// computes it (an output.weight in the file is ignored). The norm weights already carry Gemma's
// "1 + w" (llama.cpp's converter adds the 1). No soft-capping, post norms or sliding windows: those
// came with gemma2 (arch_gemma2.cpp).
#include <cmath>

#include "model/config.h"

namespace tmill {
namespace {
Status read_gemma(const GgufFile&, ModelConfig& c) {
  c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
  c.tied_output = true;
  return {};
}
}  // namespace

ArchSpec arch_gemma() {
  ArchSpec s{"gemma", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.ffn_act = FfnActivation::GeluTanh;
  s.read_family = read_gemma;
  return s;
}
}  // namespace tmill
