// Llama family: Llama 2/3, Mistral, Mixtral, TinyLlama, llama2.c "stories" models.
// Pre-norm RMSNorm, GQA attention with RoPE on adjacent pairs (GGUF converters permute HF q/k rows
// so this holds), SwiGLU FFN, tied or untied output. Llama 3.1 rope scaling arrives as the
// rope_freqs.weight tensor. Mixtral: llama.expert_count > 1 puts experts of feed_forward_length rows
// in place of the FFN (ffn_gate_inp, ffn_{gate,up,down}_exps), top-k weights renormalized.
#include "model/config.h"

namespace tmill {
ArchSpec arch_llama() {
  ArchSpec s{"llama", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.moe = ArchSpec::Moe::Optional;
  s.moe_norm_topk = true;
  return s;
}
}  // namespace tmill
