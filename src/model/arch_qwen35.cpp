// Qwen3.5 (GGUF "qwen35": Qwen3.5 0.8B .. 27B; "qwen35moe": 35B-A3B .. 397B-A17B), as llama.cpp's
// qwen35 graphs: three layers of four (or attention.recurrent_layers' choice) are gated delta nets
// (model/gated_delta_net.h), the rest gated attention -- a q projection of queries and gates per head,
// per-head q/k RMSNorms, RoPE on the first rope.dimension_count dimensions of each head, the output
// times sigmoid(gate) into attn_output --; each layer's FFN reads post_attention_norm's output: a
// SwiGLU (qwen35) or softmax experts, renormalized, beside a sigmoid-gated shared expert (qwen35moe).
// The RoPE is llama.cpp's interleaved M-RoPE over rope.dimension_sections; text positions are the same
// in its sections, so it is NeoX RoPE whenever the sections cover every rotated pair with a text
// position (the released files; others are refused). Multi-token-prediction blocks (nextn) are left out.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_qwen35(const GgufFile& f, ModelConfig& c) {
  const std::string key = c.arch.name + ".rope.dimension_sections";
  const GgufValue* v = f.find(key);
  if (!v) return Error{fmt::format("missing metadata key '{}'", key)};
  const auto s = v->as_int_array();
  if (!s || s->size() < 3) return Error{fmt::format("{} must hold 4 section sizes", key)};
  const int64_t s0 = (*s)[0], s1 = (*s)[1], s2 = (*s)[2], s3 = s->size() > 3 ? (*s)[3] : 0;
  const int64_t total = s0 + s1 + s2 + s3;
  if (s0 < 0 || s1 < 0 || s2 < 0 || s3 < 0 || total <= 0 || total > c.head_dim)
    return Error{fmt::format("{} [{}, {}, {}, {}] is out of range", key, s0, s1, s2, s3)};
  // ggml's interleaved M-RoPE: pair i's position is the (i % total)'s sector's; the fourth (extra)
  // position is 0 for text -- a pair that reads it would not rotate
  for (int64_t i = 0; i < c.n_rot / 2; ++i) {
    const int64_t sec = i % total;
    const bool text = (sec % 3 == 1 && sec < 3 * s1) || (sec % 3 == 2 && sec < 3 * s2) || (sec % 3 == 0 && sec < 3 * s0);
    if (!text)
      return Error{fmt::format("{} [{}, {}, {}, {}]: rotated pair {} takes the extra position; only sections that "
                               "give every pair a text position are supported",
                               key, s0, s1, s2, s3, i)};
  }
  return {};
}
}  // namespace

ArchSpec arch_qwen35() {
  ArchSpec s{"qwen35", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.ssm = true;
  s.gated_delta_net = true;
  s.attn_output_gate = true;
  s.ffn_norm_name = "post_attention_norm";
  s.read_family = read_qwen35;
  return s;
}

ArchSpec arch_qwen35moe() {
  ArchSpec s = arch_qwen35();
  s.name = "qwen35moe";
  s.moe = ArchSpec::Moe::Required;
  s.moe_norm_topk = true;
  s.moe_expert_ff_key = true;
  s.moe_shared_expert = true;
  return s;
}
}  // namespace tmill
