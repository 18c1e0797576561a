#include "convert/dummy.h"

#include <cmath>
#include <cstring>
#include <iterator>
#include <memory>

#include <fmt/format.h>

#include "core/log.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "quant/quant.h"
#include "tokenizer/vocab.h"

namespace tmill {
namespace {
uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

void fill_row(float* dst, int64_t n, uint64_t seed, const std::string& name, int64_t row, float center,
              float spread) {
  uint64_t s = seed ^ name_hash(name) ^ (static_cast<uint64_t>(row) * 0x632be59bd9b4e019ull);
  for (int64_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(splitmix64(s) >> 11) * (1.0 / 9007199254740992.0);  // [0,1)
    dst[i] = center + spread * static_cast<float>(2.0 * u - 1.0);
  }
}

namespace {

// llama.cpp's llama3 rope frequency factors (convert_hf_to_gguf.py, LlamaModel.generate_extra_tensors).
std::vector<float> llama3_rope_factors(const ModelShape& s) {
  const int64_t n_rot = s.head_dim;
  const double low_wavelen = static_cast<double>(s.rope_orig_ctx) / s.rope_low;
  const double high_wavelen = static_cast<double>(s.rope_orig_ctx) / s.rope_high;
  std::vector<float> f;
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const double freq = 1.0 / std::pow(static_cast<double>(s.rope_theta), 2.0 * i / n_rot);
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) f.push_back(1.0f);
    else if (wavelen > low_wavelen) f.push_back(s.rope_llama3_factor);
    else {
      const double smooth = (s.rope_orig_ctx / wavelen - s.rope_low) / (s.rope_high - s.rope_low);
      f.push_back(static_cast<float>(1.0 / ((1 - smooth) / s.rope_llama3_factor + smooth)));
    }
  }
  return f;
}

// Synthetic LongRoPE factors (phi3), n_rot/2 each: short ones rising from 1 to 2.5, long ones from
// there to ~ the context scale at the slowest frequencies (the shape of Phi-3.5's factors). The
// attention factor is the converter's: sqrt(1 + ln(scale) / ln(original context)).
struct LongRope {
  std::vector<float> short_f, long_f;
  float attn_factor;
};
LongRope longrope_factors(const ModelShape& s, int64_t n_rot) {
  LongRope r;
  const int64_t n = n_rot / 2;
  const double scale = static_cast<double>(s.n_ctx) / static_cast<double>(s.rope_orig_ctx);
  for (int64_t i = 0; i < n; ++i) {
    const double x = n > 1 ? static_cast<double>(i) / static_cast<double>(n - 1) : 0.0;
    const double sf = 1.0 + 1.5 * x * x * x;
    r.short_f.push_back(static_cast<float>(sf));
    r.long_f.push_back(static_cast<float>(sf * (1.0 + (scale - 1.0) * x * x)));
  }
  r.attn_factor = static_cast<float>(std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(s.rope_orig_ctx))));
  return r;
}

// Phi-3's added tokens, ids 32000.. in its vocabulary. llama.cpp sets attributes on <|endoftext|> by
// name for any model whose general.name says "phi-3"/"phi3" and fails to load a vocabulary without it.
constexpr const char* kPhi3Added[] = {"<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>",
                                      "<|placeholder3|>", "<|placeholder4|>", "<|system|>", "<|end|>",
                                      "<|placeholder5|>", "<|placeholder6|>", "<|user|>"};

// Tokens a Qwen3-Reranker dummy needs in a synthetic vocabulary (text, llama.cpp token type), placed
// at the end: the prompt's special tokens and the two answers the head reads.
const std::vector<std::pair<std::string, int32_t>> kRerankTokens = {
    {"<|im_start|>", 3}, {"<|im_end|>", 3}, {"yes", 1}, {"no", 1}};

// A coder vocabulary's fill-in-the-middle tokens and the keys that name them (DummyOptions::fim).
const std::vector<std::pair<std::string, std::string>> kFimTokens = {
    {"<|fim_prefix|>", "tokenizer.ggml.fim_pre_token_id"}, {"<|fim_suffix|>", "tokenizer.ggml.fim_suf_token_id"},
    {"<|fim_middle|>", "tokenizer.ggml.fim_mid_token_id"}, {"<|fim_pad|>", "tokenizer.ggml.fim_pad_token_id"},
    {"<|repo_name|>", "tokenizer.ggml.fim_rep_token_id"},  {"<|file_sep|>", "tokenizer.ggml.fim_sep_token_id"}};

void synthetic_vocab(GgufWriter& w, int64_t n_vocab, bool phi3, bool rerank, bool fim) {
  // A SentencePiece-style vocabulary: <unk> <s> </s>, 256 byte tokens, then filler pieces.
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens = {"<unk>", "<s>", "</s>"};
  scores = {0, 0, 0};
  types = {2, 3, 3};
  for (int b = 0; b < 256 && static_cast<int64_t>(tokens.size()) < n_vocab; ++b) {
    tokens.push_back(fmt::format("<0x{:02X}>", b));
    scores.push_back(0);
    types.push_back(6);
  }
  for (int64_t i = static_cast<int64_t>(tokens.size()); i < n_vocab; ++i) {
    tokens.push_back(fmt::format("\xe2\x96\x81tok{}", i));
    scores.push_back(-static_cast<float>(i));
    types.push_back(1);
  }
  constexpr int64_t n_added = std::size(kPhi3Added);
  if (phi3 && n_vocab >= 3 + 256 + n_added) {  // after the byte tokens: at 32000 as in Phi-3, else at the end
    const int64_t base = n_vocab >= 32000 + n_added ? 32000 : n_vocab - n_added;
    for (int64_t i = 0; i < n_added; ++i) {
      tokens[static_cast<size_t>(base + i)] = kPhi3Added[i];
      scores[static_cast<size_t>(base + i)] = 0;
      types[static_cast<size_t>(base + i)] = 3;  // control
    }
  }
  const auto n_rr = static_cast<int64_t>(kRerankTokens.size());
  if (rerank && n_vocab >= 3 + 256 + n_rr) {
    for (int64_t i = 0; i < n_rr; ++i) {
      const auto id = static_cast<size_t>(n_vocab - n_rr + i);
      tokens[id] = kRerankTokens[static_cast<size_t>(i)].first;
      scores[id] = 0;
      types[id] = kRerankTokens[static_cast<size_t>(i)].second;
    }
    w.set_bool("tokenizer.ggml.add_bos_token", false);  // as Qwen's vocabulary: the prompt starts with <|im_start|>
  }
  const auto n_fim = static_cast<int64_t>(kFimTokens.size());
  if (fim && n_vocab >= 3 + 256 + n_fim + n_rr) {  // before the reranker's tokens
    for (int64_t i = 0; i < n_fim; ++i) {
      const int64_t id = n_vocab - n_rr - n_fim + i;
      tokens[static_cast<size_t>(id)] = kFimTokens[static_cast<size_t>(i)].first;
      scores[static_cast<size_t>(id)] = 0;
      types[static_cast<size_t>(id)] = 3;  // control
      w.set_u32(kFimTokens[static_cast<size_t>(i)].second, static_cast<uint32_t>(id));
    }
  }
  w.set_string("tokenizer.ggml.model", "llama");
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(std::move(tokens)));
  w.set("tokenizer.ggml.scores", GgufValue::f32_array(scores));
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
}

// The type a matrix of `cols` columns is written in when `type`'s blocks do not divide its rows.
DType fallback_type(DType type, int64_t cols) {
  if (cols % dtype_info(type).block_size == 0) return type;
  if (type == DType::IQ4_XS) type = DType::IQ4_NL;
  if (type == DType::Q2_K || type == DType::Q3_K) type = DType::Q4_0;
  return cols % dtype_info(type).block_size == 0 ? type : DType::F16;
}

}  // namespace

void dummy_synthetic_vocab(GgufWriter& w, int64_t n_vocab) { synthetic_vocab(w, n_vocab, false, false, false); }

Result<std::unique_ptr<GgufFile>> open_dummy_vocab(const std::string& path) {
  if (path.empty()) return std::unique_ptr<GgufFile>();
  auto vf = GgufFile::open(path);
  if (!vf.ok()) return vf.error_value();
  auto vocab = std::make_unique<GgufFile>(std::move(vf).value());
  const GgufValue* toks = vocab->find("tokenizer.ggml.tokens");
  if (!toks || !toks->as_string_array()) return Error{fmt::format("{}: no tokenizer.ggml.tokens", path)};
  return vocab;
}

int64_t dummy_vocab_size(const GgufFile& vocab) {
  return static_cast<int64_t>(vocab.find("tokenizer.ggml.tokens")->as_string_array()->size());
}

void copy_tokenizer_keys(const GgufFile& vocab, GgufWriter& w) {
  for (const auto& [k, v] : vocab.metadata())
    if (k.rfind("tokenizer.", 0) == 0) w.set(k, v);
}

GgufWriter::Producer dummy_rows(std::shared_ptr<ThreadPool> pool, uint64_t seed, const std::string& name, int64_t rows,
                                int64_t cols, DType type, float spread) {
  return [=](uint8_t* dst, size_t nbytes) -> Status {
    const size_t row_bytes = nbytes / static_cast<size_t>(rows);
    pool->parallel_for(rows, 64, [&](int64_t r0, int64_t r1, int) {
      std::vector<float> buf(static_cast<size_t>(cols));
      for (int64_t r = r0; r < r1; ++r) {
        fill_row(buf.data(), cols, seed, name, r, 0.0f, spread);
        quantize_row(type, buf.data(), dst + r * row_bytes, cols);
      }
    });
    return {};
  };
}

