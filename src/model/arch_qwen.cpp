// Qwen (GGUF "qwen": the first Qwen generation -- Qwen-1.8B, -7B, -14B, -72B and their Chat models), as
// llama.cpp's qwen graph: the llama block with RMSNorm, one attn_qkv with its bias (multi-head: as many
// K/V heads as query heads), NeoX RoPE over the whole head, SwiGLU whose gate / up / down hold half of
// feed_forward_length (the converter writes QWen's intermediate_size, twice the FFN's width), no
// attn_output bias, an untied output.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_qwen(const GgufFile&, ModelConfig& c) {
  if (c.n_ff % 2 != 0) return Error{fmt::format("qwen.feed_forward_length {} must be even (twice the FFN's width)", c.n_ff)};
  c.n_ff /= 2;
  if (c.n_head_kv != c.n_head)
    return Error{fmt::format("qwen has as many K/V heads as query heads ({} and {} here)", c.n_head_kv, c.n_head)};
  return {};
}
}  // namespace

ArchSpec arch_qwen() {
  ArchSpec s{"qwen", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;  // (attn_qkv and its bias; gate and up come apart)
  s.output_required = true;
  s.read_family = read_qwen;
  return s;
}
}  // namespace tmill
