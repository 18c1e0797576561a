// Random-weight Phi-3.5-MoE models (GGUF "phimoe") with the keys, tensor names and shapes llama.cpp's
// converter writes: q/k/v in one attn_qkv with its bias, attn_output with a bias, RMS norms with biases,
// softmax experts of feed_forward_length rows (the router F32, as llama.cpp's quantize leaves it), an
// untied output with a bias.
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "convert/dummy.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "quant/quant.h"

namespace tmill {

Status write_dummy_phimoe(const DummyOptions& o, const std::string& out_path) {
  ModelShape s = o.shape;
  TM_TRY(dummy_whole_file_dtype(o.dtype, s.arch));
  const int64_t E = s.n_embd, hd = s.head_dim, QD = s.n_head * hd, KD = s.n_head_kv * hd, F = s.n_ff;
  if (E <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 || s.n_head % s.n_head_kv != 0 || hd % 2 != 0 ||
      F <= 0 || s.n_vocab <= 0 || s.n_expert < 2 || s.n_expert_used < 1 || s.n_expert_used > s.n_expert || QD != E)
    return Error{"invalid model dimensions (phimoe: n_head * head_dim == n_embd, experts)"};
  GgufWriter w;
  TM_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> vocab, open_dummy_vocab(o.vocab_path));
  if (vocab) s.n_vocab = dummy_vocab_size(*vocab);
  const std::string a = "phimoe.";
  dummy_header(w, s, o.dtype);
  dummy_uniform_layer_keys(w, s);
  w.set_u32(a + "expert_count", static_cast<uint32_t>(s.n_expert));
  w.set_u32(a + "expert_used_count", static_cast<uint32_t>(s.n_expert_used));
  if (vocab) copy_tokenizer_keys(*vocab, w);
  else dummy_synthetic_vocab(w, s.n_vocab);

  const DummyTensors t = DummyTensors::for_options(w, o);
  const float spread = t.spread, e_spread = t.e_spread;
  const DummyTensors router{w, t.pool, o.seed, DType::F32};
  auto norm = [&](const std::string& name) -> Status {
    TM_TRY(t.f32(name + ".weight", E, 1.0f, 0.1f));
    return t.f32(name + ".bias", E, 0.0f, 0.1f);
  };
  TM_TRY(t.matrix("token_embd.weight", s.n_vocab, E, e_spread));
  TM_TRY(norm("output_norm"));
  TM_TRY(t.matrix("output.weight", s.n_vocab, E, e_spread));
  TM_TRY(t.f32("output.bias", s.n_vocab, 0.0f, 0.1f));
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    TM_TRY(norm(p + "attn_norm"));
    TM_TRY(t.matrix(p + "attn_qkv.weight", QD + 2 * KD, E, spread));
    TM_TRY(t.f32(p + "attn_qkv.bias", QD + 2 * KD, 0.0f, 0.1f));
    TM_TRY(t.matrix(p + "attn_output.weight", E, QD, spread));
    TM_TRY(t.f32(p + "attn_output.bias", E, 0.0f, 0.05f));
    TM_TRY(norm(p + "ffn_norm"));
    // (a wider router, so that routing is not a near tie)
    TM_TRY(router.matrix(p + "ffn_gate_inp.weight", s.n_expert, E, 4 * spread));
    TM_TRY(t.experts(p + "ffn_gate_exps.weight", s.n_expert, F, E, spread));
    TM_TRY(t.experts(p + "ffn_up_exps.weight", s.n_expert, F, E, spread));
    TM_TRY(t.experts(p + "ffn_down_exps.weight", s.n_expert, E, F, spread));
  }
  return w.write(out_path);
}

}  // namespace tmill
