// Phi-2 (GGUF "phi2": microsoft/phi-2, phi-1.5), as llama.cpp's phi2 graph: LayerNorm with a bias
// (eps attention.layer_norm_epsilon) before each layer and at the end; the parallel block -- attention
// and the FFN both read the layer's normed input and both outputs join the residual --; q/k/v (or one
// attn_qkv) and attn_output biases; NeoX RoPE over rope.dimension_count of each head (32 of 80); an
// ungated FFN, down(gelu(up x + up_b)) + down_b; the untied output with its bias.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_phi2(const GgufFile& f, ModelConfig& c) {
  TM_ASSIGN_OR_RETURN(c.rms_eps, read_family_float(f, c, "attention.layer_norm_epsilon", 1e-5f));
  if (!(c.rms_eps > 0)) return Error{fmt::format("{}.attention.layer_norm_epsilon must be positive", c.arch.name)};
  if (c.tied_output) return Error{"phi2: missing tensor 'output.weight' (its output is untied)"};
  return {};
}
}  // namespace

ArchSpec arch_phi2() {
  ArchSpec s{"phi2", RopeLayout::NeoX, /*qkv_bias=*/true, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;  // (attn_qkv when the file has it; the FFN is ungated)
  s.layer_norm = true;
  s.norm_bias = true;
  s.parallel_block = true;
  s.ffn_ungated = true;
  s.ffn_bias = true;
  s.ffn_act = FfnActivation::GeluTanh;
  s.attn_out_bias = true;
  s.output_bias = true;
  s.read_family = read_phi2;
  return s;
}
}  // namespace tmill
