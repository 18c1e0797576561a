// Llama family: Llama 2/3, Mistral, TinyLlama, llama2.c "stories" models.
// Pre-norm RMSNorm, GQA attention with RoPE on adjacent pairs (GGUF converters permute HF q/k rows
// so this holds), SwiGLU FFN, tied or untied output. Llama 3.1 rope scaling arrives as the
// rope_freqs.weight tensor.
#include "model/config.h"

namespace tmill {
ArchSpec arch_llama() { return {"llama", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false}; }
}  // namespace tmill

#include "model/dummy.h"

namespace tmill {
// Llama-family shapes for `tokenmill dummy` (values from the models' config.json).
std::vector<ModelShape> llama_shapes() {
  ModelShape l32{"llama-3.2-1b", "llama", 128256, 2048, 16, 32, 8, 64, 8192, 131072, 500000.0f, 1e-5f, true};
  l32.rope_llama3_factor = 32;
  l32.rope_low = 1;
  l32.rope_high = 4;
  l32.rope_orig_ctx = 8192;
  return {
      l32,
      {"llama-3-8b", "llama", 128256, 4096, 32, 32, 8, 128, 14336, 8192, 500000.0f, 1e-5f, false},
      {"llama-2-7b", "llama", 32000, 4096, 32, 32, 32, 128, 11008, 4096, 10000.0f, 1e-5f, false},
      {"tinyllama-1.1b", "llama", 32000, 2048, 22, 32, 4, 64, 5632, 2048, 10000.0f, 1e-5f, false},
      {"tiny-llama", "llama", 512, 64, 2, 4, 2, 16, 160, 256, 10000.0f, 1e-5f, false},
  };
}
}  // namespace tmill
