// GPT-2 (GGUF "gpt2": gpt2 .. gpt2-xl, DistilGPT2, Cerebras-GPT and the other GPT-2 shapes) and StarCoder
// (GGUF "starcoder": StarCoderBase, StarCoder, SantaCoder-shaped multi-query models, WizardCoder,
// Refact's predecessors), as llama.cpp's gpt2 and starcoder graphs: learned absolute positions
// (position_embd.weight, a row per trained position) added to the token embeddings; LayerNorms with
// biases (eps attention.layer_norm_epsilon) before attention, before the FFN and at the end; one
// attn_qkv with its bias (q, k, v rows; StarCoder's one K/V head); attn_output's bias; the ungated
// FFN down(gelu(up x + up_b)) + down_b; no RoPE; the output tied to token_embd when the file has none.
#include "model/config.h"

namespace tmill {
namespace {
Status read_gpt2(const GgufFile&, ModelConfig& c) {
  set_no_rope(c);
  c.n_pos_embd = c.n_ctx_train;  // (the loader checks position_embd.weight has as many rows)
  return {};
}

ArchSpec gpt2_like(const char* name) {
  ArchSpec s{name, RopeLayout::Adjacent, /*qkv_bias=*/true, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;
  set_gpt_layer(s);
  s.pos_embd = true;
  s.read_family = read_gpt2;
  return s;
}
}  // namespace

ArchSpec arch_gpt2() { return gpt2_like("gpt2"); }
ArchSpec arch_starcoder() { return gpt2_like("starcoder"); }
}  // namespace tmill