uint32_t dummy_file_type(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::BF16: return 32;
    case DType::Q8_0: return 7;
    case DType::Q4_0: return 2;
    case DType::IQ4_NL: return 25;
    default: return 38;  // MXFP4
  }
}

GgufWriter::Producer dummy_f32(uint64_t seed, const std::string& name, int64_t n, float center, float spread) {
  return [=](uint8_t* dst, size_t) -> Status {
    std::vector<float> buf(static_cast<size_t>(n));
    fill_row(buf.data(), n, seed, name, 0, center, spread);
    std::memcpy(dst, buf.data(), buf.size() * 4);
    return {};
  };
}

Status DummyTensors::matrix(const std::string& name, int64_t rows, int64_t cols, float spread) const {
  const DType t = cols % dtype_info(type).block_size != 0 ? DType::F16 : type;
  return w.add_tensor(name, t, {cols, rows}, dummy_rows(pool, seed, name, rows, cols, t, spread));
}

DummyTensors DummyTensors::for_options(GgufWriter& w, const DummyOptions& o) {
  DummyTensors t{w, std::make_shared<ThreadPool>(o.threads > 0 ? o.threads : default_thread_count()), o.seed, o.dtype};
  if (o.std > 0) t.spread = t.e_spread = o.std * std::sqrt(3.0f);
  return t;
}

Status dummy_whole_file_dtype(DType t, const std::string& arch) {
  if (t != DType::F32 && t != DType::F16 && t != DType::BF16 && t != DType::Q8_0 && t != DType::Q4_0 &&
      t != DType::IQ4_NL && t != DType::MXFP4)
    return Error{fmt::format("--dtype {}: {} dummies are F32, F16, BF16, Q8_0, Q4_0, IQ4_NL or MXFP4 (every matrix in "
                             "it)", dtype_name(t), arch)};
  return {};
}

void dummy_header(GgufWriter& w, const ModelShape& s, DType dtype) {
  const std::string a = s.arch + ".";
  w.set_string("general.architecture", s.arch);
  w.set_string("general.name", fmt::format("dummy {} ({})", s.name, dtype_name(dtype)));
  w.set_u32("general.file_type", dummy_file_type(dtype));
  if (dtype_info(dtype).block_size > 1) w.set_u32("general.quantization_version", 2);
  w.set_u32(a + "context_length", static_cast<uint32_t>(s.n_ctx));
  w.set_u32(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_u32(a + "block_count", static_cast<uint32_t>(s.n_layer));
}

void dummy_uniform_layer_keys(GgufWriter& w, const ModelShape& s) {
  const std::string a = s.arch + ".";
  w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
  w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.set_f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set_f32(a + "rope.freq_base", s.rope_theta);
  w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(s.n_rot > 0 ? s.n_rot : s.head_dim));
}

Status DummyTensors::experts(const std::string& name, int64_t n, int64_t rows, int64_t cols, float spread) const {
  const DType t = cols % dtype_info(type).block_size != 0 ? DType::F16 : type;
  return w.add_tensor(name, t, {cols, rows, n}, dummy_rows(pool, seed, name, rows * n, cols, t, spread));
}

Status DummyTensors::f32(const std::string& name, int64_t n, float center, float spread) const {
  return w.add_tensor(name, DType::F32, {n}, dummy_f32(seed, name, n, center, spread));
}

