// EXAONE 3.0 / 3.5 (GGUF "exaone"): the llama block with NeoX RoPE (llama.cpp's rope type for it),
// Llama 3 rope scaling from rope_freqs.weight when the file has it, SwiGLU, tied or untied output.
// (An attn_output.bias is added when present, as llama.cpp's exaone graph does.)
#include "model/config.h"

namespace tmill {
ArchSpec arch_exaone() { return {"exaone", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false}; }
}  // namespace tmill
