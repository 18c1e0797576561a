// Arcee AFM (GGUF "arcee": AFM-4.5B), as llama.cpp's arcee graph: the llama block (adjacent-pair RoPE,
// rope_freqs when the file has them) with an ungated FFN, down(relu(up x)^2); the output tied unless
// output.weight is present.
#include "model/config.h"

namespace tmill {

ArchSpec arch_arcee() {
  ArchSpec s{"arcee", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.ffn_ungated = true;
  s.ffn_act = FfnActivation::ReluSqr;
  return s;
}
}  // namespace tmill
