// Random-weight models of the classic families -- gpt2, starcoder, gptneox, falcon, bloom, mpt, olmo,
// baichuan, chatglm, codeshell, jais, jais2, plamo, refact, nemotron, qwen -- with the keys, tensor names and shapes llama.cpp's
// converter writes for them: one attn_qkv (q, k, v rows), but q/k/v apart for baichuan, olmo, plamo and
// refact; LayerNorms with their biases (olmo's have none; baichuan's, chatglm's, plamo's and refact's are
// RMS norms);
// chatglm's gate and up in one ffn_up; learned positions (position_embd: gpt2, starcoder, an mpt that
// has them); bloom's token_embd_norm; gptneox's parallel-residual flag; mpt's and jais's ALiBi bias key,
// mpt's q/k/v clamp; jais's gated FFN with biases.
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "convert/dummy.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "quant/quant.h"

namespace tmill {

bool is_classic_dummy_arch(const std::string& a) {
  return a == "gpt2" || a == "starcoder" || a == "gptneox" || a == "falcon" || a == "bloom" || a == "mpt" ||
         a == "olmo" || a == "baichuan" || a == "chatglm" || a == "codeshell" || a == "refact" || a == "jais2" ||
         a == "jais" || a == "plamo" || a == "nemotron" || a == "qwen";
}

Status write_dummy_classic(const DummyOptions& o, const std::string& out_path) {
  ModelShape s = o.shape;
  const std::string& arch = s.arch;
  TM_TRY(dummy_whole_file_dtype(o.dtype, s.arch));
  const int64_t E = s.n_embd, hd = s.head_dim, QD = s.n_head * hd, KD = s.n_head_kv * hd, F = s.n_ff;
  if (E <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 || s.n_head % s.n_head_kv != 0 || hd % 2 != 0 ||
      F <= 0 || s.n_vocab <= 0)
    return Error{"invalid model dimensions"};
  if (QD != E) return Error{fmt::format("{} needs n_head * head_dim == n_embd ({} * {} != {})", arch, s.n_head, hd, E)};
  const bool gpt2 = arch == "gpt2" || arch == "starcoder", neox = arch == "gptneox", falcon = arch == "falcon";
  const bool bloom = arch == "bloom", mpt = arch == "mpt", olmo = arch == "olmo", baichuan = arch == "baichuan";
  const bool chatglm = arch == "chatglm", refact = arch == "refact";
  const bool codeshell = arch == "codeshell" || arch == "jais2";  // (jais2: codeshell's tensors, ReLU squared)
  const bool jais = arch == "jais";    // (gpt2's layer with a gated FFN, ALiBi)
  const bool plamo = arch == "plamo";  // (the llama layer in the parallel block)
  const bool nemotron = arch == "nemotron";  // (q/k/v apart, LayerNorms, the ungated ReLU-squared FFN, biases)
  const bool qwen = arch == "qwen";  // (Qwen-1: attn_qkv with its bias, NeoX, FFN rows half feed_forward_length)
  const bool rms = baichuan || chatglm || refact || plamo || qwen;  // (the others: LayerNorms)
  if (qwen && (s.n_head_kv != s.n_head || F % 2 != 0))
    return Error{"qwen has as many K/V heads as query heads and an even feed_forward_length (twice the FFN's rows)"};
  if (s.sequential_block && !neox) return Error{"a sequential block (use_parallel_residual false) is gptneox's"};
  if (s.attn_norm_2 && !falcon) return Error{"attn_norm_2 is falcon's (40B / 180B)"};
  if ((s.mpt_biases || s.mpt_pos_embd) && !mpt) return Error{"optional biases and positions are mpt's"};
  if (s.max_alibi_bias > 0 && !mpt && !jais) return Error{"the ALiBi bias key is mpt's and jais's"};
  if (s.clamp_kqv > 0 && !mpt && !olmo) return Error{"attention.clamp_kqv is mpt's and olmo's"};
  if ((neox || baichuan || jais || plamo || nemotron || qwen || arch == "codeshell") && s.tied)
    return Error{fmt::format("{} has an untied output (llama.cpp requires it)", arch)};
  const int64_t n_rot = s.n_rot > 0 ? s.n_rot : hd;
  if ((falcon || codeshell || plamo) && n_rot != hd)
    return Error{fmt::format("{} rotates the whole head (llama.cpp requires it)", arch)};

  GgufWriter w;
  TM_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> vocab, open_dummy_vocab(o.vocab_path));
  if (vocab) s.n_vocab = dummy_vocab_size(*vocab);
  const std::string a = arch + ".";
  dummy_header(w, s, o.dtype);
  w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(F));
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
  w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  if (rms) w.set_f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  else w.set_f32(a + "attention.layer_norm_epsilon", s.rms_eps);
  if (neox || falcon || olmo || baichuan || chatglm || codeshell || plamo || nemotron || qwen)
    w.set_f32(a + "rope.freq_base", s.rope_theta);
  if (neox || chatglm || nemotron || qwen) w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(n_rot));
  if (neox) {
    w.set_bool(a + "use_parallel_residual", !s.sequential_block);
  }
  if ((mpt || jais) && s.max_alibi_bias > 0) w.set_f32(a + "attention.max_alibi_bias", s.max_alibi_bias);
  if (s.clamp_kqv > 0) w.set_f32(a + "attention.clamp_kqv", s.clamp_kqv);
  if (vocab) copy_tokenizer_keys(*vocab, w);
  else dummy_synthetic_vocab(w, s.n_vocab);

  const DummyTensors t = DummyTensors::for_options(w, o);
  const float spread = t.spread, e_spread = t.e_spread;
  // a norm: weight around 1 (olmo: none), bias around 0 where the family has one (baichuan: RMS, none)
  const bool norm_bias = !olmo && !rms && (!mpt || s.mpt_biases);
  auto add_norm = [&](const std::string& name) -> Status {
    if (olmo) return {};
    TM_TRY(t.f32(name + ".weight", E, 1.0f, 0.1f));
    if (norm_bias) TM_TRY(t.f32(name + ".bias", E, 0.0f, 0.1f));
    return {};
  };
  TM_TRY(t.matrix("token_embd.weight", s.n_vocab, E, e_spread));
  if (gpt2 || s.mpt_pos_embd) TM_TRY(t.matrix("position_embd.weight", s.n_ctx, E, e_spread));
  if (bloom) TM_TRY(add_norm("token_embd_norm"));
  TM_TRY(add_norm("output_norm"));
  if (!s.tied) TM_TRY(t.matrix("output.weight", s.n_vocab, E, e_spread));
  // biases on attn_qkv, attn_output and the FFN
  const bool biased = gpt2 || neox || bloom || codeshell || jais || nemotron || (mpt && s.mpt_biases);
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    TM_TRY(add_norm(p + "attn_norm"));
    if (s.attn_norm_2) TM_TRY(add_norm(p + "attn_norm_2"));
    if (olmo || baichuan || refact || plamo || nemotron) {  // q/k/v apart (convert_hf_to_gguf.py splits baichuan's W_pack)
      TM_TRY(t.matrix(p + "attn_q.weight", QD, E, spread));
      TM_TRY(t.matrix(p + "attn_k.weight", KD, E, spread));
      TM_TRY(t.matrix(p + "attn_v.weight", KD, E, spread));
    } else {
      TM_TRY(t.matrix(p + "attn_qkv.weight", QD + 2 * KD, E, spread));
      if (biased || chatglm || qwen) TM_TRY(t.f32(p + "attn_qkv.bias", QD + 2 * KD, 0.0f, 0.1f));
    }
    TM_TRY(t.matrix(p + "attn_output.weight", E, QD, spread));
    if (biased) TM_TRY(t.f32(p + "attn_output.bias", E, 0.0f, 0.05f));
    if (!falcon && !plamo) TM_TRY(add_norm(p + "ffn_norm"));  // (their FFN reads attn_norm's output)
    if (olmo || baichuan || refact || jais || plamo || qwen) {  // SwiGLU (jais: with biases; qwen: F / 2 rows)
      const int64_t rows = qwen ? F / 2 : F;
      TM_TRY(t.matrix(p + "ffn_gate.weight", rows, E, spread));
      TM_TRY(t.matrix(p + "ffn_up.weight", rows, E, spread));
      TM_TRY(t.matrix(p + "ffn_down.weight", E, rows, spread));
      if (jais) {
        TM_TRY(t.f32(p + "ffn_gate.bias", F, 0.0f, 0.1f));
        TM_TRY(t.f32(p + "ffn_up.bias", F, 0.0f, 0.1f));
        TM_TRY(t.f32(p + "ffn_down.bias", E, 0.0f, 0.05f));
      }
      continue;
    }
    if (chatglm) {  // SwiGLU, gate and up rows in one ffn_up
      TM_TRY(t.matrix(p + "ffn_up.weight", 2 * F, E, spread));
      TM_TRY(t.matrix(p + "ffn_down.weight", E, F, spread));
      continue;
    }
    TM_TRY(t.matrix(p + "ffn_up.weight", F, E, spread));
    if (biased) TM_TRY(t.f32(p + "ffn_up.bias", F, 0.0f, 0.1f));
    TM_TRY(t.matrix(p + "ffn_down.weight", E, F, spread));
    if (biased) TM_TRY(t.f32(p + "ffn_down.bias", E, 0.0f, 0.05f));
  }
  return w.write(out_path);
}

}  // namespace tmill
