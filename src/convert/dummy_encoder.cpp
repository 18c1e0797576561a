// Random-weight BERT-family encoders (bert, nomic-bert, jina-bert-v2) with the tensor names, shapes and keys
// llama.cpp's converter writes, a synthetic WordPiece vocabulary (or --vocab's) and the pooling type
// in `<arch>.pooling_type`; `--pooling rank` adds the cross-encoder's classification head
// (cls.weight / cls.bias, cls.output.weight / cls.output.bias with one output).
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "convert/dummy.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "quant/quant.h"

namespace tmill {
namespace {

// [PAD] [UNK] [CLS] [SEP] [MASK], then single characters as word starts ("▁a") and continuations
// ("a"), some words and suffixes, then filler words.
void wordpiece_vocab(GgufWriter& w, int64_t n_vocab) {
  std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  std::vector<int32_t> types = {3, 3, 3, 3, 3};
  const std::string kW = "\xe2\x96\x81";
  for (char c : std::string("abcdefghijklmnopqrstuvwxyz0123456789.,!?'-:;()\"")) {
    tokens.push_back(kW + c);
    tokens.push_back(std::string(1, c));
  }
  for (const char* s : {"the", "hello", "world", "token", "mill", "embed", "query", "document", "cat", "dog", "is",
                        "of", "and", "to", "in", "it", "fast", "search", "rank"})
    tokens.push_back(kW + s);
  for (const char* s : {"ing", "ed", "er", "ly", "es", "tion"}) tokens.push_back(s);
  types.resize(tokens.size(), 1);
  for (int64_t i = static_cast<int64_t>(tokens.size()); i < n_vocab; ++i) {
    tokens.push_back(fmt::format("{}w{}", kW, i));
    types.push_back(1);
  }
  tokens.resize(static_cast<size_t>(n_vocab));
  types.resize(static_cast<size_t>(n_vocab));
  w.set_string("tokenizer.ggml.model", "bert");
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(std::move(tokens)));
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  w.set_u32("tokenizer.ggml.token_type_count", 2);
  w.set_u32("tokenizer.ggml.padding_token_id", 0);
  w.set_u32("tokenizer.ggml.unknown_token_id", 1);
  w.set_u32("tokenizer.ggml.cls_token_id", 2);
  w.set_u32("tokenizer.ggml.bos_token_id", 2);  // llama.cpp's [CLS] is its BOS (default id 101 otherwise)
  w.set_u32("tokenizer.ggml.seperator_token_id", 3);
  w.set_u32("tokenizer.ggml.mask_token_id", 4);
}

int pooling_value(const std::string& p) {
  if (p == "none") return 0;
  if (p == "mean") return 1;
  if (p == "cls") return 2;
  if (p == "last") return 3;
  if (p == "rank") return 4;
  return -1;
}

}  // namespace

bool is_encoder_dummy_arch(const std::string& arch) { return arch == "bert" || arch == "nomic-bert" || arch == "jina-bert-v2"; }

Result<int> dummy_pooling_value(const std::string& pooling) {
  const int v = pooling_value(pooling);
  if (v < 0) return Error{fmt::format("--pooling '{}': one of none, mean, cls, last, rank", pooling)};
  return v;
}

