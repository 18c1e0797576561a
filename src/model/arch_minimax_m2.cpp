// MiniMax-M2 (GGUF "minimax-m2": MiniMax-M2, M2.1), as llama.cpp's minimax-m2 graph: RMSNorm over the
// whole q and the whole k projection (attn_q_norm / attn_k_norm: n_head x head_dim and kv wide, as
// olmoe's), NeoX RoPE over rope.dimension_count of each head (64 of 128), and in every layer experts of
// feed_forward_length rows routed by the file's expert_gating_func (sigmoid in MiniMax's files; the key
// is required, as llama.cpp's graph has no default), chosen with exp_probs_b.bias, renormalized
// (always); no shared expert, no dense layers. llama.cpp reads no expert weight scale for it.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_minimax_m2(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch.name + ".";
  const auto gating = f.get_int(a + "expert_gating_func");
  if (!gating) return Error{fmt::format("missing metadata key '{}expert_gating_func'", a)};
  if (*gating != 1 && *gating != 2)
    return Error{fmt::format("{}expert_gating_func {}: softmax (1) or sigmoid (2) gating only", a, *gating)};
  c.moe_sigmoid = *gating == 2;
  return {};
}
}  // namespace

ArchSpec arch_minimax_m2() {
  ArchSpec s{"minimax-m2", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.qk_norm_full = true;
  s.moe = ArchSpec::Moe::Required;
  s.moe_norm_topk = true;
  s.moe_gating_key = true;
  s.moe_selection_bias = true;
  s.read_family = read_minimax_m2;
  return s;
}
}  // namespace tmill
