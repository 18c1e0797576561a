// Random-weight DeciLM / Nemotron NAS models (GGUF "deci") with the keys, tensor names and shapes
// llama.cpp's converter writes: attention.head_count, head_count_kv and feed_forward_length as one value
// per layer; a layer without attention has no attn_norm / q / k / v / output, a "linear attention" layer
// only attn_norm and a square attn_output, a layer without an FFN no ffn_norm / gate / up / down.
// OpenELM (GGUF "openelm") the same per-layer keys, every layer with attention and an FFN: one attn_qkv
// per layer, per-head q/k norms, the output tied.
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "convert/dummy.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "quant/quant.h"

namespace tmill {

Status write_dummy_deci(const DummyOptions& o, const std::string& out_path) {
  ModelShape s = o.shape;
  TM_TRY(dummy_whole_file_dtype(o.dtype, s.arch));
  const int64_t E = s.n_embd, L = s.n_layer, hd = s.head_dim;
  auto per = [&](const std::vector<int32_t>& v, int64_t def) {
    std::vector<int32_t> out(static_cast<size_t>(L), static_cast<int32_t>(def));
    for (size_t l = 0; l < out.size() && l < v.size(); ++l) out[l] = v[l];
    return out;
  };
  const auto heads = per(s.layer_heads, s.n_head), kv = per(s.layer_kv_heads, s.n_head_kv), ff = per(s.layer_ff, s.n_ff);
  const bool openelm = s.arch == "openelm";
  if (E <= 0 || L <= 0 || hd <= 0 || hd % 2 != 0 || s.n_vocab <= 0 || heads[0] <= 0 || (!openelm && E % heads[0] != 0))
    return Error{"invalid model dimensions (deci: layer 0 needs attention; llama.cpp sizes heads by its count)"};
  for (int64_t l = 0; l < L; ++l) {
    const auto i = static_cast<size_t>(l);
    if (heads[i] < 0 || kv[i] < 0 || ff[i] < 0 || (heads[i] > 0 && kv[i] > 0 && heads[i] % kv[i] != 0) ||
        (openelm && (heads[i] == 0 || kv[i] == 0 || ff[i] == 0)))
      return Error{fmt::format("layer {}: {} heads, {} K/V heads, FFN {}", l, heads[i], kv[i], ff[i])};
  }
  if (openelm) s.tied = true;  // (llama.cpp's openelm takes the output from token_embd)

  GgufWriter w;
  TM_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> vocab, open_dummy_vocab(o.vocab_path));
  if (vocab) s.n_vocab = dummy_vocab_size(*vocab);
  const std::string a = s.arch + ".";
  dummy_header(w, s, o.dtype);
  w.set(a + "attention.head_count", GgufValue::i32_array(heads));
  w.set(a + "attention.head_count_kv", GgufValue::i32_array(kv));
  w.set(a + "feed_forward_length", GgufValue::i32_array(ff));
  w.set_u32(a + "attention.key_length", static_cast<uint32_t>(hd));
  w.set_u32(a + "attention.value_length", static_cast<uint32_t>(hd));
  w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(hd));
  w.set_f32(a + "rope.freq_base", s.rope_theta);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  if (vocab) copy_tokenizer_keys(*vocab, w);
  else dummy_synthetic_vocab(w, s.n_vocab);

  const DummyTensors t = DummyTensors::for_options(w, o);
  const float spread = t.spread, e_spread = t.e_spread;
  TM_TRY(t.matrix("token_embd.weight", s.n_vocab, E, e_spread));
  TM_TRY(t.f32("output_norm.weight", E, 1.0f, 0.1f));
  if (!s.tied) TM_TRY(t.matrix("output.weight", s.n_vocab, E, e_spread));
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    const int64_t h = heads[static_cast<size_t>(l)], k = kv[static_cast<size_t>(l)], f = ff[static_cast<size_t>(l)];
    if (h > 0) {
      TM_TRY(t.f32(p + "attn_norm.weight", E, 1.0f, 0.1f));
      if (openelm) {
        TM_TRY(t.matrix(p + "attn_qkv.weight", (h + 2 * k) * hd, E, spread));
        TM_TRY(t.f32(p + "attn_q_norm.weight", hd, 1.0f, 0.1f));
        TM_TRY(t.f32(p + "attn_k_norm.weight", hd, 1.0f, 0.1f));
        TM_TRY(t.matrix(p + "attn_output.weight", E, h * hd, spread));
      } else if (k > 0) {
        TM_TRY(t.matrix(p + "attn_q.weight", h * hd, E, spread));
        TM_TRY(t.matrix(p + "attn_k.weight", k * hd, E, spread));
        TM_TRY(t.matrix(p + "attn_v.weight", k * hd, E, spread));
        TM_TRY(t.matrix(p + "attn_output.weight", E, h * hd, spread));
      } else {  // "linear attention"
        TM_TRY(t.matrix(p + "attn_output.weight", E, E, spread));
      }
    }
    if (f > 0) {
      TM_TRY(t.f32(p + "ffn_norm.weight", E, 1.0f, 0.1f));
      TM_TRY(t.matrix(p + "ffn_gate.weight", f, E, spread));
      TM_TRY(t.matrix(p + "ffn_up.weight", f, E, spread));
      TM_TRY(t.matrix(p + "ffn_down.weight", E, f, spread));
    }
  }
  return w.write(out_path);
}

}  // namespace tmill