Status write_dummy_encoder(const DummyOptions& o, const std::string& out_path) {
  ModelShape s = o.shape;
  const bool nomic = s.arch == "nomic-bert", jina = s.arch == "jina-bert-v2";
  if (o.dtype != DType::F32 && o.dtype != DType::F16 && o.dtype != DType::Q8_0)
    return Error{fmt::format("--dtype {}: encoder dummies are F32, F16 or Q8_0", dtype_name(o.dtype))};
  if (s.n_embd <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_ff <= 0 || s.n_embd % s.n_head != 0)
    return Error{"invalid encoder dimensions (n_embd must be a multiple of n_head)"};
  if (s.n_head_kv != 0 && s.n_head_kv != s.n_head) return Error{"encoders have no grouped-query attention (n_head_kv = n_head)"};
  const std::string pooling = o.pooling.empty() ? (nomic || jina ? "mean" : "cls") : o.pooling;
  TM_ASSIGN_OR_RETURN(int pool_type, dummy_pooling_value(pooling));
  if (pool_type == 3 || pool_type == 0) return Error{fmt::format("--pooling {} does not suit an encoder (mean, cls or rank)", pooling)};
  const bool rank = pool_type == 4;
  if (rank && (nomic || jina)) return Error{"--pooling rank: the classification head is bert's only"};

  GgufWriter w;
  TM_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> vocab, open_dummy_vocab(o.vocab_path));
  if (vocab) {
    if (vocab->get_string("tokenizer.ggml.model").value_or("") != "bert")
      return Error{fmt::format("{}: encoders need a WordPiece (tokenizer.ggml.model bert) vocabulary", o.vocab_path)};
    s.n_vocab = dummy_vocab_size(*vocab);
  }
  if (s.n_vocab < 200) return Error{"encoder dummies need --n-vocab >= 200"};
  const std::string a = s.arch + ".";
  w.set_string("general.architecture", s.arch);
  w.set_string("general.name", fmt::format("dummy {} ({})", s.name, dtype_name(o.dtype)));
  w.set_u32("general.file_type", o.dtype == DType::F32 ? 0 : o.dtype == DType::F16 ? 1 : 7);
  if (o.dtype == DType::Q8_0) w.set_u32("general.quantization_version", 2);
  w.set_u32(a + "context_length", static_cast<uint32_t>(s.n_ctx));
  w.set_u32(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_u32(a + "block_count", static_cast<uint32_t>(s.n_layer));
  w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
  w.set_f32(a + "attention.layer_norm_epsilon", 1e-12f);
  w.set_bool(a + "attention.causal", false);
  w.set_u32(a + "pooling_type", static_cast<uint32_t>(pool_type));
  if (nomic) w.set_f32(a + "rope.freq_base", s.rope_theta);
  if (vocab) copy_tokenizer_keys(*vocab, w);
  else wordpiece_vocab(w, s.n_vocab);

  auto pool = std::make_shared<ThreadPool>(o.threads > 0 ? o.threads : default_thread_count());
  const uint64_t seed = o.seed;
  auto add_matrix = [&](const std::string& name, int64_t rows, int64_t cols, float spread,
                        std::optional<DType> force = std::nullopt) -> Status {
    DType type = force.value_or(o.dtype);
    if (cols % dtype_info(type).block_size != 0) type = DType::F16;
    return w.add_tensor(name, type, {cols, rows}, dummy_rows(pool, seed, name, rows, cols, type, spread));
  };
  auto add_vector = [&](const std::string& name, int64_t n, float center, float spread) -> Status {
    return w.add_tensor(name, DType::F32, {n}, dummy_f32(seed, name, n, center, spread));
  };
  const int64_t E = s.n_embd, F = s.n_ff;
  // Embedding rows get a wider spread than the matrices so the LayerNorms see real variation.
  TM_TRY(add_matrix("token_embd.weight", s.n_vocab, E, 0.5f));
  // F32 as llama.cpp's converter keeps it (ggml adds its row to the embeddings: no F16 there)
  TM_TRY(add_matrix("token_types.weight", 2, E, 0.1f, DType::F32));
  if (!nomic && !jina) TM_TRY(add_matrix("position_embd.weight", s.n_ctx, E, 0.1f));
  TM_TRY(add_vector("token_embd_norm.weight", E, 1.0f, 0.1f));
  TM_TRY(add_vector("token_embd_norm.bias", E, 0.0f, 0.05f));
  const float ws = 0.08f;
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    if (nomic) {
      TM_TRY(add_matrix(p + "attn_qkv.weight", 3 * E, E, ws));
      TM_TRY(add_matrix(p + "attn_output.weight", E, E, ws));
    } else {
      for (const char* t : {"attn_q", "attn_k", "attn_v", "attn_output"}) {
        TM_TRY(add_matrix(p + t + ".weight", E, E, ws));
        TM_TRY(add_vector(p + t + ".bias", E, 0.0f, 0.05f));
      }
    }
    TM_TRY(add_vector(p + "attn_output_norm.weight", E, 1.0f, 0.1f));
    TM_TRY(add_vector(p + "attn_output_norm.bias", E, 0.0f, 0.05f));
    TM_TRY(add_matrix(p + "ffn_up.weight", F, E, ws));
    if (jina) {  // gated GELU as jina-embeddings-v2's converted files: up and gate without bias, down with
      TM_TRY(add_matrix(p + "ffn_gate.weight", F, E, ws));
      TM_TRY(add_matrix(p + "ffn_down.weight", E, F, ws));
      TM_TRY(add_vector(p + "ffn_down.bias", E, 0.0f, 0.05f));
    } else if (nomic) {
      TM_TRY(add_matrix(p + "ffn_gate.weight", F, E, ws));
      TM_TRY(add_matrix(p + "ffn_down.weight", E, F, ws));
    } else {
      TM_TRY(add_vector(p + "ffn_up.bias", F, 0.0f, 0.05f));
      TM_TRY(add_matrix(p + "ffn_down.weight", E, F, ws));
      TM_TRY(add_vector(p + "ffn_down.bias", E, 0.0f, 0.05f));
    }
    TM_TRY(add_vector(p + "layer_output_norm.weight", E, 1.0f, 0.1f));
    TM_TRY(add_vector(p + "layer_output_norm.bias", E, 0.0f, 0.05f));
  }
  if (rank) {
    TM_TRY(add_matrix("cls.weight", E, E, 0.2f));
    TM_TRY(add_vector("cls.bias", E, 0.0f, 0.05f));
    TM_TRY(add_matrix("cls.output.weight", 1, E, 0.5f));
    TM_TRY(add_vector("cls.output.bias", 1, 0.0f, 0.1f));
  }
  return w.write(out_path);
}

}  // namespace tmill
