// BLOOM (GGUF "bloom": bigscience/bloom 560M .. 176B, BLOOMZ) and MPT (GGUF "mpt": MPT-7B / 30B and
// their chat / instruct / storywriter models), as llama.cpp's bloom and mpt graphs: ALiBi instead of
// RoPE (BLOOM: maximum bias 8; MPT: attention.max_alibi_bias, none when absent); LayerNorms (eps
// attention.layer_norm_epsilon) before attention, before the FFN and at the end; one attn_qkv (q, k, v
// rows); the ungated FFN down(gelu(up x + up_b)) + down_b; the output tied to token_embd when the file
// has none. BLOOM: a LayerNorm with a bias on the token embeddings (token_embd_norm), biases on every
// norm, on attn_qkv, attn_output and the FFN. MPT: those biases when the file has them, learned
// positions (position_embd) when it has them, q / k / v clamped to attention.clamp_kqv when set.
// (MPT's optional q / k LayerNorms and AWQ's ffn_act scales are not computed: such files are refused
// naming the tensor.)
#include "model/config.h"

namespace tmill {
namespace {
Status read_bloom(const GgufFile&, ModelConfig& c) {
  set_alibi(c, 8.0f);  // (llama.cpp: fixed for bloom)
  return {};
}

Status read_mpt(const GgufFile& f, ModelConfig& c) {
  TM_TRY(read_alibi_key(f, c));  // (without ALiBi MPT's positions are learned ones or none)
  TM_TRY(read_clamp_kqv(f, c));
  c.n_pos_embd = c.n_ctx_train;  // (when the file has position_embd: the loader clears it otherwise)
  return {};
}

ArchSpec bloom_like(const char* name) {
  ArchSpec s{name, RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;  // (attn_qkv's bias is read when present)
  set_gpt_layer(s);
  return s;
}
}  // namespace

ArchSpec arch_bloom() {
  ArchSpec s = bloom_like("bloom");
  s.qkv_bias = true;
  s.embd_norm = true;
  s.read_family = read_bloom;
  return s;
}

ArchSpec arch_mpt() {
  ArchSpec s = bloom_like("mpt");
  s.optional_biases = true;
  s.attn_out_bias = false;  // (read when present)
  s.pos_embd = true;
  s.pos_embd_required = false;
  s.read_family = read_mpt;
  return s;
}
}  // namespace tmill
