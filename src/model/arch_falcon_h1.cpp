// Falcon-H1 (GGUF "falcon-h1": Falcon-H1 0.5B .. 34B, Falcon-H1R), as llama.cpp's falcon-h1 graph: every
// layer runs GQA attention (NeoX RoPE, an attn_output bias when the file has one) and a
// Mamba-2 mixer (model/mamba2.h; its grouped norm only when the file has ssm_norm) side by side on the
// output of its attn_norm, adds both outputs to the residual stream, then a SwiGLU FFN behind ffn_norm
// -- a tensor its converter names blk.N.ffn_norm, without ".weight". The checkpoint's muP multipliers
// are folded into the weights by the converter, so nothing here scales. FFN biases are refused (no
// release has them; llama.cpp would add them).
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_falcon_h1(const GgufFile& f, ModelConfig& c) {
  for (const char* t : {"ffn_gate.bias", "ffn_up.bias", "ffn_down.bias"})
    if (f.find_tensor(fmt::format("blk.0.{}", t)))
      return Error{fmt::format("{}: FFN biases (blk.0.{}) are not supported", c.arch.name, t)};
  return {};
}
}  // namespace

ArchSpec arch_falcon_h1() {
  ArchSpec s{"falcon-h1", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.ssm = true;
  s.parallel_ssm = true;
  s.ffn_norm_suffix = "";
  s.read_family = read_falcon_h1;
  return s;
}
}  // namespace tmill
