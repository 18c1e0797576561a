// IBM Granite 3.x dense (GGUF "granite"): the llama block (RoPE on adjacent pairs, SwiGLU, tied or
// untied output) with four scalars, as llama.cpp's granite graph applies them:
// granite.embedding_scale multiplies the token embeddings, granite.attention.scale is the q.k scale
// (else 1/sqrt(head_dim)), granite.residual_scale multiplies each attention and FFN output before
// its residual add, and the logits are divided by granite.logit_scale (required, as llama.cpp
// requires it). An attn_output.bias is added when the file has one. FFN biases are refused (no
// Granite release has them; llama.cpp would add them).
// Granite 3.x MoE (GGUF "granitemoe": granite-3.1-1b-a400m, 3b-a800m): the same block and scalars
// with experts in place of the FFN -- softmax over the router logits, the top expert_used_count
// renormalized, experts of feed_forward_length rows (llama.cpp's granite graph). The shared expert of
// granitemoeshared (ungated, expert_shared_feed_forward_length) and expert weight scales other than 1
// are refused.
// Granite 4.0 hybrids (GGUF "granitehybrid": granite-4.0-h-micro / h-tiny / h-small): the same scalars
// over a stack whose layers are Mamba-2 mixers (attention.head_count_kv 0: model/mamba2.h) or GQA
// attention -- without RoPE when rope.scaling.finetuned is false (the released files: NoPE) --, each
// followed by a dense SwiGLU FFN or experts as granitemoe's plus a shared SwiGLU expert of
// expert_shared_feed_forward_length rows (h-tiny, h-small).
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_granite(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch.name + ".";
  if (!f.find(a + "logit_scale")) return Error{fmt::format("missing metadata key '{}logit_scale'", a)};
  TM_ASSIGN_OR_RETURN(c.logit_scale, read_family_float(f, c, "logit_scale", 1.0f));
  TM_ASSIGN_OR_RETURN(const float embd, read_family_float(f, c, "embedding_scale", 0.0f));
  TM_ASSIGN_OR_RETURN(const float resid, read_family_float(f, c, "residual_scale", 0.0f));
  TM_ASSIGN_OR_RETURN(const float attn, read_family_float(f, c, "attention.scale", 0.0f));
  if (!(c.logit_scale > 0)) return Error{fmt::format("{}logit_scale {} must be positive", a, c.logit_scale)};
  if (auto ws = f.get_number(a + "expert_weights_scale"); ws && *ws != 0 && *ws != 1)
    return Error{fmt::format("{}expert_weights_scale {}: scaled expert weights are not supported", a, *ws)};
  // llama.cpp: 0 (or absent) means "no scaling" for the other three
  if (embd != 0.0f) c.embd_scale = embd;
  if (resid != 0.0f) c.residual_scale = resid;
  if (attn != 0.0f) c.attn_scale = attn;
  for (const char* t : {"ffn_gate.bias", "ffn_up.bias", "ffn_down.bias"})
    if (f.find_tensor(fmt::format("blk.0.{}", t)))
      return Error{fmt::format("{}: FFN biases (blk.0.{}) are not supported", c.arch.name, t)};
  return {};
}
Status read_granitehybrid(const GgufFile& f, ModelConfig& c) {
  TM_TRY(read_granite(f, c));
  const std::string a = c.arch.name + ".";
  if (const GgufValue* v = f.find(a + "rope.scaling.finetuned")) {  // llama.cpp: the switch for RoPE (default on)
    const std::optional<bool> on = v->as_bool();
    if (!on) return Error{fmt::format("metadata key '{}rope.scaling.finetuned' must be a bool", a)};
    if (!*on)
      for (LayerAttention& la : c.layer_attn) la.rope = -1;
  }
  if (c.is_moe()) {
    if (auto sh = f.get_int(a + "expert_shared_feed_forward_length"); sh && *sh > 0) {
      if (*sh > (1 << 22)) return Error{fmt::format("{}expert_shared_feed_forward_length {} is out of range", a, *sh)};
      c.n_ff_shexp = *sh;
    }
  }
  return {};
}
}  // namespace

ArchSpec arch_granite() {
  ArchSpec s{"granite", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.read_family = read_granite;
  return s;
}

ArchSpec arch_granitemoe() {
  ArchSpec s = arch_granite();
  s.name = "granitemoe";
  s.moe = ArchSpec::Moe::Required;
  s.moe_norm_topk = true;
  return s;
}

ArchSpec arch_granitehybrid() {
  ArchSpec s = arch_granite();
  s.name = "granitehybrid";
  s.ssm = true;
  s.moe = ArchSpec::Moe::Optional;
  s.moe_norm_topk = true;
  s.moe_shared_ungated = true;
  s.read_family = read_granitehybrid;
  return s;
}
}  // namespace tmill
