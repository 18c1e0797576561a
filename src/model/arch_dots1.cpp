// dots.llm1 (GGUF "dots1", rednote-hilab): qwen3's attention -- per-head RMSNorm of q and k before NeoX
// RoPE -- with DeepSeek-V3's experts, as llama.cpp's dots1 graph: the first leading_dense_block_count
// layers dense, the others routed by the file's expert_gating_func (required: llama.cpp's graph has no
// default; sigmoid in the released files) chosen with exp_probs_b.bias when present, renormalized
// and scaled as expert_weights_norm / expert_weights_scale say, plus expert_shared_count ungated
// shared experts (config.cpp read_deepseek_moe).
#include "model/config.h"

namespace tmill {
namespace {
Status read_dots1(const GgufFile& f, ModelConfig& c) { return read_deepseek_moe(f, c, /*default_gating=*/0); }
}  // namespace

ArchSpec arch_dots1() {
  ArchSpec s{"dots1", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  set_deepseek_style_moe(s);
  s.read_family = read_dots1;
  return s;
}
}  // namespace tmill
