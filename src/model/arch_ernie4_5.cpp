// ERNIE 4.5 dense (GGUF "ernie4_5": ERNIE-4.5-0.3B): the llama block -- RoPE on adjacent pairs, GQA,
// SwiGLU, tied or untied output; an attn_output.bias is added when the file has one.
// ERNIE 4.5 MoE (GGUF "ernie4_5-moe": ERNIE-4.5-21B-A3B, ERNIE-4.5-300B-A47B), as llama.cpp's
// ernie4_5-moe graph: the same block; the first leading_dense_block_count layers dense, the others
// experts of expert_feed_forward_length rows routed by softmax, chosen by probability +
// exp_probs_b.bias when the file has one (the selection bias), the chosen probabilities
// renormalized (always); plus an ungated shared expert of expert_shared_feed_forward_length rows
// when that is > 0. Expert layers every interleave_moe_layer_step-th layer other than every one are
// refused (llama.cpp loads experts into every layer after the dense ones whatever the step says);
// llama.cpp reads no expert weight scale nor gating function for ERNIE, and neither does this.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_ernie4_5_moe(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch.name + ".";
  const auto step = f.get_int(a + "interleave_moe_layer_step");
  if (!step) return Error{fmt::format("missing metadata key '{}interleave_moe_layer_step'", a)};
  if (*step != 1)
    return Error{fmt::format("{}interleave_moe_layer_step {}: only experts in every layer after the dense ones (1) "
                             "are supported", a, *step)};
  c.n_layer_dense_lead = f.get_int(a + "leading_dense_block_count").value_or(0);
  if (c.n_layer_dense_lead < 0 || c.n_layer_dense_lead > c.n_layer)
    return Error{fmt::format("{}leading_dense_block_count {} is out of range [0, {}]", a, c.n_layer_dense_lead, c.n_layer)};
  c.n_ff_shexp = f.get_int(a + "expert_shared_feed_forward_length").value_or(0);
  if (c.n_ff_shexp < 0 || c.n_ff_shexp > (1 << 22))
    return Error{fmt::format("{}expert_shared_feed_forward_length {} is out of range", a, c.n_ff_shexp)};
  c.moe_weights_scale = 1.0f;
  return {};
}
}  // namespace

ArchSpec arch_ernie4_5() { return {"ernie4_5", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false}; }

ArchSpec arch_ernie4_5_moe() {
  ArchSpec s{"ernie4_5-moe", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.moe = ArchSpec::Moe::Required;
  s.moe_expert_ff_key = true;
  s.moe_norm_topk = true;
  s.moe_shared_ungated = true;
  s.moe_gating_key = true;  // (softmax whatever the file says, as llama.cpp)
  s.moe_selection_bias = true;
  s.moe_selection_bias_required = false;
  s.read_family = read_ernie4_5_moe;
  return s;
}
}  // namespace tmill
