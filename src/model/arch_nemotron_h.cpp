// NVIDIA Nemotron-H (GGUF "nemotron_h": Nemotron-H 4B / 8B / 47B / 56B, Nemotron Nano 2 9B / 12B), as
// llama.cpp's nemotron_h graph: every layer is one block behind its attn_norm, added to the residual
// stream -- a Mamba-2 mixer (model/mamba2.h: head_count_kv and feed_forward_length entries 0),
// attention without RoPE (feed_forward_length 0) or an ungated ReLU-squared MLP (head_count_kv 0)
// -- (ArchSpec::single_block_layers). The q.k scale is attention.scale when the file has one. The
// mixture-of-experts form (nemotron_h_moe: Nemotron 3) is not computed here yet.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_nemotron_h(const GgufFile& f, ModelConfig& c) {
  for (LayerAttention& la : c.layer_attn) la.rope = -1;  // (llama.cpp's graph rotates nothing)
  TM_ASSIGN_OR_RETURN(const float scale, read_family_float(f, c, "attention.scale", 0.0f));
  if (scale != 0.0f) c.attn_scale = scale;
  return {};
}
}  // namespace

ArchSpec arch_nemotron_h() {
  ArchSpec s{"nemotron_h", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.ssm = true;
  s.single_block_layers = true;
  s.ffn_ungated = true;
  s.ffn_act = FfnActivation::ReluSqr;
  s.read_family = read_nemotron_h;
  return s;
}
}  // namespace tmill
