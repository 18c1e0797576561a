// MiniCPM (GGUF "minicpm": MiniCPM 1B / 2B, MiniCPM-MoE-8x2B, MiniCPM4 8B), as llama.cpp runs it with
// its granite graph: the llama block (RoPE on adjacent pairs; LongRoPE when the file has its factors)
// with muP's three scalars -- token embeddings times embedding_scale (scale_emb), each attention and FFN
// output times residual_scale (scale_depth / sqrt(n_layer)) before its residual add, the logits divided
// by logit_scale (hidden_size / dim_model_base) -- an attn_output bias when the file has one, and experts
// (softmax, top expert_used_count renormalized) when expert_count > 1. Files from before the converter
// wrote the scalars get MiniCPM's values: 12, 1.4 / sqrt(n_layer) and n_embd / 256 (transformers'
// division; llama.cpp's default there, 256 / n_embd, would sharpen the logits instead -- the greedy
// choice is the same). FFN biases are refused (llama.cpp would add them).
#include <cmath>

#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_minicpm(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch.name + ".";
  TM_ASSIGN_OR_RETURN(c.embd_scale, read_family_float(f, c, "embedding_scale", 12.0f));
  TM_ASSIGN_OR_RETURN(c.residual_scale,
                      read_family_float(f, c, "residual_scale", 1.4f / std::sqrt(static_cast<float>(c.n_layer))));
  TM_ASSIGN_OR_RETURN(c.logit_scale, read_family_float(f, c, "logit_scale", static_cast<float>(c.n_embd) / 256.0f));
  if (!(c.logit_scale > 0)) return Error{fmt::format("{}logit_scale {} must be positive", a, c.logit_scale)};
  for (const char* t : {"ffn_gate.bias", "ffn_up.bias", "ffn_down.bias"})
    if (f.find_tensor(fmt::format("blk.0.{}", t)))
      return Error{fmt::format("{}: FFN biases (blk.0.{}) are not supported", c.arch.name, t)};
  if (auto sh = f.get_int(a + "expert_shared_feed_forward_length"); sh && *sh > 0)
    return Error{fmt::format("{}expert_shared_feed_forward_length: shared experts are not supported for minicpm", a)};
  return {};
}
}  // namespace

ArchSpec arch_minicpm() {
  ArchSpec s{"minicpm", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.moe = ArchSpec::Moe::Optional;
  s.moe_norm_topk = true;
  s.read_family = read_minicpm;
  return s;
}
}  // namespace tmill
