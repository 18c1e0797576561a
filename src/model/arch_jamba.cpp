// Jamba (GGUF "jamba": AI21's Jamba v0.1, Jamba 1.5 / 1.6 / 1.7 Mini and Large), as llama.cpp's jamba
// graph: layers whose attention.head_count_kv entry is 0 are Mamba-1 mixers (model/mamba1.h) with RMS
// norms, weighted, on dt, B and C; the others GQA attention without RoPE; each layer then an FFN behind
// ffn_norm -- experts where the file has a router (ffn_gate_inp; every other layer in the releases),
// softmax over all, the top expert_used_count with their probabilities as weights (not renormalized),
// each expert feed_forward_length wide -- else a dense SwiGLU.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_jamba(const GgufFile& f, ModelConfig& c) {
  for (LayerAttention& la : c.layer_attn) la.rope = -1;  // (no RoPE: "No RoPE :)" in llama.cpp's graph)
  c.moe_layer.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = 0; l < c.n_layer; ++l)
    c.moe_layer[static_cast<size_t>(l)] = f.find_tensor(fmt::format("blk.{}.ffn_gate_inp.weight", l)) != nullptr;
  if (c.n_expert == 0)
    for (uint8_t m : c.moe_layer)
      if (m) return Error{"jamba: a layer has a router (ffn_gate_inp) but expert_count is not above 1"};
  return {};
}
}  // namespace

ArchSpec arch_jamba() {
  ArchSpec s{"jamba", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.ssm = true;
  s.mamba1 = true;
  s.moe = ArchSpec::Moe::Optional;
  s.read_family = read_jamba;
  return s;
}
}  // namespace tmill
