// Llama family: Llama 2/3, Mistral, TinyLlama, llama2.c "stories" models.
// Pre-norm RMSNorm, GQA attention with RoPE on adjacent pairs (GGUF converters permute HF q/k rows
// so this holds), SwiGLU FFN, tied or untied output. Llama 3.1 rope scaling arrives as the
// rope_freqs.weight tensor.
#include "model/config.h"

namespace tmill {
ArchSpec arch_llama() { return {"llama", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false}; }
}  // namespace tmill
