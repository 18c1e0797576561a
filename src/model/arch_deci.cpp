// DeciLM / Nemotron NAS models (GGUF "deci": Llama-3.1-Nemotron-51B, Llama-3.3-Nemotron-Super-49B,
// Llama-3.1-Nemotron-Ultra-253B), as llama.cpp's deci graph: the llama block (RMSNorm, adjacent-pair RoPE
// over the whole head, rope_freqs when present, SwiGLU) with each layer's own query heads, K/V heads and
// FFN width (attention.head_count / head_count_kv / feed_forward_length per layer: ModelConfig::layer_shape)
// and layers of three other kinds (ArchSpec::variable_layers):
// - head_count 0: no attention -- the layer is its FFN on ffn_norm's norm of the input (ModelConfig::ffn_only);
// - head_count_kv 0 with heads: "linear attention" -- attn_output of attn_norm's norm, added to the
//   input, no K/V (ModelConfig::linear_attn);
// - feed_forward_length 0: no FFN (ModelConfig::no_ffn). Here the layer's attention output is added to the
//   input as the model computes it; llama.cpp's graph skips such a layer whole (its attention output
//   dropped), so files with attention and no FFN in one layer give other logits there.
// OpenELM (GGUF "openelm": Apple's OpenELM-270M / 450M / 1.1B / 3B), as llama.cpp's openelm graph: deci's
// per-layer query heads, K/V heads and FFN widths (every layer with attention and an FFN: no zeros), with
// one attn_qkv per layer, per-head q/k RMSNorms, NeoX RoPE over the whole head and the output tied to
// token_embd.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_deci(const GgufFile&, ModelConfig& c) {
  if (c.n_rot != c.head_dim)
    return Error{fmt::format("{}.rope.dimension_count {} must be the head dimension {} (as llama.cpp requires)",
                             c.arch.name, c.n_rot, c.head_dim)};
  c.layer_shape.resize(static_cast<size_t>(c.n_layer), ModelConfig::LayerShape{0, 0, 0, 0});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    ModelConfig::LayerShape& g = c.layer_shape[static_cast<size_t>(l)];
    g.head_dim = c.head_dim;
    g.n_rot = c.n_rot;
    if (g.n_head == 0 && c.has_mixer(l)) g.n_head = c.n_head;  // (a scalar head_count)
    if (g.n_head_kv == 0 && c.has_attention(l)) g.n_head_kv = c.n_head_kv;  // (a scalar head_count_kv)
    if (g.n_ff == 0 && c.has_ffn(l)) g.n_ff = c.n_ff;  // (a scalar feed_forward_length)
  }
  return {};
}

Status read_openelm(const GgufFile& f, ModelConfig& c) {
  TM_TRY(read_deci(f, c));
  for (int64_t l = 0; l < c.n_layer; ++l)
    if (!c.has_attention(l) || !c.has_ffn(l) || c.n_head_of(l) % c.n_head_kv_of(l) != 0)
      return Error{fmt::format("openelm layer {}: every layer has attention (K/V heads dividing its heads) and an FFN", l)};
  return {};
}
}  // namespace

ArchSpec arch_openelm() {
  ArchSpec s{"openelm", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.layer_geometry = true;
  s.variable_layers = true;
  s.fused_qkv_ffn = true;
  s.read_family = read_openelm;
  return s;
}

ArchSpec arch_deci() {
  ArchSpec s{"deci", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.layer_geometry = true;
  s.variable_layers = true;
  s.read_family = read_deci;
  return s;
}
}  // namespace tmill
