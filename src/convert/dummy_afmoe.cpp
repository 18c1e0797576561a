// Random-weight AFMoE models (GGUF "afmoe": Arcee's Trinity) with the keys, tensor names and shapes
// llama.cpp's converter (AfmoeModel) writes: per-head q/k norms, the attention gate attn_gate, pre- and
// post-norms, dense FFNs in the leading layers and then sigmoid-routed experts with a selection bias
// (expert_gating_func is not written: llama.cpp's default is sigmoid) beside the shared experts; the
// sliding window when the shape has one; the output untied unless the shape ties it.
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "convert/dummy.h"
#include "formats/gguf.h"

namespace tmill {

Status write_dummy_afmoe(const DummyOptions& o, const std::string& out_path) {
  ModelShape s = o.shape;
  TM_TRY(dummy_whole_file_dtype(o.dtype, s.arch));
  const int64_t E = s.n_embd, hd = s.head_dim, QD = s.n_head * hd, KD = s.n_head_kv * hd, F = s.n_ff;
  const int64_t X = s.n_expert, FE = s.n_ff_exp, shared = s.n_expert_shared > 0 ? s.n_expert_shared : 1;
  if (E <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 || s.n_head % s.n_head_kv != 0 || hd % 2 != 0 ||
      F <= 0 || s.n_vocab <= 0 || X < 2 || s.n_expert_used < 1 || s.n_expert_used > X || FE <= 0 ||
      s.n_dense_lead < 0 || s.n_dense_lead > s.n_layer)
    return Error{"invalid model dimensions (afmoe: experts with their rows, leading dense layers)"};
  GgufWriter w;
  TM_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> vocab, open_dummy_vocab(o.vocab_path));
  if (vocab) s.n_vocab = dummy_vocab_size(*vocab);
  const std::string a = "afmoe.";
  dummy_header(w, s, o.dtype);
  dummy_uniform_layer_keys(w, s);
  w.set_u32(a + "attention.key_length", static_cast<uint32_t>(hd));
  w.set_u32(a + "attention.value_length", static_cast<uint32_t>(hd));
  w.set_u32(a + "vocab_size", static_cast<uint32_t>(s.n_vocab));
  w.set_u32(a + "expert_count", static_cast<uint32_t>(X));
  w.set_u32(a + "expert_used_count", static_cast<uint32_t>(s.n_expert_used));
  w.set_u32(a + "expert_shared_count", static_cast<uint32_t>(shared));
  w.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(FE));
  w.set_u32(a + "leading_dense_block_count", static_cast<uint32_t>(s.n_dense_lead));
  w.set_bool(a + "expert_weights_norm", true);
  if (s.expert_weights_scale > 0) w.set_f32(a + "expert_weights_scale", s.expert_weights_scale);
  if (s.n_swa > 0) w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(s.n_swa));
  if (vocab) copy_tokenizer_keys(*vocab, w);
  else dummy_synthetic_vocab(w, s.n_vocab);

  const DummyTensors t = DummyTensors::for_options(w, o);
  const float spread = t.spread, e_spread = t.e_spread;
  const DummyTensors router{w, t.pool, o.seed, DType::F32};
  auto norm = [&](const std::string& name, int64_t n) { return t.f32(name, n, 1.0f, 0.1f); };
  TM_TRY(t.matrix("token_embd.weight", s.n_vocab, E, e_spread));
  TM_TRY(norm("output_norm.weight", E));
  if (!s.tied) TM_TRY(t.matrix("output.weight", s.n_vocab, E, e_spread));
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    TM_TRY(norm(p + "attn_norm.weight", E));
    TM_TRY(t.matrix(p + "attn_q.weight", QD, E, spread));
    TM_TRY(t.matrix(p + "attn_k.weight", KD, E, spread));
    TM_TRY(t.matrix(p + "attn_v.weight", KD, E, spread));
    TM_TRY(norm(p + "attn_q_norm.weight", hd));
    TM_TRY(norm(p + "attn_k_norm.weight", hd));
    // (a wide gate, so that sigmoid(gate) spreads over (0, 1) rather than sitting near 1/2)
    TM_TRY(t.matrix(p + "attn_gate.weight", QD, E, spread));
    TM_TRY(t.matrix(p + "attn_output.weight", E, QD, spread));
    TM_TRY(norm(p + "post_attention_norm.weight", E));
    TM_TRY(norm(p + "ffn_norm.weight", E));
    TM_TRY(norm(p + "post_ffw_norm.weight", E));
    if (l < s.n_dense_lead) {
      TM_TRY(t.matrix(p + "ffn_gate.weight", F, E, spread));
      TM_TRY(t.matrix(p + "ffn_up.weight", F, E, spread));
      TM_TRY(t.matrix(p + "ffn_down.weight", E, F, spread));
      continue;
    }
    // (the router's logits spread about +-1.7 whatever the width or --std: 4x the matrices' spread gave
    // sigmoid scores so close that a 16-bit cache's rounding flipped the choice -- tiny-afmoe over an F16
    // cache 0.55 off the reference from position 7 on --, and 16x saturated them at n_embd 256 / --std
    // 0.05, 20 routing flips in 113 positions against llama.cpp's F16 run; 2026-12-07)
    TM_TRY(router.matrix(p + "ffn_gate_inp.weight", X, E, 3.0f / std::sqrt(static_cast<float>(E))));
    TM_TRY(router.f32(p + "exp_probs_b.bias", X, 0.0f, 0.2f));
    TM_TRY(t.experts(p + "ffn_gate_exps.weight", X, FE, E, spread));
    TM_TRY(t.experts(p + "ffn_up_exps.weight", X, FE, E, spread));
    TM_TRY(t.experts(p + "ffn_down_exps.weight", X, E, FE, spread));
    TM_TRY(t.matrix(p + "ffn_gate_shexp.weight", shared * FE, E, spread));
    TM_TRY(t.matrix(p + "ffn_up_shexp.weight", shared * FE, E, spread));
    TM_TRY(t.matrix(p + "ffn_down_shexp.weight", E, shared * FE, spread));
  }
  return w.write(out_path);
}

}  // namespace tmill
