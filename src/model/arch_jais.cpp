// Jais (GGUF "jais": Jais-13B / 30B and their chat models), as llama.cpp's jais graph: LayerNorms with
// biases (eps attention.layer_norm_epsilon); one attn_qkv with its bias; attn_output's bias; a gated FFN
// with biases, down(silu(gate x + gate_b) * (up x + up_b)) + down_b; ALiBi with
// attention.max_alibi_bias (none when absent, as llama.cpp reads it) and no RoPE; q.k scaled by
// 1 / head_dim (muP) instead of 1 / sqrt(head_dim); the untied output llama.cpp requires.
#include "model/config.h"

namespace tmill {
namespace {
Status read_jais(const GgufFile& f, ModelConfig& c) {
  TM_TRY(read_alibi_key(f, c));
  c.attn_scale = 1.0f / static_cast<float>(c.head_dim);
  return {};
}
}  // namespace

ArchSpec arch_jais() {
  ArchSpec s{"jais", RopeLayout::Adjacent, /*qkv_bias=*/true, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;
  s.layer_norm = true;
  s.norm_bias = true;
  s.ffn_bias = true;  // (gated: ffn_gate, ffn_up and ffn_down biases)
  s.attn_out_bias = true;
  s.output_required = true;
  s.read_family = read_jais;
  return s;
}
}  // namespace tmill
