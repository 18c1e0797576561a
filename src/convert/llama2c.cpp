#include "convert/llama2c.h"

#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/mmap.h"
#include "formats/gguf.h"

namespace tmill {
namespace {

struct Header {
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
};

// SentencePiece token types as GGUF stores them (llama.cpp's llama_token_type).
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6;

Result<Vocab> read_tokenizer(const std::string& path, int32_t vocab_size) {
  TM_ASSIGN_OR_RETURN(std::string data, read_file(path));
  size_t pos = 0;
  auto take = [&](void* dst, size_t n) -> bool {
    if (data.size() - pos < n) return false;
    std::memcpy(dst, data.data() + pos, n);
    pos += n;
    return true;
  };
  int32_t max_len;
  if (!take(&max_len, 4)) return Error{fmt::format("{}: truncated tokenizer header", path)};
  Vocab v;
  for (int32_t i = 0; i < vocab_size; ++i) {
    float score;
    int32_t len;
    if (!take(&score, 4) || !take(&len, 4)) return Error{fmt::format("{}: truncated at token {}", path, i)};
    if (len < 0 || static_cast<size_t>(len) > data.size() - pos)
      return Error{fmt::format("{}: token {} has invalid length {}", path, i, len)};
    std::string piece = data.substr(pos, static_cast<size_t>(len));
    pos += static_cast<size_t>(len);
    int32_t type = kNormal;
    if (i == 0) {
      piece = "<unk>";
      type = kUnknown;
    } else if (i == 1) {
      piece = "<s>";
      type = kControl;
    } else if (i == 2) {
      piece = "</s>";
      type = kControl;
    } else if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece[5] == '>') {
      type = kByte;
    } else {
      // llama2.c stores SentencePiece pieces with U+2581 already replaced by ' '; GGUF keeps U+2581.
      std::string out;
      for (char ch : piece) out += ch == ' ' ? std::string("\xe2\x96\x81") : std::string(1, ch);
      piece = out;
    }
    v.tokens.push_back(std::move(piece));
    v.scores.push_back(score);
    v.types.push_back(type);
  }
  return v;
}

}  // namespace

Status convert_llama2c_to_gguf(const std::string& model_bin, const std::string& tokenizer_bin,
                               const std::string& out_gguf, const Llama2cConvertOptions& opts) {
  TM_ASSIGN_OR_RETURN(MappedFile mf, MappedFile::open(model_bin));
  Header h;
  if (mf.size() < sizeof h) return Error{fmt::format("{}: too small for a llama2.c header", model_bin)};
  std::memcpy(&h, mf.data(), sizeof h);
  const bool shared = h.vocab_size > 0;
  const int64_t vocab = shared ? h.vocab_size : -static_cast<int64_t>(h.vocab_size);
  if (h.dim <= 0 || h.hidden_dim <= 0 || h.n_layers <= 0 || h.n_heads <= 0 || h.n_kv_heads <= 0 || vocab <= 0 ||
      h.seq_len <= 0 || h.dim % h.n_heads != 0 || h.n_heads % h.n_kv_heads != 0 || h.dim > (1 << 16) ||
      h.hidden_dim > (1 << 18) || h.n_layers > 1024 || vocab > (1 << 22) || h.seq_len > (1 << 24))
    return Error{fmt::format("{}: implausible llama2.c header", model_bin)};
  const int64_t dim = h.dim, hidden = h.hidden_dim, L = h.n_layers, hs = dim / h.n_heads;
  const int64_t kv_dim = hs * h.n_kv_heads;

  // Float offsets of each weight group, in file order.
  const float* base = reinterpret_cast<const float*>(mf.data() + sizeof h);
  const int64_t n_floats = static_cast<int64_t>((mf.size() - sizeof h) / 4);
  int64_t off = 0;
  auto take = [&](int64_t n) {
    int64_t o = off;
    off += n;
    return o;
  };
  const int64_t o_emb = take(vocab * dim), o_att = take(L * dim), o_wq = take(L * dim * dim),
                o_wk = take(L * kv_dim * dim), o_wv = take(L * kv_dim * dim), o_wo = take(L * dim * dim),
                o_ffn = take(L * dim), o_w1 = take(L * hidden * dim), o_w2 = take(L * dim * hidden),
                o_w3 = take(L * hidden * dim), o_fin = take(dim);
  take(static_cast<int64_t>(h.seq_len) * hs / 2 * 2);  // freq_cis_real / imag (unused: RoPE is computed)
  const int64_t o_cls = shared ? o_emb : take(vocab * dim);
  if (off > n_floats)
    return Error{fmt::format("{}: file has {} floats, the header implies {}", model_bin, n_floats, off)};

  TM_ASSIGN_OR_RETURN(Vocab v, read_tokenizer(tokenizer_bin, static_cast<int32_t>(vocab)));

  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", opts.name);
  w.set_u32("general.file_type", 0);  // ALL_F32
  w.set_u32("llama.context_length", static_cast<uint32_t>(h.seq_len));
  w.set_u32("llama.embedding_length", static_cast<uint32_t>(dim));
  w.set_u32("llama.block_count", static_cast<uint32_t>(L));
  w.set_u32("llama.feed_forward_length", static_cast<uint32_t>(hidden));
  w.set_u32("llama.rope.dimension_count", static_cast<uint32_t>(hs));
  w.set_u32("llama.attention.head_count", static_cast<uint32_t>(h.n_heads));
  w.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(h.n_kv_heads));
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_string("tokenizer.ggml.model", "llama");
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(v.tokens));
  w.set("tokenizer.ggml.scores", GgufValue::f32_array(v.scores));
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array(v.types));
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", false);

  auto add = [&](const std::string& name, int64_t offset, std::vector<int64_t> ne) {
    return w.add_tensor(name, DType::F32, std::move(ne), base + offset);
  };
  TM_TRY(add("token_embd.weight", o_emb, {dim, vocab}));
  TM_TRY(add("output_norm.weight", o_fin, {dim}));
  if (!shared) TM_TRY(add("output.weight", o_cls, {dim, vocab}));
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    TM_TRY(add(p + "attn_norm.weight", o_att + l * dim, {dim}));
    TM_TRY(add(p + "attn_q.weight", o_wq + l * dim * dim, {dim, dim}));
    TM_TRY(add(p + "attn_k.weight", o_wk + l * kv_dim * dim, {dim, kv_dim}));
    TM_TRY(add(p + "attn_v.weight", o_wv + l * kv_dim * dim, {dim, kv_dim}));
    TM_TRY(add(p + "attn_output.weight", o_wo + l * dim * dim, {dim, dim}));
    TM_TRY(add(p + "ffn_norm.weight", o_ffn + l * dim, {dim}));
    TM_TRY(add(p + "ffn_gate.weight", o_w1 + l * hidden * dim, {dim, hidden}));
    TM_TRY(add(p + "ffn_down.weight", o_w2 + l * dim * hidden, {hidden, dim}));
    TM_TRY(add(p + "ffn_up.weight", o_w3 + l * hidden * dim, {dim, hidden}));
  }
  return w.write(out_gguf);
}

}  // namespace tmill
