// Random-weight attention-free stacks -- mamba (Mamba-1, Falcon-Mamba) and mamba2 -- with the keys,
// tensor names and shapes llama.cpp's converter writes: head_count 0 and feed_forward_length 0, ssm.*,
// each layer attn_norm and one mixer. The decay rates A are negative (-exp(A_log)), D and the dt bias of
// the order the checkpoints have.
#include <cmath>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "convert/dummy.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "quant/quant.h"

namespace tmill {

bool is_mamba_dummy_arch(const std::string& arch) { return arch == "mamba" || arch == "mamba2"; }

Status write_dummy_mamba(const DummyOptions& o, const std::string& out_path) {
  ModelShape s = o.shape;
  const bool m1 = s.arch == "mamba";
  TM_TRY(dummy_whole_file_dtype(o.dtype, s.arch));
  const int64_t E = s.n_embd, DI = s.ssm_d_inner > 0 ? s.ssm_d_inner : 2 * E;
  const int64_t DS = s.ssm_d_state > 0 ? s.ssm_d_state : (m1 ? 16 : 128), K = s.ssm_d_conv > 0 ? s.ssm_d_conv : 4;
  const int64_t R = s.ssm_dt_rank > 0 ? s.ssm_dt_rank : (E + 15) / 16;
  const int64_t H = m1 ? DI : (s.ssm_n_head > 0 ? s.ssm_n_head : DI / 64), G = m1 ? 0 : (s.ssm_n_group > 0 ? s.ssm_n_group : 1);
  if (E <= 0 || s.n_layer <= 0 || s.n_vocab <= 0) return Error{"invalid model dimensions"};
  if (m1 && DI != 2 * E) return Error{"mamba's inner width is 2 x n_embd (llama.cpp supports that expansion only)"};
  if (!m1 && (H <= 0 || DI % H != 0 || H % G != 0))
    return Error{fmt::format("mamba2: the inner width {} must split into {} heads, and those into {} groups", DI, H, G)};
  if ((s.ssm_dt_rank > 0 || s.ssm_dt_b_c_rms) && !m1) return Error{"dt's rank and its norms are mamba's (Mamba-1's)"};

  GgufWriter w;
  TM_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> vocab, open_dummy_vocab(o.vocab_path));
  if (vocab) s.n_vocab = dummy_vocab_size(*vocab);
  const std::string a = s.arch + ".";
  w.set_string("general.architecture", s.arch);
  w.set_string("general.name", fmt::format("dummy {} ({})", s.name, dtype_name(o.dtype)));
  w.set_u32("general.file_type", dummy_file_type(o.dtype));
  if (dtype_info(o.dtype).block_size > 1) w.set_u32("general.quantization_version", 2);
  // as convert_hf_to_gguf.py writes Mamba / Mamba-2
  w.set_u32(a + "context_length", static_cast<uint32_t>(s.n_ctx));
  w.set_u32(a + "embedding_length", static_cast<uint32_t>(E));
  w.set_u32(a + "feed_forward_length", 0);
  w.set_u32(a + "attention.head_count", 0);
  w.set_u32(a + "block_count", static_cast<uint32_t>(s.n_layer));
  w.set_u32(a + "ssm.conv_kernel", static_cast<uint32_t>(K));
  w.set_u32(a + "ssm.inner_size", static_cast<uint32_t>(DI));
  w.set_u32(a + "ssm.state_size", static_cast<uint32_t>(DS));
  w.set_u32(a + "ssm.time_step_rank", static_cast<uint32_t>(m1 ? R : H));
  if (!m1) w.set_u32(a + "ssm.group_count", static_cast<uint32_t>(G));
  w.set_f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  if (m1) w.set_bool(a + "ssm.dt_b_c_rms", s.ssm_dt_b_c_rms);
  if (vocab) copy_tokenizer_keys(*vocab, w);
  else dummy_synthetic_vocab(w, s.n_vocab);

