// Ling 2.0 / Ring 2.0 (GGUF "bailingmoe2": inclusionAI's Ling-mini-2.0, Ling-flash-2.0, Ring-mini-2.0
// and their kin), as llama.cpp's bailingmoe2 graph: q, k and v in one attn_qkv (split into row views),
// per-head q/k RMSNorms before NeoX RoPE over rope.dimension_count (half of each head in the released
// files), DeepSeek-V3's experts after the leading_dense_block_count dense layers -- expert_gating_func
// required (sigmoid in the released files), exp_probs_b.bias when present, expert_weights_norm and
// expert_weights_scale as the file says, grouped routing when it has groups -- plus expert_shared_count
// ungated shared experts of expert_shared_feed_forward_length rows each (absent: the experts' rows);
// the untied output; the NextN layers (nextn_predict_layers) left out.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_bailingmoe2(const GgufFile& f, ModelConfig& c) {
  TM_TRY(read_deepseek_moe(f, c, /*default_gating=*/0));
  const std::string a = c.arch.name + ".";
  if (auto rows = f.get_int(a + "expert_shared_feed_forward_length"); rows && *rows > 0) {
    const int64_t shared = f.get_int(a + "expert_shared_count").value_or(0);
    if (*rows > (1 << 22)) return Error{fmt::format("{}expert_shared_feed_forward_length {} is out of range", a, *rows)};
    c.n_ff_shexp = shared * *rows;
  }
  return {};
}
}  // namespace

ArchSpec arch_bailingmoe2() {
  ArchSpec s{"bailingmoe2", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.fused_qkv_ffn = true;  // (attn_qkv; the FFNs come apart: ffn_gate / ffn_up)
  set_deepseek_style_moe(s);
  s.output_required = true;
  s.read_family = read_bailingmoe2;
  return s;
}
}  // namespace tmill
