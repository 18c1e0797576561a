// Llama 4 (GGUF "llama4": Scout 17B-16E, Maverick 17B-128E), as llama.cpp's llama4 graph: the llama
// block (RoPE on adjacent pairs, llama3 rope_freqs) where every fourth layer takes no RoPE and the
// others attend in chunks of 8192 positions (a query at p sees [p - p % 8192, p]; llama.cpp fixes the
// size whatever attention.sliding_window says, and a sliding_window of 0 turns chunks off: then only
// the last layer goes without RoPE, as there); on the RoPE layers q and k are RMS-normalized without a
// weight after RoPE (not for the 128-expert Maverick), on the others the queries take the attention
// temperature 1 + 0.1 ln(floor((p + 1) / 8192) + 1). Experts every interleave_moe_layer_step-th layer
// (dense SwiGLU between), routed to expert_used_count experts by raw logit with weight sigmoid(logit)
// applied to the expert's input, plus an ungated shared expert of the experts' width.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
constexpr int64_t kChunk = 8192;

Status read_llama4(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch.name + ".";
  const auto step = f.get_int(a + "interleave_moe_layer_step");
  if (!step) return Error{fmt::format("missing metadata key '{}interleave_moe_layer_step'", a)};
  if (*step < 1 || *step > c.n_layer)
    return Error{fmt::format("{}interleave_moe_layer_step {} is out of range [1, {}]", a, *step, c.n_layer)};
  c.moe_layer_step = *step;
  c.moe_sigmoid = true;
  c.moe_select_by_logit = true;
  c.moe_weight_before = true;
  c.n_ff_shexp = c.n_ff_exp;
  c.kq_l2_norm = c.n_expert != 128;  // (llama.cpp: not for Maverick)
  if (auto base = f.get_number(a + "rope.freq_base_swa"); base && static_cast<float>(*base) != c.rope_theta)
    return Error{fmt::format("{}rope.freq_base_swa {}: chunked layers with a RoPE base of their own are not supported",
                             a, *base)};
  const auto window = f.get_int(a + "attention.sliding_window");
  int64_t nope_step = 4;
  if (window && *window == 0) {
    nope_step = c.n_layer;  // no chunks; (l + 1) % n_layer: the last layer alone without RoPE
  } else {
    const auto pattern = f.get_int(a + "attention.sliding_window_pattern").value_or(4);
    if (pattern != 4)
      return Error{fmt::format("{}attention.sliding_window_pattern {}: chunked attention on three layers of four only",
                               a, pattern)};
    for (int64_t l = 0; l < c.n_layer; ++l)
      if (l % 4 < 3) c.layer_attn[static_cast<size_t>(l)].chunk = kChunk;
    c.attn_temp_scale = 0.1f;
    c.attn_temp_floor = kChunk;
    c.attn_temp_nope_only = true;
  }
  for (int64_t l = 0; l < c.n_layer; ++l)
    if ((l + 1) % nope_step == 0) c.layer_attn[static_cast<size_t>(l)].rope = -1;
  return {};
}
}  // namespace

ArchSpec arch_llama4() {
  ArchSpec s{"llama4", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.moe = ArchSpec::Moe::Required;
  s.moe_expert_ff_key = true;
  s.moe_shared_ungated = true;
  s.moe_gating_key = true;  // (sigmoid whatever the file says, as llama.cpp)
  s.read_family = read_llama4;
  return s;
}
}  // namespace tmill
