// Llama family: Llama 2/3, Mistral, Mixtral, TinyLlama, llama2.c "stories" models.
// Pre-norm RMSNorm, GQA attention with RoPE on adjacent pairs (GGUF converters permute HF q/k rows
// so this holds), SwiGLU FFN, tied or untied output. Llama 3.1 rope scaling arrives as the
// rope_freqs.weight tensor. Mixtral: llama.expert_count > 1 puts experts of feed_forward_length rows
// in place of the FFN (ffn_gate_inp, ffn_{gate,up,down}_exps), top-k weights renormalized.
// Mistral 7B v0.1: llama.attention.sliding_window makes every layer attend to that many positions
// (HF transformers and vLLM apply it; llama.cpp ignores the key for llama and attends to everything,
// so the two agree only within the window).
#include "model/config.h"

namespace tmill {
namespace {
Status read_llama(const GgufFile& f, ModelConfig& c) {
  TM_ASSIGN_OR_RETURN(const bool swa, read_sliding_window(f, c, 0, 0));
  (void)swa;
  return {};
}
}  // namespace

ArchSpec arch_llama() {
  ArchSpec s{"llama", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.moe = ArchSpec::Moe::Optional;
  s.moe_norm_topk = true;
  s.read_family = read_llama;
  return s;
}
}  // namespace tmill