  auto pool = std::make_shared<ThreadPool>(o.threads > 0 ? o.threads : default_thread_count());
  const uint64_t seed = o.seed;
  // (as the other dummies: uniform in +-std sqrt(3), else +-0.05 for the embedding and output, +-0.035 for
  // the other matrices)
  const float spread = o.std > 0 ? o.std * std::sqrt(3.0f) : 0.035f, e_spread = o.std > 0 ? spread : 0.05f;
  // 2-D: [rows, cols] in the dummy's type (F16 where a row is not whole blocks); small ones stay F32
  auto add_matrix = [&](const std::string& name, int64_t rows, int64_t cols, float spr, bool f32 = false) -> Status {
    DType type = f32 ? DType::F32 : o.dtype;
    if (cols % dtype_info(type).block_size != 0) type = DType::F16;
    return w.add_tensor(name, type, {cols, rows}, dummy_rows(pool, seed, name, rows, cols, type, spr));
  };
  // F32 values centered on `center` (1-D [n], or 2-D [cols, rows] as ne)
  auto add_f32 = [&](const std::string& name, std::vector<int64_t> ne, float center, float spr) -> Status {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    return w.add_tensor(name, DType::F32, ne, dummy_f32(seed, name, n, center, spr));
  };
  TM_TRY(add_matrix("token_embd.weight", s.n_vocab, E, e_spread));
  TM_TRY(add_f32("output_norm.weight", {E}, 1.0f, 0.1f));
  if (!s.tied) TM_TRY(add_matrix("output.weight", s.n_vocab, E, e_spread));
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    TM_TRY(add_f32(p + "attn_norm.weight", {E}, 1.0f, 0.1f));
    if (m1) {  // x, z; the convolution over x; x_proj (dt, B, C); dt_proj; A (d_state per channel), D
      TM_TRY(add_matrix(p + "ssm_in.weight", 2 * DI, E, spread));
      TM_TRY(add_f32(p + "ssm_conv1d.weight", {K, DI}, 0.0f, 0.5f));
      TM_TRY(add_f32(p + "ssm_conv1d.bias", {DI}, 0.0f, 0.1f));
      TM_TRY(add_matrix(p + "ssm_x.weight", R + 2 * DS, DI, spread));
      TM_TRY(add_matrix(p + "ssm_dt.weight", DI, R, 4 * spread));
      TM_TRY(add_f32(p + "ssm_dt.bias", {DI}, -2.0f, 1.5f));  // softplus of the order of 0.1
      TM_TRY(add_f32(p + "ssm_a", {DS, DI}, -4.0f, 3.0f));     // -exp(A_log): decay rates in [-7, -1]
      TM_TRY(add_f32(p + "ssm_d", {DI}, 1.0f, 0.5f));
    } else {  // z, xBC, dt; the convolution over xBC; per head dt bias, A, D; the grouped norm
      const int64_t CD = DI + 2 * G * DS;
      TM_TRY(add_matrix(p + "ssm_in.weight", DI + CD + H, E, spread));
      TM_TRY(add_f32(p + "ssm_conv1d.weight", {K, CD}, 0.0f, 0.5f));
      TM_TRY(add_f32(p + "ssm_conv1d.bias", {CD}, 0.0f, 0.1f));
      TM_TRY(add_f32(p + "ssm_dt.bias", {H}, -2.0f, 1.5f));
      TM_TRY(add_f32(p + "ssm_a", {1, H}, -4.0f, 3.0f));
      TM_TRY(add_f32(p + "ssm_d", {1, H}, 1.0f, 0.5f));
      TM_TRY(add_f32(p + "ssm_norm.weight", {DI / G, G}, 1.0f, 0.1f));
    }
    TM_TRY(add_matrix(p + "ssm_out.weight", E, DI, spread));
  }
  return w.write(out_path);
}

}  // namespace tmill
