// LFM2 (GGUF "lfm2": LiquidAI's LFM2-350M / 700M / 1.2B / 2.6B, LFM2.5), as llama.cpp's lfm2 graph: most
// layers are gated short convolutions (model/shortconv.h) -- the layers whose
// attention.head_count_kv entry is 0 --, the others GQA attention with per-head q/k RMSNorms and NeoX
// RoPE; every layer has a SwiGLU FFN; the final norm is named token_embd_norm (llama.cpp's
// LLM_TENSOR_OUTPUT_NORM_LFM2); the output is tied unless output.weight is present.
// LFM2 MoE (GGUF "lfm2moe": LFM2-8B-A1B, LFM2-24B-A2B): the same layers, the FFNs after the first
// leading_dense_block_count experts routed by the file's expert_gating_func (required, as llama.cpp:
// sigmoid in the released files) chosen with exp_probs_b.bias and always renormalized, never scaled
// (llama.cpp's lfm2moe reads neither expert_weights_norm nor expert_weights_scale).
#include "model/config.h"

namespace tmill {
namespace {
Status read_lfm2(const GgufFile& f, ModelConfig& c) {
  if (auto w = f.get_int(c.arch.name + ".attention.sliding_window"); w && *w > 0)
    return Error{"lfm2: sliding-window attention layers are not supported"};
  if (auto causal = f.find(c.arch.name + ".attention.causal"); causal && causal->as_bool() == false)
    return Error{"lfm2: the bidirectional form (LFM2 embedding models) is not supported"};
  return {};
}
Status read_lfm2moe(const GgufFile& f, ModelConfig& c) {
  TM_TRY(read_lfm2(f, c));
  return read_expert_gating(f, c, /*default_gating=*/0);
}
}  // namespace

ArchSpec arch_lfm2moe() {
  ArchSpec s{"lfm2moe", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.shortconv = true;
  s.output_norm_name = "token_embd_norm";
  s.moe = ArchSpec::Moe::Required;
  s.moe_expert_ff_key = true;
  s.moe_norm_topk = true;
  s.moe_gating_key = true;
  s.moe_selection_bias = true;
  s.read_family = read_lfm2moe;
  return s;
}

ArchSpec arch_lfm2() {
  ArchSpec s{"lfm2", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.shortconv = true;
  s.output_norm_name = "token_embd_norm";
  s.read_family = read_lfm2;
  return s;
}
}  // namespace tmill
