// Random-weight Gemma 4 models with the keys, tensor names and shapes llama.cpp's converter
// (Gemma4Model) writes: the sliding layers' head size / K/V heads / RoPE dims under the *_swa keys, the
// full layers' under the plain ones (attention.head_count_kv a per-layer array when they differ,
// feed_forward_length one when the shared-K/V layers' FFN is twice as wide), the sliding pattern as
// one bool per layer, rope_freqs.weight's proportional-RoPE factors (1 for the rotated pairs, 1e30 for
// the rest), per-layer embeddings, no K/V tensors on the shared-K/V layers and no attn_v on the full
// ones when K = V; the 26B-A4B's experts beside each dense FFN (ffn_gate_up_exps fused, the router's input
// scale, each expert's output scale).
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "convert/dummy.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "quant/quant.h"

namespace tmill {

Status write_dummy_gemma4(const DummyOptions& o, const std::string& out_path) {
  ModelShape s = o.shape;
  TM_TRY(dummy_whole_file_dtype(o.dtype, s.arch));
  const int64_t E = s.n_embd, F = s.n_ff, L = s.n_layer, PL = s.n_embd_per_layer;
  const int64_t hd_swa = s.head_dim, hd_full = s.head_dim_full > 0 ? s.head_dim_full : s.head_dim;
  const int64_t kv_swa = s.n_head_kv, kv_full = s.n_head_kv_full > 0 ? s.n_head_kv_full : s.n_head_kv;
  const int64_t pattern = s.swa_pattern > 0 ? s.swa_pattern : 6;
  if (E <= 0 || L <= 0 || s.n_head <= 0 || kv_swa <= 0 || s.n_head % kv_swa != 0 || s.n_head % kv_full != 0 ||
      hd_swa % 2 != 0 || hd_full % 2 != 0 || F <= 0 || s.n_vocab <= 0 || s.n_swa <= 0 || PL < 0)
    return Error{"invalid model dimensions (gemma4 needs a sliding window)"};
  const int64_t from = L - s.n_kv_shared;  // the first layer sharing K/V
  auto full = [&](int64_t l) { return (l + 1) % pattern == 0; };
  if (s.n_kv_shared < 0 || (s.n_kv_shared > 0 && (from < 2 || !full(from - 1) || full(from - 2))))
    return Error{"the shared-K/V layers must follow a sliding and then a full layer"};
  const float partial = s.partial_rotary_full > 0 ? s.partial_rotary_full : 1.0f;
  const int64_t rot_pairs = static_cast<int64_t>(static_cast<float>(hd_full) * partial / 2);

  GgufWriter w;
  TM_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> vocab, open_dummy_vocab(o.vocab_path));
  if (vocab) s.n_vocab = dummy_vocab_size(*vocab);
  const std::string a = "gemma4.";
  dummy_header(w, s, o.dtype);
  auto ff_of = [&](int64_t l) { return s.double_wide_ffn && s.n_kv_shared > 0 && l >= from ? 2 * F : F; };
  if (s.double_wide_ffn) {
    std::vector<int32_t> ff;
    for (int64_t l = 0; l < L; ++l) ff.push_back(static_cast<int32_t>(ff_of(l)));
    w.set(a + "feed_forward_length", GgufValue::i32_array(ff));
  } else {
    w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(F));
  }
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
  if (kv_full != kv_swa) {
    std::vector<int32_t> kv;
    for (int64_t l = 0; l < L; ++l) kv.push_back(static_cast<int32_t>(full(l) ? kv_full : kv_swa));
    w.set(a + "attention.head_count_kv", GgufValue::i32_array(kv));
  } else {
    w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(kv_swa));
  }
  w.set_u32(a + "attention.key_length", static_cast<uint32_t>(hd_full));
  w.set_u32(a + "attention.value_length", static_cast<uint32_t>(hd_full));
  w.set_u32(a + "attention.key_length_swa", static_cast<uint32_t>(hd_swa));
  w.set_u32(a + "attention.value_length_swa", static_cast<uint32_t>(hd_swa));
  w.set_f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set_f32(a + "rope.freq_base", s.rope_theta);
  w.set_f32(a + "rope.freq_base_swa", s.rope_theta_swa > 0 ? s.rope_theta_swa : 10000.0f);
  w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(hd_full));
  w.set_u32(a + "rope.dimension_count_swa", static_cast<uint32_t>(hd_swa));
  w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(s.n_swa));
  std::vector<bool> swa;
  for (int64_t l = 0; l < L; ++l) swa.push_back(!full(l));
  w.set(a + "attention.sliding_window_pattern", GgufValue::bool_array(swa));
  w.set_u32(a + "attention.shared_kv_layers", static_cast<uint32_t>(s.n_kv_shared));
  w.set_u32(a + "embedding_length_per_layer_input", static_cast<uint32_t>(PL));
  if (s.final_softcap > 0) w.set_f32(a + "final_logit_softcapping", s.final_softcap);
  if (s.n_expert > 0) {  // (26B-A4B: every layer's FFN has experts beside it)
    w.set_u32(a + "expert_count", static_cast<uint32_t>(s.n_expert));
    w.set_u32(a + "expert_used_count", static_cast<uint32_t>(s.n_expert_used));
    w.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(s.n_ff_exp));
  }
  if (vocab) copy_tokenizer_keys(*vocab, w);
  else dummy_synthetic_vocab(w, s.n_vocab);

  const DummyTensors t = DummyTensors::for_options(w, o);
  const float spread = t.spread, e_spread = t.e_spread;
  TM_TRY(t.matrix("token_embd.weight", s.n_vocab, E, e_spread));
  TM_TRY(t.f32("output_norm.weight", E, 1.0f, 0.1f));
  if (!s.tied) TM_TRY(t.matrix("output.weight", s.n_vocab, E, e_spread));
  {  // proportional RoPE on the full layers: the unrotated pairs' frequencies divided by 1e30
    std::vector<float> f(static_cast<size_t>(hd_full / 2), 1e30f);
    for (int64_t i = 0; i < rot_pairs && i < hd_full / 2; ++i) f[static_cast<size_t>(i)] = 1.0f;
    TM_TRY(w.add_tensor("rope_freqs.weight", DType::F32, {hd_full / 2}, [f](uint8_t* dst, size_t) -> Status {
      std::memcpy(dst, f.data(), f.size() * sizeof(float));
      return {};
    }));
  }
  if (PL > 0) {
    TM_TRY(t.matrix("per_layer_token_embd.weight", s.n_vocab, L * PL, e_spread));
    TM_TRY(t.matrix("per_layer_model_proj.weight", L * PL, E, spread));
    TM_TRY(t.f32("per_layer_proj_norm.weight", PL, 1.0f, 0.1f));
  }
  // q.k is not scaled (attention scale 1): q/k norm weights near 1 would make every softmax one-hot at these
  // random weights, where the two sides' last-bit differences flip whole attention rows; near
  // 1/sqrt(sqrt(head_dim)) q.k spans what a 1/sqrt(head_dim) scale would give
  const float qk_norm = 1.0f / std::sqrt(std::sqrt(static_cast<float>(hd_full)));
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    const int64_t hd = full(l) ? hd_full : hd_swa, kvh = full(l) ? kv_full : kv_swa, ff = ff_of(l);
    const bool has_kv = s.n_kv_shared == 0 || l < from;
    TM_TRY(t.f32(p + "attn_norm.weight", E, 1.0f, 0.1f));
    TM_TRY(t.matrix(p + "attn_q.weight", s.n_head * hd, E, spread));
    if (has_kv) {
      TM_TRY(t.matrix(p + "attn_k.weight", kvh * hd, E, spread));
      if (!(s.k_eq_v && full(l))) TM_TRY(t.matrix(p + "attn_v.weight", kvh * hd, E, spread));
      TM_TRY(t.f32(p + "attn_k_norm.weight", hd, qk_norm, 0.05f));
    }
    TM_TRY(t.f32(p + "attn_q_norm.weight", hd, qk_norm, 0.05f));
    TM_TRY(t.matrix(p + "attn_output.weight", E, s.n_head * hd, spread));
    TM_TRY(t.f32(p + "post_attention_norm.weight", E, 1.0f, 0.1f));
    TM_TRY(t.f32(p + "ffn_norm.weight", E, 1.0f, 0.1f));
    TM_TRY(t.matrix(p + "ffn_gate.weight", ff, E, spread));
    TM_TRY(t.matrix(p + "ffn_up.weight", ff, E, spread));
    TM_TRY(t.matrix(p + "ffn_down.weight", E, ff, spread));
    TM_TRY(t.f32(p + "post_ffw_norm.weight", E, 1.0f, 0.1f));
    if (s.n_expert > 0) {  // gate and up as one ffn_gate_up_exps, as the converter writes them
      const int64_t X = s.n_expert, FE = s.n_ff_exp;
      TM_TRY(t.matrix(p + "ffn_gate_inp.weight", X, E, e_spread));
      TM_TRY(t.f32(p + "ffn_gate_inp.scale", E, 1.0f, 0.3f));
      TM_TRY(t.experts(p + "ffn_gate_up_exps.weight", X, 2 * FE, E, spread));
      TM_TRY(t.experts(p + "ffn_down_exps.weight", X, E, FE, spread));
      TM_TRY(t.f32(p + "ffn_down_exps.scale", X, 1.0f, 0.3f));
      for (const char* n : {"pre_ffw_norm_2", "post_ffw_norm_1", "post_ffw_norm_2"})
        TM_TRY(t.f32(p + n + ".weight", E, 1.0f, 0.1f));
    }
    if (PL > 0) {
      TM_TRY(t.matrix(p + "inp_gate.weight", PL, E, spread));
      TM_TRY(t.matrix(p + "proj.weight", E, PL, spread));
      TM_TRY(t.f32(p + "post_norm.weight", E, 1.0f, 0.1f));
    }
    if (s.layer_out_scale) TM_TRY(t.f32(p + "layer_output_scale.weight", 1, 0.7f, 0.2f));
  }
  return w.write(out_path);
}

}  // namespace tmill
