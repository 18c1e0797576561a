// Hunyuan dense (GGUF "hunyuan-dense": Tencent's Hunyuan-0.5B / 1.8B / 4B / 7B), as llama.cpp's
// hunyuan-dense graph: the llama block with NeoX RoPE and per-head q/k RMSNorms applied after RoPE
// (ArchSpec::qk_norm_after_rope, as HunYuan's attention does); the output tied unless output.weight
// is present. RoPE's base is the file's -- the converter writes HunYuan's NTK alpha into it -- and,
// as llama.cpp, times alpha^(d / (d - 2)) when the file also carries rope.scaling.alpha.
// Hunyuan MoE (GGUF "hunyuan-moe": Hunyuan-A13B): the same attention; every FFN softmax-routed experts
// of feed_forward_length rows, renormalized, plus an ungated shared expert of
// expert_shared_feed_forward_length rows (absent: feed_forward_length), as llama.cpp's hunyuan-moe.
#include <cmath>

#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_hunyuan_dense(const GgufFile& f, ModelConfig& c) {
  if (f.find(c.arch.name + ".rope.dimension_sections"))
    return Error{"hunyuan-dense: M-RoPE sections (Hunyuan-VL's XD-RoPE) are not supported (text models only)"};
  TM_ASSIGN_OR_RETURN(const float alpha, read_family_float(f, c, "rope.scaling.alpha", 0.0f));
  if (!(alpha >= 0) || !std::isfinite(alpha)) return Error{fmt::format("hunyuan-dense: rope.scaling.alpha {} is invalid", alpha)};
  if (alpha > 0) {  // (llama.cpp's float arithmetic)
    const auto d = static_cast<float>(c.head_dim);
    c.rope_theta *= std::pow(alpha, d / (d - 2.0f));
    c.ropes[0].theta = c.rope_theta;
  }
  return {};
}
Status read_hunyuan_moe(const GgufFile& f, ModelConfig& c) {
  TM_TRY(read_hunyuan_dense(f, c));
  // (llama.cpp requires the key, though its experts have feed_forward_length rows whatever it says)
  if (!f.find(c.arch.name + ".expert_feed_forward_length"))
    return Error{fmt::format("missing metadata key '{}.expert_feed_forward_length'", c.arch.name)};
  const int64_t rows = f.get_int(c.arch.name + ".expert_shared_feed_forward_length").value_or(0);
  if (rows < 0 || rows > (1 << 22)) return Error{fmt::format("hunyuan-moe: expert_shared_feed_forward_length {} is out of range", rows)};
  c.n_ff_shexp = rows > 0 ? rows : c.n_ff;
  return {};
}
}  // namespace

ArchSpec arch_hunyuan_moe() {
  ArchSpec s{"hunyuan-moe", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.qk_norm_after_rope = true;
  s.moe = ArchSpec::Moe::Required;
  s.moe_norm_topk = true;
  s.moe_shared_ungated = true;
  s.read_family = read_hunyuan_moe;
  return s;
}

ArchSpec arch_hunyuan_dense() {
  ArchSpec s{"hunyuan-dense", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.qk_norm_after_rope = true;
  s.read_family = read_hunyuan_dense;
  return s;
}
}  // namespace tmill