Status write_dummy_model(const DummyOptions& o, const std::string& out_path) {
  ModelShape s = o.shape;
  if (is_encoder_dummy_arch(s.arch)) return write_dummy_encoder(o, out_path);
  if (is_mamba_dummy_arch(s.arch)) return write_dummy_mamba(o, out_path);
  if (is_classic_dummy_arch(s.arch)) return write_dummy_classic(o, out_path);
  if (s.arch == "gemma4") return write_dummy_gemma4(o, out_path);
  if (s.arch == "deci" || s.arch == "openelm") return write_dummy_deci(o, out_path);
  if (s.arch == "phimoe") return write_dummy_phimoe(o, out_path);
  if (s.arch == "afmoe") return write_dummy_afmoe(o, out_path);
  // Qwen's vision-language language models are their text family's tensors under another name, with
  // M-RoPE sections: the checks below see the text family, the keys take the file's name
  const std::string file_arch = s.arch;
  if (s.gdn_legacy_in && s.arch != "qwen3next") return Error{"a legacy ssm_in is qwen3next's"};
  if ((s.ssm_no_norm || s.ssm_d_inner > 0) && s.arch != "falcon-h1")
    return Error{"a Mamba-2 inner width of its own, or no grouped norm, is falcon-h1's here"};
  const bool qwen_vl = s.arch == "qwen2vl" || s.arch == "qwen3vl" || s.arch == "qwen3vlmoe";
  if (qwen_vl) {
    if (s.rope_sections.empty()) return Error{fmt::format("{} needs M-RoPE sections", s.arch)};
    s.arch = s.arch == "qwen2vl" ? "qwen2" : s.arch == "qwen3vl" ? "qwen3" : "qwen3moe";
  } else if (!s.rope_sections.empty() && s.arch != "glm4" && s.arch != "glm4moe") {
    return Error{"M-RoPE sections are qwen2vl's, qwen3vl's, qwen3vlmoe's, glm4's and glm4moe's here"};
  }
  if (o.dtype != DType::F32 && o.dtype != DType::F16 && o.dtype != DType::BF16 && o.dtype != DType::Q8_0 &&
      o.dtype != DType::Q4_0 && o.dtype != DType::IQ4_NL && o.dtype != DType::IQ4_XS && o.dtype != DType::MXFP4 &&
      o.dtype != DType::Q2_K && o.dtype != DType::Q3_K)
    return Error{fmt::format(
        "--dtype {} is not supported by dummy (use F32, F16, BF16, Q8_0, Q4_0, IQ4_NL, IQ4_XS, MXFP4, Q2_K, Q3_K)",
        dtype_name(o.dtype))};
  // The 4-bit types get llama.cpp's default mix for the output matrix (below, unless --pure).
  // MXFP4: every 2-D weight MXFP4 (llama.cpp's MXFP4_MOE would keep a dense model's matrices in Q8_0;
  // a dummy is for exercising the type), the output matrix Q8_0 as in MXFP4_MOE.
  // Q2_K / Q3_K likewise (llama.cpp's Q2_K and Q3_K mixes give the output matrix Q6_K).
  const bool four_bit = o.dtype == DType::Q4_0 || o.dtype == DType::IQ4_NL || o.dtype == DType::IQ4_XS ||
                        o.dtype == DType::MXFP4 || o.dtype == DType::Q2_K || o.dtype == DType::Q3_K;
  if (s.n_head % s.n_head_kv != 0 || s.head_dim % 2 != 0 || s.n_embd <= 0 || s.n_layer <= 0 || s.n_ff <= 0)
    return Error{"invalid model dimensions"};
  const int64_t n_rot = s.n_rot > 0 ? s.n_rot : s.head_dim;
  if (n_rot % 2 != 0 || n_rot > s.head_dim) return Error{fmt::format("rope dimensions {} must be even and <= head_dim", n_rot)};
  const bool phi3 = s.arch == "phi3";
  const bool gemma_embd = s.arch == "gemma-embedding";  // gemma3's layers, bidirectional; dense_2 / dense_3
  const bool gemma = s.arch == "gemma" || s.arch == "gemma2" || s.arch == "gemma3" || gemma_embd;
  if (gemma_embd && s.n_swa <= 0) return Error{"gemma-embedding needs --sliding-window > 0 (llama.cpp requires it)"};
  if (!gemma_embd && s.n_embd_dense > 0) return Error{"dense projections after pooling are gemma-embedding's"};
  if (gemma) s.tied = true;  // llama.cpp's gemma families read no output.weight: they tie it
  const bool olmo2 = s.arch == "olmo2";  // no pre-norms; post norms; q/k norms over the whole projection
  const bool exaone4 = s.arch == "exaone4";  // no pre-norms; post norms; per-head q/k norms
  const bool glm4 = s.arch == "glm4";        // pre- and post-norms, q/k/v biases, fused gate/up
  const bool glm4moe = s.arch == "glm4moe";  // q/k/v biases, sigmoid routing with a selection bias, shared expert
  const bool deepseek2 = s.arch == "deepseek2" || s.arch == "mistral4";  // latent attention (MLA), shared experts, leading dense layers
  if (deepseek2 && (s.mla_kv_rank <= 0 || s.mla_nope <= 0 || s.mla_v <= 0 || s.n_head_kv != 1 || s.n_rot <= 0 ||
                    s.head_dim != s.mla_kv_rank + s.n_rot))
    return Error{"deepseek2 needs the MLA sizes (kv rank, nope and value dimensions), --n-rot, one KV head and "
                 "head_dim = kv rank + n_rot"};
  if (!deepseek2 && (s.mla_kv_rank > 0 || s.sigmoid_gating)) return Error{"MLA sizes and sigmoid gating are deepseek2's"};
  const bool post_norms = (gemma && s.arch != "gemma") || olmo2 || exaone4 || glm4;
  const bool exaone_moe = s.arch == "exaone-moe";  // pre-norms, q/k norms, windows with NoPE global layers, experts
  if (exaone_moe && (s.n_swa <= 0 || s.tied))
    return Error{"exaone-moe needs --sliding-window > 0 and an untied output (llama.cpp requires both)"};
  if (s.n_swa > 0 && s.arch != "llama" && s.arch != "gemma2" && s.arch != "gemma3" && !gemma_embd && s.arch != "gpt-oss" && !olmo2 &&
      !exaone4 && s.arch != "cohere2" && !exaone_moe)
    return Error{fmt::format("--sliding-window: architecture '{}' has none here (llama, gemma2, gemma3, gpt-oss, olmo2, "
                             "exaone4 with 64 layers)", s.arch)};
  if (olmo2 && (s.tied || s.n_head * s.head_dim != s.n_embd))
    return Error{"olmo2 needs an untied output and n_head * head_dim == n_embd (as llama.cpp loads it)"};
  const bool falcon_h1 = s.arch == "falcon-h1";  // attention and a Mamba-2 mixer side by side in every layer
  const bool jamba = s.arch == "jamba";  // Mamba-1 mixers between NoPE attention layers, experts every other layer
  const bool granite_hybrid = s.arch == "granitehybrid";  // Mamba-2 mixers between attention layers, NoPE
  // nemotron_h: each layer a Mamba-2 mixer ('M'), attention without RoPE ('*') or a ReLU-squared MLP ('-')
  // nemotron_h_moe: E for an experts layer (ungated ReLU-squared experts, sigmoid routing, a shared expert)
  const bool nemotron_moe = s.arch == "nemotron_h_moe";
  const bool nemotron = s.arch == "nemotron_h" || nemotron_moe;
  if (nemotron && (s.layer_pattern.size() != static_cast<size_t>(s.n_layer) ||
                   s.layer_pattern.find_first_not_of(nemotron_moe ? "M*E" : "M*-") != std::string::npos ||
                   s.layer_pattern.find('*') == std::string::npos))
    return Error{fmt::format("nemotron_h needs a layer pattern of {} characters M (mixer), * (attention), - (MLP) "
                             "with one attention layer at least", s.n_layer)};
  // gated delta nets on three layers of four, gated attention with q/k norms, post_attention_norm
  const bool qwen3next = s.arch == "qwen3next";  // qwen35moe's layers, one ssm_ba, no sections
  const bool qwen35moe = s.arch == "qwen35moe" || qwen3next;
  const bool qwen35 = s.arch == "qwen35" || qwen35moe;
  const bool granite = s.arch == "granite" || s.arch == "granitemoe" || granite_hybrid;
  if (granite && !(s.logit_scale > 0)) return Error{fmt::format("{} needs a logit scale ({}.logit_scale)", s.arch, s.arch)};
  if (!s.rope_scaling.empty() && s.rope_scaling != "linear" && s.rope_scaling != "yarn")
    return Error{fmt::format("--rope-scaling {}: linear or yarn", s.rope_scaling)};
  if (!s.rope_scaling.empty() && !(s.rope_factor > 0)) return Error{"--rope-scaling needs --rope-factor > 0"};
  if (!(o.std >= 0)) return Error{"--std must not be negative"};
  // llama.cpp's phi3 takes attn_output as [n_embd, n_embd]
  if (phi3 && s.n_head * s.head_dim != s.n_embd)
    return Error{fmt::format("phi3 needs n_head * head_dim == n_embd ({} * {} != {})", s.n_head, s.head_dim, s.n_embd)};
  const bool longrope = phi3 && s.rope_orig_ctx > 0 && s.rope_orig_ctx < s.n_ctx;
  // Mixture of experts: the families that always have experts, or llama with n_expert > 0 (Mixtral)
  const bool gptoss = s.arch == "gpt-oss";
  const bool ernie_moe = s.arch == "ernie4_5-moe";  // softmax with an optional selection bias, shared expert rows
  const bool minimax = s.arch == "minimax-m2";  // whole-projection q/k norms, sigmoid experts of n_ff rows
  const bool dots1 = s.arch == "dots1";         // qwen3's attention, DeepSeek-V3's experts
  const bool deepseek = s.arch == "deepseek";   // DeepSeek-MoE: the llama block, softmax experts beside shared ones
  const bool cohere = s.arch == "command-r" || s.arch == "cohere2";  // LayerNorm, parallel block, tied, logit scale
  const bool llama4 = s.arch == "llama4";  // interleaved experts with a shared one, chunked attention, NoPE layers
  const bool phi2 = s.arch == "phi2";  // starcoder2's biases and FFN in cohere's parallel block, an output bias
  const bool stablelm = s.arch == "stablelm";  // LayerNorms with biases, q/k/v biases, SwiGLU, partial NeoX RoPE
  const bool orion = s.arch == "orion";        // stablelm's LayerNorms with biases, no q/k/v biases
  const bool starcoder2 = s.arch == "starcoder2" || phi2;  // LayerNorms with biases, biases everywhere, ungated GELU FFN
  const bool apertus = s.arch == "apertus";  // q/k norms (with unused biases), an ungated xIELU FFN, attn_output.bias
  if (apertus && s.tied) return Error{"apertus has an untied output matrix (llama.cpp requires output.weight)"};
  const bool hunyuan_moe = s.arch == "hunyuan-moe";  // hunyuan-dense's attention, softmax experts, a shared expert
  const bool bailing = s.arch == "bailingmoe2";  // fused attn_qkv, per-head q/k norms, DeepSeek-V3's experts
  if (bailing && s.tied) return Error{"bailingmoe2 has an untied output matrix (llama.cpp requires output.weight)"};
  const bool lfm2moe = s.arch == "lfm2moe";  // lfm2 with sigmoid experts after leading dense layers
  const bool lfm2 = s.arch == "lfm2" || lfm2moe;  // short convolution layers between GQA ones with per-head q/k norms
  std::vector<bool> conv_layer(static_cast<size_t>(s.n_layer), false);
  if (qwen35) {
    for (int64_t l = 0; l < s.n_layer; ++l) conv_layer[static_cast<size_t>(l)] = (l + 1) % 4 != 0;
  } else if (granite_hybrid || jamba) {
    conv_layer.assign(conv_layer.size(), true);
    for (int64_t l : s.attn_layers) {
      if (l < 0 || l >= s.n_layer) return Error{fmt::format("granitehybrid: attention layer {} is not one of {} layers", l, s.n_layer)};
      conv_layer[static_cast<size_t>(l)] = false;
    }
  } else if (lfm2) {
    if (s.attn_layers.empty() || s.n_head * s.head_dim != s.n_embd)
      return Error{"lfm2 needs attention layers and n_head * head_dim == n_embd (llama.cpp's q and output are n_embd square)"};
    conv_layer.assign(conv_layer.size(), true);
    for (int64_t l : s.attn_layers) {
      if (l < 0 || l >= s.n_layer) return Error{fmt::format("lfm2: attention layer {} is not one of {} layers", l, s.n_layer)};
      conv_layer[static_cast<size_t>(l)] = false;
    }
  } else if (!s.attn_layers.empty()) {
    return Error{"attention layers among convolution or mixer layers are lfm2's and granitehybrid's"};
  }
  const int64_t conv_l = s.conv_l > 0 ? s.conv_l : 3;
  const int64_t ssm_inner = s.ssm_d_inner > 0 ? s.ssm_d_inner : 2 * s.n_embd, ssm_state = s.ssm_d_state > 0 ? s.ssm_d_state : 128;
  const int64_t ssm_heads = s.ssm_n_head > 0 ? s.ssm_n_head : 48, ssm_groups = s.ssm_n_group > 0 ? s.ssm_n_group : 1;
  const int64_t ssm_conv = s.ssm_d_conv > 0 ? s.ssm_d_conv : 4;
  const int64_t ssm_conv_dim = ssm_inner + 2 * ssm_groups * ssm_state;
  // qwen35: value heads (ssm_heads) and key heads (ssm_groups) of ssm_state dimensions each
  const int64_t gdn_inner = ssm_heads * ssm_state, gdn_conv_dim = gdn_inner + 2 * ssm_groups * ssm_state;
  if (qwen35 && ssm_heads % ssm_groups != 0) return Error{"qwen35: the value heads must be a multiple of the key heads"};
  if ((granite_hybrid || nemotron || falcon_h1) && (ssm_inner % ssm_heads != 0 || ssm_heads % ssm_groups != 0))
    return Error{fmt::format("granitehybrid: the inner width {} must split into {} heads, and those into {} groups",
                             ssm_inner, ssm_heads, ssm_groups)};
  if ((stablelm || orion || s.arch == "xverse") && s.tied)
    return Error{fmt::format("{} has an untied output matrix (llama.cpp requires output.weight)", s.arch)};
  if (phi2 && s.tied) return Error{"phi2 has an untied output matrix (llama.cpp requires output.weight)"};
  if (s.arch == "internlm2" && s.tied) return Error{"internlm2 has an untied output matrix (llama.cpp requires output.weight)"};
  const int64_t moe_step = s.moe_layer_step > 0 ? s.moe_layer_step : 1;
  if (!llama4 && !jamba && s.moe_layer_step > 1) return Error{"interleaved expert layers are llama4's and jamba's here"};
  if (jamba && s.ssm_d_inner > 0 && s.ssm_d_inner != 2 * s.n_embd) return Error{"jamba's inner width is 2 x n_embd"};
  if (cohere) s.tied = true;  // llama.cpp's command-r / cohere2 read no output.weight
  if (s.arch == "cohere2" && s.n_swa <= 0) return Error{"cohere2 needs --sliding-window > 0 (llama.cpp requires it)"};
  if ((cohere || starcoder2 || stablelm || orion) && s.n_head * s.head_dim != s.n_embd)
    return Error{fmt::format("{} needs n_head * head_dim == n_embd (llama.cpp's q and output are n_embd square)", s.arch)};
  if (minimax && s.tied) return Error{"minimax-m2 has an untied output matrix (llama.cpp requires output.weight)"};
  if (dots1 && (s.n_head_kv != s.n_head || s.tied))
    return Error{"dots1 needs --n-head-kv == --n-head and an untied output (llama.cpp's k / v are n_head wide)"};
  const bool moe_arch = s.arch == "qwen3moe" || s.arch == "qwen2moe" || s.arch == "olmoe" || gptoss ||
                        s.arch == "granitemoe" || glm4moe || deepseek2 || ernie_moe || minimax || dots1 || llama4 || lfm2moe ||
                        bailing || hunyuan_moe || exaone_moe || qwen35moe || nemotron_moe || deepseek;
  const bool moe = moe_arch || s.n_expert > 0;
  const bool expert_ff_key =
      s.arch == "qwen3moe" || s.arch == "qwen2moe" || gptoss || glm4moe || deepseek2 || ernie_moe || dots1 || llama4 ||
      lfm2moe || bailing || exaone_moe || qwen35moe || nemotron_moe || deepseek;
  const int64_t n_ff_exp = s.n_ff_exp > 0 ? s.n_ff_exp : s.n_ff;
  const bool ds_moe = glm4moe || deepseek2 || dots1 || bailing || deepseek;  // DeepSeek-style experts: shared count, dense lead, scale
  const int64_t n_shared = ds_moe ? (s.n_expert_shared > 0 ? s.n_expert_shared : 1) : 0;
  const int64_t n_ff_shexp = ds_moe      ? n_shared * n_ff_exp
                             : llama4    ? n_ff_exp
                             : ernie_moe ? s.n_ff_shexp
                             : exaone_moe ? (s.n_ff_shexp > 0 ? s.n_ff_shexp : n_ff_exp)
                             : s.n_ff_shexp > 0 ? s.n_ff_shexp : s.n_ff;
  if (!ds_moe && (s.n_expert_shared > 0 || (s.expert_weights_scale > 0 && !exaone_moe && !nemotron_moe)))
    return Error{"shared expert counts and expert weight scales are glm4moe's and deepseek2's here"};
  if (!ds_moe && !ernie_moe && !lfm2moe && !exaone_moe && s.n_dense_lead > 0)
    return Error{"leading dense layers are glm4moe's, deepseek2's, ernie4_5-moe's and lfm2moe's here"};
  if (!glm4moe && s.qk_norm) return Error{"q/k norms of this kind are glm4moe's here"};
  const bool sigmoid = glm4moe || s.sigmoid_gating || minimax || dots1 || lfm2moe || bailing || exaone_moe;
  if (s.n_dense_lead < 0 || s.n_dense_lead > s.n_layer) return Error{"--n-dense-lead must be in [0, --n-layer]"};
  if (moe) {
    if (s.arch != "llama" && !moe_arch && !granite_hybrid && s.arch != "minicpm" && !jamba)
      return Error{fmt::format("--n-expert: architecture '{}' has no experts (qwen3moe, qwen2moe, olmoe, granitemoe, glm4moe, deepseek2, ernie4_5-moe, minimax-m2, dots1, llama4, llama)",
                               s.arch)};
    if (s.n_expert < 2) return Error{fmt::format("{} needs --n-expert >= 2", s.arch)};
    if (s.n_expert_used < 1 || s.n_expert_used > s.n_expert)
      return Error{fmt::format("--n-expert-used {} must be in [1, --n-expert {}]", s.n_expert_used, s.n_expert)};
    if (!expert_ff_key && n_ff_exp != s.n_ff)
      return Error{fmt::format("{}: experts have --n-ff rows (llama.cpp reads no expert_feed_forward_length for it); "
                               "--n-ff-exp {} != --n-ff {}", s.arch, n_ff_exp, s.n_ff)};
    if (s.n_ff_shexp > 0 && s.arch != "qwen2moe" && !ernie_moe && !hunyuan_moe && !exaone_moe && !granite_hybrid && !qwen35moe && !nemotron_moe)
      return Error{"a shared expert of its own size is qwen2moe's, ernie4_5-moe's and hunyuan-moe's only"};
    // llama.cpp's olmoe takes attn_q_norm / attn_k_norm as [n_embd]: no GQA, n_head * head_dim == n_embd
    // llama.cpp's gpt-oss needs output.weight and attention.sliding_window
    if (gptoss && s.tied) return Error{"gpt-oss has an untied output matrix (llama.cpp requires output.weight)"};
    if (gptoss && s.n_swa <= 0) return Error{"gpt-oss needs --sliding-window > 0"};
    if (s.arch == "olmoe" && (s.n_head_kv != s.n_head || s.n_head * s.head_dim != s.n_embd))
      return Error{fmt::format("olmoe needs --n-head-kv == --n-head and n_head * head_dim == n_embd (llama.cpp's q/k "
                               "norms are n_embd wide)")};
  }

  GgufWriter w;
  TM_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> vocab, open_dummy_vocab(o.vocab_path));
  if (vocab) {
    const int64_t n = dummy_vocab_size(*vocab);
    if (n != s.n_vocab) log_warn("vocab file has {} tokens; shape {} says {}: using {}", n, s.name, s.n_vocab, n);
    s.n_vocab = n;
  }
  const std::string a = file_arch + ".";
  w.set_string("general.architecture", file_arch);
  if (!s.rope_sections.empty()) w.set(a + "rope.dimension_sections", GgufValue::i32_array(s.rope_sections));
  if (file_arch == "qwen3vl" || file_arch == "qwen3vlmoe") w.set_u32(a + "n_deepstack_layers", static_cast<uint32_t>(s.n_deepstack));
  w.set_string("general.name", fmt::format("dummy {} ({})", s.name, dtype_name(o.dtype)));
  // llama_ftype: ALL_F32=0, MOSTLY_F16=1, MOSTLY_Q4_0=2, MOSTLY_Q8_0=7, MOSTLY_IQ4_NL=25, MOSTLY_IQ4_XS=30,
  // MOSTLY_BF16=32, MOSTLY_MXFP4_MOE=38, MOSTLY_Q2_K=10, MOSTLY_Q3_K_S=11 (every matrix Q3_K)
  const uint32_t ftype = o.dtype == DType::F32 ? 0 : o.dtype == DType::F16 ? 1 : o.dtype == DType::Q4_0 ? 2
                         : o.dtype == DType::Q8_0 ? 7 : o.dtype == DType::IQ4_NL ? 25 : o.dtype == DType::IQ4_XS ? 30
                         : o.dtype == DType::MXFP4 ? 38 : o.dtype == DType::Q2_K ? 10 : o.dtype == DType::Q3_K ? 11
                         : 32;
  w.set_u32("general.file_type", ftype);
  if (o.dtype == DType::Q8_0 || four_bit) w.set_u32("general.quantization_version", 2);
  w.set_u32(a + "context_length", static_cast<uint32_t>(s.n_ctx));
  w.set_u32(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_u32(a + "block_count", static_cast<uint32_t>(s.n_layer));
  if (!nemotron) w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));  // (nemotron_h: per layer)
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
  // llama.cpp's ssm.* keys (granitehybrid, nemotron_h, qwen35)
  auto set_ssm_keys = [&](int64_t inner) {
    w.set_u32(a + "ssm.conv_kernel", static_cast<uint32_t>(ssm_conv));
    w.set_u32(a + "ssm.inner_size", static_cast<uint32_t>(inner));
    w.set_u32(a + "ssm.state_size", static_cast<uint32_t>(ssm_state));
    w.set_u32(a + "ssm.time_step_rank", static_cast<uint32_t>(ssm_heads));
    w.set_u32(a + "ssm.group_count", static_cast<uint32_t>(ssm_groups));
  };
  if (nemotron) {  // as convert_hf_to_gguf.py writes Nemotron-H: KV heads and FFN widths per layer, ssm.*
    std::vector<int32_t> kv(static_cast<size_t>(s.n_layer)), ff(kv.size());
    for (int64_t l = 0; l < s.n_layer; ++l) {
      kv[static_cast<size_t>(l)] = s.layer_pattern[static_cast<size_t>(l)] == '*' ? static_cast<int32_t>(s.n_head_kv) : 0;
      const char kind = s.layer_pattern[static_cast<size_t>(l)];
      ff[static_cast<size_t>(l)] = kind == '-' || kind == 'E' ? static_cast<int32_t>(s.n_ff) : 0;
    }
    w.set(a + "attention.head_count_kv", GgufValue::i32_array(kv));
    w.set(a + "feed_forward_length", GgufValue::i32_array(ff));
    set_ssm_keys(ssm_inner);
    w.set_f32(a + "attention.layer_norm_epsilon", s.rms_eps);
  }
  if (qwen35) {  // as convert_hf_to_gguf.py writes Qwen3.5: the delta net's sizes, its interval, M-RoPE sections
    set_ssm_keys(gdn_inner);
    w.set_u32(a + "full_attention_interval", 4);
    // (the interleaved sections' sizes: how many pairs fall on each residue mod 3 -- Qwen's 11, 11, 10 for 64)
    const int32_t half = static_cast<int32_t>(n_rot / 2);
    if (!qwen3next) w.set(a + "rope.dimension_sections", GgufValue::i32_array({(half + 2) / 3, (half + 1) / 3, half / 3, 0}));
  }
  if (jamba) {  // as convert_hf_to_gguf.py writes Jamba: KV heads per layer (0: a mixer), Mamba-1's ssm.*
    std::vector<int32_t> kv(static_cast<size_t>(s.n_layer));
    for (int64_t l = 0; l < s.n_layer; ++l) kv[static_cast<size_t>(l)] = conv_layer[static_cast<size_t>(l)] ? 0 : static_cast<int32_t>(s.n_head_kv);
    w.set(a + "attention.head_count_kv", GgufValue::i32_array(kv));
    w.set_u32(a + "ssm.conv_kernel", static_cast<uint32_t>(ssm_conv));
    w.set_u32(a + "ssm.inner_size", static_cast<uint32_t>(2 * s.n_embd));
    w.set_u32(a + "ssm.state_size", static_cast<uint32_t>(ssm_state));
    w.set_u32(a + "ssm.time_step_rank", static_cast<uint32_t>(s.ssm_dt_rank > 0 ? s.ssm_dt_rank : (s.n_embd + 15) / 16));
  } else if (granite_hybrid) {  // as convert_hf_to_gguf.py writes Granite 4.0-H: KV heads per layer (0: a mixer), ssm.*, NoPE
    std::vector<int32_t> kv(static_cast<size_t>(s.n_layer));
    for (int64_t l = 0; l < s.n_layer; ++l) kv[static_cast<size_t>(l)] = conv_layer[static_cast<size_t>(l)] ? 0 : static_cast<int32_t>(s.n_head_kv);
    w.set(a + "attention.head_count_kv", GgufValue::i32_array(kv));
    set_ssm_keys(ssm_inner);
    w.set_bool(a + "rope.scaling.finetuned", s.ssm_rope);  // (the converter's switch for RoPE)
    if (s.n_expert > 0 && s.n_ff_shexp > 0) w.set_u32(a + "expert_shared_feed_forward_length", static_cast<uint32_t>(s.n_ff_shexp));
  } else if (lfm2) {  // as convert_hf_to_gguf.py writes LFM2: a KV head count per layer, 0 for a convolution
    std::vector<int32_t> kv(static_cast<size_t>(s.n_layer));
    for (int64_t l = 0; l < s.n_layer; ++l) kv[static_cast<size_t>(l)] = conv_layer[static_cast<size_t>(l)] ? 0 : static_cast<int32_t>(s.n_head_kv);
    w.set(a + "attention.head_count_kv", GgufValue::i32_array(kv));
    w.set_u32(a + "shortconv.l_cache", static_cast<uint32_t>(conv_l));
  } else if (!nemotron) {
    w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  }
  if (falcon_h1) set_ssm_keys(ssm_inner);  // (as convert_hf_to_gguf.py writes Falcon-H1: one KV head count)
  if (deepseek2) {  // MLA as llama.cpp's converter writes it: the latent head's sizes, then the heads'
    w.set_u32(a + "attention.key_length", static_cast<uint32_t>(s.head_dim));
    w.set_u32(a + "attention.value_length", static_cast<uint32_t>(s.mla_kv_rank));
    w.set_u32(a + "attention.key_length_mla", static_cast<uint32_t>(s.mla_nope + n_rot));
    w.set_u32(a + "attention.value_length_mla", static_cast<uint32_t>(s.mla_v));
    w.set_u32(a + "attention.q_lora_rank", static_cast<uint32_t>(s.mla_q_rank));
    w.set_u32(a + "attention.kv_lora_rank", static_cast<uint32_t>(s.mla_kv_rank));
  } else if (s.head_dim != s.n_embd / s.n_head) {
    w.set_u32(a + "attention.key_length", static_cast<uint32_t>(s.head_dim));
    w.set_u32(a + "attention.value_length", static_cast<uint32_t>(s.head_dim));
  }
  w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(n_rot));
  w.set_f32(a + "rope.freq_base", s.rope_theta);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set_u32(a + "vocab_size", static_cast<uint32_t>(s.n_vocab));
  const std::string pooling_name = o.pooling.empty() ? s.pooling : o.pooling;
  bool rerank = false;  // Qwen3-Reranker: pooling rank and a yes/no head
  if (!pooling_name.empty()) {  // a decoder embedding model (Qwen3-Embedding: last; llama-arch embedders: mean)
    TM_ASSIGN_OR_RETURN(int pooling, dummy_pooling_value(pooling_name));
    rerank = pooling == 4;
    if (rerank && s.arch != "qwen3")
      return Error{fmt::format("--pooling rank on a decoder is Qwen3-Reranker's (qwen3), not {}", s.arch)};
    w.set_u32(a + "pooling_type", static_cast<uint32_t>(pooling));
    if (rerank) w.set(a + "classifier.output_labels", GgufValue::string_array({"yes", "no"}));
  }
  if (moe) {
    w.set_u32(a + "expert_count", static_cast<uint32_t>(s.n_expert));
    w.set_u32(a + "expert_used_count", static_cast<uint32_t>(s.n_expert_used));
    // (minimax-m2, hunyuan-moe: llama.cpp requires the key, though their experts have feed_forward_length rows)
    if (expert_ff_key || minimax || hunyuan_moe) w.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(n_ff_exp));
    if (s.arch == "qwen2moe" || hunyuan_moe || qwen35moe || nemotron_moe)
      w.set_u32(a + "expert_shared_feed_forward_length", static_cast<uint32_t>(n_ff_shexp));
    if (nemotron_moe) {  // as convert_hf_to_gguf.py writes Nemotron 3: sigmoid, renormalized, a scale
      w.set_u32(a + "expert_gating_func", 2);
      w.set_bool(a + "expert_weights_norm", true);
      w.set_f32(a + "expert_weights_scale", s.expert_weights_scale > 0 ? s.expert_weights_scale : 2.5f);
    }
    if (ds_moe) {  // as convert_hf_to_gguf.py writes GLM-4.5 and DeepSeek V2 / V3 (V3, GLM: sigmoid, renormalized)
      w.set_u32(a + "expert_shared_count", static_cast<uint32_t>(n_shared));
      w.set_u32(a + "leading_dense_block_count", static_cast<uint32_t>(s.n_dense_lead));
      w.set_u32(a + "expert_gating_func", sigmoid ? 2 : 1);
      w.set_bool(a + "expert_weights_norm", sigmoid);
      if (s.expert_weights_scale > 0) w.set_f32(a + "expert_weights_scale", s.expert_weights_scale);
    }
    if (minimax) w.set_u32(a + "expert_gating_func", 2);  // sigmoid, as MiniMax-M2's files
    if (exaone_moe) {  // as convert_hf_to_gguf.py writes EXAONE MoE: sigmoid, renormalized, the shared width
      w.set_u32(a + "expert_gating_func", 2);
      w.set_u32(a + "leading_dense_block_count", static_cast<uint32_t>(s.n_dense_lead));
      w.set_u32(a + "expert_shared_feed_forward_length", static_cast<uint32_t>(n_ff_shexp));
      w.set_bool(a + "expert_weights_norm", true);
      if (s.expert_weights_scale > 0) w.set_f32(a + "expert_weights_scale", s.expert_weights_scale);
    }
    if (lfm2moe) {  // as convert_hf_to_gguf.py writes LFM2 MoE: sigmoid, the dense layers' count
      w.set_u32(a + "expert_gating_func", 2);
      w.set_u32(a + "leading_dense_block_count", static_cast<uint32_t>(s.n_dense_lead));
    }
    if (llama4) w.set_u32(a + "interleave_moe_layer_step", static_cast<uint32_t>(moe_step));
    if (ernie_moe) {  // as convert_hf_to_gguf.py writes ERNIE 4.5 MoE
      w.set_u32(a + "interleave_moe_layer_step", 1);
      w.set_u32(a + "leading_dense_block_count", static_cast<uint32_t>(s.n_dense_lead));
      if (n_ff_shexp > 0) w.set_u32(a + "expert_shared_feed_forward_length", static_cast<uint32_t>(n_ff_shexp));
    }
    if (s.n_expert_groups > 1) {
      w.set_u32(a + "expert_group_count", static_cast<uint32_t>(s.n_expert_groups));
      w.set_u32(a + "expert_group_used_count", static_cast<uint32_t>(s.n_groups_used));
    }
  }
  if (s.n_embd_dense > 0) {  // as convert_hf_to_gguf.py writes EmbeddingGemma's 2_Dense / 3_Dense
    w.set_u32(a + "dense_2_feat_in", static_cast<uint32_t>(s.n_embd));
    w.set_u32(a + "dense_2_feat_out", static_cast<uint32_t>(s.n_embd_dense));
    w.set_u32(a + "dense_3_feat_in", static_cast<uint32_t>(s.n_embd_dense));
    w.set_u32(a + "dense_3_feat_out", static_cast<uint32_t>(s.n_embd));
  }
  if (s.n_swa > 0) {
    w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(s.n_swa));
    if (s.swa_pattern > 0) w.set_u32(a + "attention.sliding_window_pattern", static_cast<uint32_t>(s.swa_pattern));
    if (s.rope_theta_swa > 0) w.set_f32(a + "rope.freq_base_swa", s.rope_theta_swa);
  }
  if (starcoder2 || stablelm || orion) w.set_f32(a + "attention.layer_norm_epsilon", s.rms_eps);
  if (apertus) {  // as ApertusModel writes each layer's xIELU parameters (global keys, one value per layer)
    std::vector<float> an, ap, beta, eps;
    for (int64_t l = 0; l < s.n_layer; ++l) {
      an.push_back(0.8f + 0.1f * static_cast<float>(l));
      ap.push_back(0.8f - 0.05f * static_cast<float>(l));
      beta.push_back(0.5f);
      eps.push_back(-1e-6f);
    }
    w.set("xielu.alpha_n", GgufValue::f32_array(an));
    w.set("xielu.alpha_p", GgufValue::f32_array(ap));
    w.set("xielu.beta", GgufValue::f32_array(beta));
    w.set("xielu.eps", GgufValue::f32_array(eps));
  }
  if (cohere) {  // as convert_hf_to_gguf.py writes Command R: LayerNorm's epsilon, the logit scale
    w.set_f32(a + "attention.layer_norm_epsilon", s.rms_eps);
    w.set_f32(a + "logit_scale", s.logit_scale > 0 ? s.logit_scale : 0.0625f);
  }
  if (s.attn_softcap > 0) w.set_f32(a + "attn_logit_softcapping", s.attn_softcap);
  if (s.final_softcap > 0) w.set_f32(a + "final_logit_softcapping", s.final_softcap);
  if (s.embd_scale > 0) w.set_f32(a + "embedding_scale", s.embd_scale);
  if (s.residual_scale > 0) w.set_f32(a + "residual_scale", s.residual_scale);
  if (s.attn_scale > 0) w.set_f32(a + "attention.scale", s.attn_scale);
  if (s.logit_scale > 0 && !cohere) w.set_f32(a + "logit_scale", s.logit_scale);
  if (s.attn_temp_scale > 0) w.set_f32(a + "attention.temperature_scale", s.attn_temp_scale);
  if (!s.rope_scaling.empty()) {  // as convert_hf_to_gguf.py writes HF's rope_scaling
    w.set_string(a + "rope.scaling.type", s.rope_scaling);
    w.set_f32(a + "rope.scaling.factor", s.rope_factor);
    if (s.rope_scaling == "yarn" && s.rope_orig_ctx > 0)
      w.set_u32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(s.rope_orig_ctx));
    if (s.yarn_beta_fast > 0) w.set_f32(a + "rope.scaling.yarn_beta_fast", s.yarn_beta_fast);
    if (s.yarn_beta_slow > 0) w.set_f32(a + "rope.scaling.yarn_beta_slow", s.yarn_beta_slow);
    if (s.yarn_log_mul > 0) w.set_f32(a + "rope.scaling.yarn_log_multiplier", s.yarn_log_mul);
  }
  const LongRope lr = longrope ? longrope_factors(s, n_rot) : LongRope{};
  if (longrope) {  // as convert_hf_to_gguf.py writes a 128k Phi-3
    w.set_u32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(s.rope_orig_ctx));
    w.set_f32(a + "rope.scaling.attn_factor", lr.attn_factor);
  }
  if (vocab) copy_tokenizer_keys(*vocab, w);
  else synthetic_vocab(w, s.n_vocab, s.arch == "phi3", rerank, o.fim);
  // the rows of "yes" and "no" the reranker head copies from the output matrix
  int64_t yes_id = -1, no_id = -1;
  if (rerank) {
    if (vocab) {
      const auto& toks = *vocab->find("tokenizer.ggml.tokens")->as_string_array();
      for (size_t i = 0; i < toks.size(); ++i) {
        if (toks[i] == "yes" && yes_id < 0) yes_id = static_cast<int64_t>(i);
        if (toks[i] == "no" && no_id < 0) no_id = static_cast<int64_t>(i);
      }
      if (yes_id < 0 || no_id < 0) return Error{fmt::format("{}: a reranker needs the tokens \"yes\" and \"no\"", o.vocab_path)};
    } else {
      const auto n_rr = static_cast<int64_t>(kRerankTokens.size());
      if (s.n_vocab < 3 + 256 + n_rr) return Error{"a reranker dummy needs --n-vocab >= 263"};
      yes_id = s.n_vocab - 2;
      no_id = s.n_vocab - 1;
    }
    if (!vocab || !vocab->find("tokenizer.chat_template.rerank"))
      w.set_string("tokenizer.chat_template.rerank", tok::kQwen3RerankTemplate);
  }

  auto pool = std::make_shared<ThreadPool>(o.threads > 0 ? o.threads : default_thread_count());
  const uint64_t seed = o.seed;
  // 2-D weight: rows x cols, uniform in +-spread, stored as `type`.
  auto add_matrix = [&](const std::string& name, int64_t rows, int64_t cols, DType type, float spread) -> Status {
    // Rows that don't fit the block size: IQ4_XS -> IQ4_NL (llama.cpp's fallback), Q2_K / Q3_K ->
    // Q4_0 (as `tokenmill quantize`, quant_recipe.cpp), otherwise F16.
    type = fallback_type(type, cols);
    return w.add_tensor(name, type, {cols, rows}, dummy_rows(pool, seed, name, rows, cols, type, spread));
  };
  // 3-D expert weights [cols, rows, n]: n matrices of rows x cols, one after the other
  auto add_experts = [&](const std::string& name, int64_t n, int64_t rows, int64_t cols, DType type,
                         float spread) -> Status {
    type = fallback_type(type, cols);
    return w.add_tensor(name, type, {cols, rows, n}, dummy_rows(pool, seed, name, rows * n, cols, type, spread));
  };
  auto add_vector = [&](const std::string& name, int64_t n, float center, float spread) -> Status {
    return w.add_tensor(name, DType::F32, {n}, dummy_f32(seed, name, n, center, spread));
  };

  const DType wt = o.dtype;
  // llama.cpp's default mix: the output matrix (or the tied embedding) gets Q6_K, or Q8_0 when rows
  // don't fit 256-blocks; --pure keeps everything in the chosen type.
  DType out_t = wt;
  if (four_bit && !o.pure) out_t = s.n_embd % 256 == 0 && o.dtype != DType::MXFP4 ? DType::Q6_K : DType::Q8_0;
  const float emb_spread = o.std > 0 ? o.std * std::sqrt(3.0f) : 0.05f;
  const float w_spread = o.std > 0 ? o.std * std::sqrt(3.0f) : 0.035f;
  const int64_t q_dim = s.n_head * s.head_dim, kv_dim = s.n_head_kv * s.head_dim;
  TM_TRY(add_matrix("token_embd.weight", s.n_vocab, s.n_embd, s.tied ? out_t : wt, emb_spread));
  auto add_f32 = [&](const std::string& name, const std::vector<float>& v) -> Status {
    auto data = std::make_shared<std::vector<float>>(v);
    return w.add_tensor(name, DType::F32, {static_cast<int64_t>(data->size())}, [data](uint8_t* dst, size_t n) -> Status {
      std::memcpy(dst, data->data(), n);
      return {};
    });
  };
  if (s.rope_llama3_factor > 0) TM_TRY(add_f32("rope_freqs.weight", llama3_rope_factors(s)));
  if (longrope) {
    TM_TRY(add_f32("rope_factors_long.weight", lr.long_f));
    TM_TRY(add_f32("rope_factors_short.weight", lr.short_f));
  }
  TM_TRY(add_vector(lfm2 ? "token_embd_norm.weight" : "output_norm.weight", s.n_embd, 1.0f, 0.1f));
  if (starcoder2 || stablelm || orion) TM_TRY(add_vector("output_norm.bias", s.n_embd, 0.0f, 0.1f));
  if (phi2) TM_TRY(add_vector("output.bias", s.n_vocab, 0.0f, 0.1f));
  if (!s.tied) TM_TRY(add_matrix("output.weight", s.n_vocab, s.n_embd, out_t, emb_spread));
  if (s.n_embd_dense > 0) {  // gemma-embedding: [n_embd, dense] then [dense, n_embd], as the converter writes them
    TM_TRY(add_matrix("dense_2.weight", s.n_embd_dense, s.n_embd, wt, w_spread));
    TM_TRY(add_matrix("dense_3.weight", s.n_embd, s.n_embd_dense, wt, w_spread));
  }
  if (rerank) {  // [n_embd, 2]: the output matrix's rows of "yes" and "no", in its type (same bytes)
    const std::string src = s.tied ? "token_embd.weight" : "output.weight";
    DType type = out_t;
    if (type == DType::IQ4_XS && s.n_embd % dtype_info(type).block_size != 0) type = DType::IQ4_NL;
    if (s.n_embd % dtype_info(type).block_size != 0) type = DType::F16;
    const int64_t E = s.n_embd, rows[2] = {yes_id, no_id};
    TM_TRY(w.add_tensor("cls.output.weight", type, {E, 2}, [=](uint8_t* dst, size_t nbytes) -> Status {
      std::vector<float> buf(static_cast<size_t>(E));
      for (int r = 0; r < 2; ++r) {
        fill_row(buf.data(), E, seed, src, rows[r], 0.0f, emb_spread);
        quantize_row(type, buf.data(), dst + r * (nbytes / 2), E);
      }
      return {};
    }));
  }
  // A Mamba-2 mixer's tensors (granitehybrid, nemotron_h).
  auto add_mamba2 = [&](const std::string& p) -> Status {
    const int64_t H = ssm_heads;
    TM_TRY(add_matrix(p + "ssm_in.weight", 2 * ssm_inner + 2 * ssm_groups * ssm_state + H, s.n_embd, wt, w_spread));
    TM_TRY(add_matrix(p + "ssm_conv1d.weight", ssm_conv_dim, ssm_conv, DType::F32, 0.5f));
    TM_TRY(add_vector(p + "ssm_conv1d.bias", ssm_conv_dim, 0.0f, 0.1f));
    TM_TRY(add_vector(p + "ssm_dt.bias", H, -2.0f, 1.5f));  // softplus(dt) of the order of 0.1
    auto per_head = [&](const std::string& name, float center, float spread) {  // [1, H]
      return w.add_tensor(name, DType::F32, {1, H}, dummy_f32(seed, name, H, center, spread));
    };
    TM_TRY(per_head(p + "ssm_a", -4.0f, 3.0f));  // -exp(A_log): decay rates in [-7, -1]
    TM_TRY(per_head(p + "ssm_d", 1.0f, 0.5f));
    if (!s.ssm_no_norm) {
      TM_TRY(w.add_tensor(p + "ssm_norm.weight", DType::F32, {ssm_inner / ssm_groups, ssm_groups},
                          dummy_f32(seed, p + "ssm_norm.weight", ssm_inner, 1.0f, 0.1f)));
    }
    TM_TRY(add_matrix(p + "ssm_out.weight", s.n_embd, ssm_inner, wt, w_spread));
    return {};
  };
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    if (nemotron) {  // one block per layer behind its attn_norm
      TM_TRY(add_vector(p + "attn_norm.weight", s.n_embd, 1.0f, 0.1f));
      const char kind = s.layer_pattern[static_cast<size_t>(l)];
      if (kind == 'M') {
        TM_TRY(add_mamba2(p));
      } else if (kind == '*') {
        TM_TRY(add_matrix(p + "attn_q.weight", q_dim, s.n_embd, wt, w_spread));
        TM_TRY(add_matrix(p + "attn_k.weight", kv_dim, s.n_embd, wt, w_spread));
        TM_TRY(add_matrix(p + "attn_v.weight", kv_dim, s.n_embd, wt, w_spread));
        TM_TRY(add_matrix(p + "attn_output.weight", s.n_embd, q_dim, wt, w_spread));
      } else if (kind == 'E') {  // ungated experts, the sigmoid router with its selection bias, a shared expert
        TM_TRY(add_matrix(p + "ffn_gate_inp.weight", s.n_expert, s.n_embd, DType::F32, 4 * w_spread));
        TM_TRY(add_vector(p + "exp_probs_b.bias", s.n_expert, 0.0f, 0.1f));
        TM_TRY(add_experts(p + "ffn_up_exps.weight", s.n_expert, n_ff_exp, s.n_embd, wt, w_spread));
        TM_TRY(add_experts(p + "ffn_down_exps.weight", s.n_expert, s.n_embd, n_ff_exp, wt, w_spread));
        TM_TRY(add_matrix(p + "ffn_up_shexp.weight", n_ff_shexp, s.n_embd, wt, w_spread));
        TM_TRY(add_matrix(p + "ffn_down_shexp.weight", s.n_embd, n_ff_shexp, wt, w_spread));
      } else {
        TM_TRY(add_matrix(p + "ffn_up.weight", s.n_ff, s.n_embd, wt, w_spread));
        TM_TRY(add_matrix(p + "ffn_down.weight", s.n_embd, s.n_ff, wt, w_spread));
      }
      continue;
    }
    if (!olmo2 && !exaone4) TM_TRY(add_vector(p + "attn_norm.weight", s.n_embd, 1.0f, 0.1f));
    if (starcoder2 || stablelm || orion) {  // the LayerNorms' biases (phi2: one norm per layer)
      TM_TRY(add_vector(p + "attn_norm.bias", s.n_embd, 0.0f, 0.1f));
      if (!phi2) TM_TRY(add_vector(p + "ffn_norm.bias", s.n_embd, 0.0f, 0.1f));
    }
    if (conv_layer[static_cast<size_t>(l)] && qwen35) {  // a gated delta net
      const int64_t H = ssm_heads;
      if (s.gdn_legacy_in) {  // (qwen3next as converted before llama.cpp split it: [q, k, v, z] per key head)
        TM_TRY(add_matrix(p + "ssm_in.weight", gdn_conv_dim + gdn_inner, s.n_embd, wt, w_spread));
      } else {
        TM_TRY(add_matrix(p + "attn_qkv.weight", gdn_conv_dim, s.n_embd, wt, w_spread));
        TM_TRY(add_matrix(p + "attn_gate.weight", gdn_inner, s.n_embd, wt, w_spread));
      }
      TM_TRY(add_matrix(p + "ssm_conv1d.weight", gdn_conv_dim, ssm_conv, DType::F32, 0.5f));
      TM_TRY(add_vector(p + "ssm_dt.bias", H, 0.0f, 1.0f));
      TM_TRY(add_vector(p + "ssm_a", H, -2.0f, 1.5f));  // -exp(A_log)
      if (qwen3next) {  // [beta, alpha] per key head
        TM_TRY(add_matrix(p + "ssm_ba.weight", 2 * H, s.n_embd, wt, 4 * w_spread));
      } else {
        TM_TRY(add_matrix(p + "ssm_beta.weight", H, s.n_embd, wt, 4 * w_spread));
        TM_TRY(add_matrix(p + "ssm_alpha.weight", H, s.n_embd, wt, 4 * w_spread));
      }
      TM_TRY(add_vector(p + "ssm_norm.weight", ssm_state, 1.0f, 0.1f));
      TM_TRY(add_matrix(p + "ssm_out.weight", s.n_embd, gdn_inner, wt, w_spread));
    } else if (conv_layer[static_cast<size_t>(l)] && granite_hybrid) {  // a Mamba-2 mixer
      TM_TRY(add_mamba2(p));
    } else if (conv_layer[static_cast<size_t>(l)] && jamba) {  // a Mamba-1 mixer with its dt / B / C norms
      const int64_t DI = 2 * s.n_embd, R = s.ssm_dt_rank > 0 ? s.ssm_dt_rank : (s.n_embd + 15) / 16;
      TM_TRY(add_matrix(p + "ssm_in.weight", 2 * DI, s.n_embd, wt, w_spread));
      TM_TRY(add_matrix(p + "ssm_conv1d.weight", DI, ssm_conv, DType::F32, 0.5f));
      TM_TRY(add_vector(p + "ssm_conv1d.bias", DI, 0.0f, 0.1f));
      TM_TRY(add_matrix(p + "ssm_x.weight", R + 2 * ssm_state, DI, wt, w_spread));
      TM_TRY(add_vector(p + "ssm_dt_norm.weight", R, 1.0f, 0.1f));
      TM_TRY(add_matrix(p + "ssm_dt.weight", DI, R, wt, 4 * w_spread));
      TM_TRY(add_vector(p + "ssm_dt.bias", DI, -2.0f, 1.5f));
      TM_TRY(add_vector(p + "ssm_b_norm.weight", ssm_state, 1.0f, 0.1f));
      TM_TRY(add_vector(p + "ssm_c_norm.weight", ssm_state, 1.0f, 0.1f));
      // -exp(A_log): decay rates in [-7, -1]
      TM_TRY(w.add_tensor(p + "ssm_a", DType::F32, {ssm_state, DI}, dummy_f32(seed, p + "ssm_a", ssm_state * DI, -4.0f, 3.0f)));
      TM_TRY(add_vector(p + "ssm_d", DI, 1.0f, 0.5f));
      TM_TRY(add_matrix(p + "ssm_out.weight", s.n_embd, DI, wt, w_spread));
    } else if (conv_layer[static_cast<size_t>(l)]) {  // lfm2's short convolution: in_proj (b, c, x), kernel, out_proj
      TM_TRY(add_matrix(p + "shortconv.in_proj.weight", 3 * s.n_embd, s.n_embd, wt, w_spread));
      TM_TRY(add_matrix(p + "shortconv.conv.weight", s.n_embd, conv_l, DType::F32, 0.5f));
      TM_TRY(add_matrix(p + "shortconv.out_proj.weight", s.n_embd, s.n_embd, wt, w_spread));
    } else if (deepseek2) {  // the latent attention's weights (per-head attn_k_b / attn_v_b: 3-D, head-major)
      const int64_t R = s.mla_kv_rank, qp = s.n_head * (s.mla_nope + n_rot);
      if (s.mla_q_rank > 0) {
        TM_TRY(add_matrix(p + "attn_q_a.weight", s.mla_q_rank, s.n_embd, wt, w_spread));
        TM_TRY(add_vector(p + "attn_q_a_norm.weight", s.mla_q_rank, 1.0f, 0.1f));
        TM_TRY(add_matrix(p + "attn_q_b.weight", qp, s.mla_q_rank, wt, w_spread));
      } else {
        TM_TRY(add_matrix(p + "attn_q.weight", qp, s.n_embd, wt, w_spread));
      }
      TM_TRY(add_matrix(p + "attn_kv_a_mqa.weight", R + n_rot, s.n_embd, wt, w_spread));
      TM_TRY(add_vector(p + "attn_kv_a_norm.weight", R, 1.0f, 0.1f));
      TM_TRY(add_experts(p + "attn_k_b.weight", s.n_head, R, s.mla_nope, wt, w_spread));
      TM_TRY(add_experts(p + "attn_v_b.weight", s.n_head, s.mla_v, R, wt, w_spread));
    } else if (phi3 || bailing) {  // q, k, v rows stacked
      TM_TRY(add_matrix(p + "attn_qkv.weight", q_dim + 2 * kv_dim, s.n_embd, wt, w_spread));
    } else if (qwen35) {  // queries and gates, per head
      TM_TRY(add_matrix(p + "attn_q.weight", 2 * q_dim, s.n_embd, wt, w_spread));
      TM_TRY(add_matrix(p + "attn_k.weight", kv_dim, s.n_embd, wt, w_spread));
      TM_TRY(add_matrix(p + "attn_v.weight", kv_dim, s.n_embd, wt, w_spread));
    } else {
      TM_TRY(add_matrix(p + "attn_q.weight", q_dim, s.n_embd, wt, w_spread));
      TM_TRY(add_matrix(p + "attn_k.weight", kv_dim, s.n_embd, wt, w_spread));
      TM_TRY(add_matrix(p + "attn_v.weight", kv_dim, s.n_embd, wt, w_spread));
    }
    const bool attn = !conv_layer[static_cast<size_t>(l)];
    if (attn && (s.arch == "qwen2" || s.arch == "qwen2moe" || gptoss || glm4 || glm4moe || s.arch == "seed_oss" ||
                 starcoder2 || stablelm)) {
      TM_TRY(add_vector(p + "attn_q.bias", q_dim, 0.0f, 0.05f));
      TM_TRY(add_vector(p + "attn_k.bias", kv_dim, 0.0f, 0.05f));
      TM_TRY(add_vector(p + "attn_v.bias", kv_dim, 0.0f, 0.05f));
    }
    if (attn && (s.arch == "qwen3" || s.arch == "qwen3moe" || qwen35 || s.arch == "gemma3" || gemma_embd || exaone4 || s.qk_norm || dots1 || lfm2 ||
                 bailing || s.arch == "hunyuan-dense" || hunyuan_moe || apertus || exaone_moe)) {
      TM_TRY(add_vector(p + "attn_q_norm.weight", s.head_dim, 1.0f, 0.1f));
      TM_TRY(add_vector(p + "attn_k_norm.weight", s.head_dim, 1.0f, 0.1f));
      if (apertus) {  // (llama.cpp reads them and its graph leaves them out)
        TM_TRY(add_vector(p + "attn_q_norm.bias", s.head_dim, 0.0f, 0.5f));
        TM_TRY(add_vector(p + "attn_k_norm.bias", s.head_dim, 0.0f, 0.5f));
      }
    }
    if (s.arch == "olmoe" || olmo2 || minimax) {  // over the whole q / k
      TM_TRY(add_vector(p + "attn_q_norm.weight", q_dim, 1.0f, 0.1f));
      TM_TRY(add_vector(p + "attn_k_norm.weight", kv_dim, 1.0f, 0.1f));
    }
    if (attn) TM_TRY(add_matrix(p + "attn_output.weight", s.n_embd, deepseek2 ? s.n_head * s.mla_v : q_dim, wt, w_spread));
    if (falcon_h1) TM_TRY(add_mamba2(p));  // (beside the attention)
    if (post_norms) {  // norm weights as llama.cpp's converter stores them (Gemma's 1 + w)
      TM_TRY(add_vector(p + "post_attention_norm.weight", s.n_embd, 1.0f, 0.1f));
      TM_TRY(add_vector(p + "post_ffw_norm.weight", s.n_embd, 1.0f, 0.1f));
    }
    if (starcoder2 || apertus) TM_TRY(add_vector(p + "attn_output.bias", s.n_embd, 0.0f, 0.05f));
    if (gptoss) {  // output bias, sink logits (of the order of the scores), the FFN norm's name
      TM_TRY(add_vector(p + "attn_output.bias", s.n_embd, 0.0f, 0.05f));
      TM_TRY(add_vector(p + "attn_sinks.weight", s.n_head, 0.0f, 1.0f));
    }
    if (!olmo2 && !exaone4 && !cohere && !phi2)  // (cohere's and phi2's FFN read the attention's normed input)
      TM_TRY(add_vector(p + (gptoss || glm4moe || s.arch == "seed_oss" || qwen35 ? "post_attention_norm.weight"
                             : falcon_h1                                        ? "ffn_norm"  // (its converter's name)
                                                                                : "ffn_norm.weight"),
                        s.n_embd, 1.0f, 0.1f));
    if (moe && l >= s.n_dense_lead && (l + 1) % moe_step == 0) {
      // the router stays F32 (llama.cpp's quantize never quantizes ffn_gate_inp), wider so routing
      // is not a near tie
      TM_TRY(add_matrix(p + "ffn_gate_inp.weight", s.n_expert, s.n_embd, DType::F32, 4 * w_spread));
      TM_TRY(add_experts(p + "ffn_gate_exps.weight", s.n_expert, n_ff_exp, s.n_embd, wt, w_spread));
      TM_TRY(add_experts(p + "ffn_up_exps.weight", s.n_expert, n_ff_exp, s.n_embd, wt, w_spread));
      TM_TRY(add_experts(p + "ffn_down_exps.weight", s.n_expert, s.n_embd, n_ff_exp, wt, w_spread));
      if (gptoss) {  // router and expert biases (F32: [n_ff_exp or n_embd, n_expert])
        TM_TRY(add_vector(p + "ffn_gate_inp.bias", s.n_expert, 0.0f, 0.1f));
        TM_TRY(add_matrix(p + "ffn_gate_exps.bias", s.n_expert, n_ff_exp, DType::F32, 0.05f));
        TM_TRY(add_matrix(p + "ffn_up_exps.bias", s.n_expert, n_ff_exp, DType::F32, 0.05f));
        TM_TRY(add_matrix(p + "ffn_down_exps.bias", s.n_expert, s.n_embd, DType::F32, 0.05f));
      }
      if (sigmoid)  // the selection bias: of the order of the sigmoid scores' spread, so it changes choices
        TM_TRY(add_vector(p + "exp_probs_b.bias", s.n_expert, 0.0f, 0.1f));
      if (ernie_moe)  // ERNIE's bias added to softmax probabilities: of their order (1 / n_expert)
        TM_TRY(add_vector(p + "exp_probs_b.bias", s.n_expert, 0.0f, 0.5f / static_cast<float>(s.n_expert)));
      if (s.arch == "qwen2moe" || qwen35moe || ds_moe || llama4 || hunyuan_moe || exaone_moe || (ernie_moe && n_ff_shexp > 0) ||
          (granite_hybrid && s.n_ff_shexp > 0)) {
        if (s.arch == "qwen2moe" || qwen35moe) TM_TRY(add_vector(p + "ffn_gate_inp_shexp.weight", s.n_embd, 0.0f, 0.1f));
        TM_TRY(add_matrix(p + "ffn_gate_shexp.weight", n_ff_shexp, s.n_embd, wt, w_spread));
        TM_TRY(add_matrix(p + "ffn_up_shexp.weight", n_ff_shexp, s.n_embd, wt, w_spread));
        TM_TRY(add_matrix(p + "ffn_down_shexp.weight", s.n_embd, n_ff_shexp, wt, w_spread));
      }
      continue;
    }
    if (s.arch == "arcee" || apertus) {  // ungated: up, relu squared (xIELU), down
      TM_TRY(add_matrix(p + "ffn_up.weight", s.n_ff, s.n_embd, wt, w_spread));
      TM_TRY(add_matrix(p + "ffn_down.weight", s.n_embd, s.n_ff, wt, w_spread));
      continue;
    }
    if (starcoder2) {  // ungated: up, GELU, down, with biases
      TM_TRY(add_matrix(p + "ffn_up.weight", s.n_ff, s.n_embd, wt, w_spread));
      TM_TRY(add_vector(p + "ffn_up.bias", s.n_ff, 0.0f, 0.05f));
      TM_TRY(add_matrix(p + "ffn_down.weight", s.n_embd, s.n_ff, wt, w_spread));
      TM_TRY(add_vector(p + "ffn_down.bias", s.n_embd, 0.0f, 0.05f));
      continue;
    }
    if (phi3 || glm4) {  // gate rows, then up rows
      TM_TRY(add_matrix(p + "ffn_up.weight", 2 * s.n_ff, s.n_embd, wt, w_spread));
    } else {
      TM_TRY(add_matrix(p + "ffn_gate.weight", s.n_ff, s.n_embd, wt, w_spread));
      TM_TRY(add_matrix(p + "ffn_up.weight", s.n_ff, s.n_embd, wt, w_spread));
    }
    TM_TRY(add_matrix(p + "ffn_down.weight", s.n_embd, s.n_ff, wt, w_spread));
  }
  return w.write(out_path);
}

}  // namespace tmill
