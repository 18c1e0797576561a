// GPT-NeoX (GGUF "gptneox": Pythia 14M .. 12B, GPT-NeoX-20B, Dolly v2, RedPajama-INCITE, StableLM-Alpha),
// as llama.cpp's gptneox graph: LayerNorms with biases (eps attention.layer_norm_epsilon); one attn_qkv
// with its bias (q, k, v rows); NeoX RoPE over rope.dimension_count of each head (Pythia: a quarter);
// attn_output's bias; the ungated FFN down(gelu(up x + up_b)) + down_b; the untied output llama.cpp
// requires. gptneox.use_parallel_residual (required, as in llama.cpp) picks the parallel block --
// x + attn(attn_norm(x)) + ffn(ffn_norm(x)), each sub-block with its own norm of the layer's input --
// or the sequential one.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_gptneox(const GgufFile& f, ModelConfig& c) {
  const std::string key = "gptneox.use_parallel_residual";
  const GgufValue* v = f.find(key);
  if (!v) return Error{fmt::format("missing metadata key '{}'", key)};
  auto b = v->as_bool();
  if (!b) return Error{fmt::format("{} must be a boolean", key)};
  c.arch.parallel_block = *b;
  return {};
}
}  // namespace

ArchSpec arch_gptneox() {
  ArchSpec s{"gptneox", RopeLayout::NeoX, /*qkv_bias=*/true, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;
  set_gpt_layer(s);
  s.parallel_ffn_norm = true;
  s.output_required = true;
  s.read_family = read_gptneox;
  return s;
}
}  // namespace tmill
