// HF folder -> GGUF: metadata keys, tensor names/shapes/dtypes, values (incl. the llama q/k row
// permutation checked against an independent index computation), tied embeddings, qwen2 biases,
// qwen3 q/k norms, llama3 rope_freqs against a hand computation, sharded input, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/fp16.h"
#include "convert/hf_model.h"
#include "formats/gguf.h"
#include "hf_folder.h"

using namespace tmill;
using namespace tmill::test;
using nlohmann::json;

namespace {

std::string convert_error(const std::string& dir, const std::string& outtype = "auto") {
  auto st = convert_hf_to_gguf(dir, temp_dir() + "/out.gguf", HfConvertOptions{outtype, "", nullptr});
  return st.ok() ? "<converted OK>" : st.error();
}

// Tensor contents as f32 (F32/F16/BF16).
std::vector<float> values_of(const GgufTensorInfo& t) {
  std::vector<float> v(static_cast<size_t>(t.n_elements));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.type == DType::F32) {
      std::memcpy(&v[i], t.data + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      v[i] = t.type == DType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
    }
  }
  return v;
}

// The GGUF name of every HF tensor, spelled out independently of the converter's table.
std::string gguf_name(const std::string& hf) {
  static const std::map<std::string, std::string> sub = {
      {"input_layernorm.weight", "attn_norm.weight"},       {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},         {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},         {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},             {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},             {"self_attn.o_proj.bias", "attn_output.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},          {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
      {"self_attn.qkv_proj.weight", "attn_qkv.weight"},     {"mlp.gate_up_proj.weight", "ffn_up.weight"}};
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const size_t dot = hf.find('.', 13);  // after "model.layers."
  return "blk." + hf.substr(13, dot - 13) + "." + sub.at(hf.substr(dot + 1));
}

// Independent statement of llama.cpp's q/k permutation: within each head of `hd` rows, GGUF row 2j is
// HF row j and GGUF row 2j+1 is HF row j + hd/2 (rotate-half pairs (j, j+hd/2) become adjacent).
std::vector<float> permute_rows(const HfTensor& t, int64_t hd) {
  const int64_t rows = t.shape[0], cols = t.values.size() / rows;
  std::vector<float> out(t.values.size());
  for (int64_t h = 0; h < rows / hd; ++h)
    for (int64_t j = 0; j < hd / 2; ++j)
      for (int64_t c = 0; c < cols; ++c) {
        out[(h * hd + 2 * j) * cols + c] = t.values[(h * hd + j) * cols + c];
        out[(h * hd + 2 * j + 1) * cols + c] = t.values[(h * hd + hd / 2 + j) * cols + c];
      }
  return out;
}

// Checks names, shapes (reversed), dtypes and values of every converted tensor against the HF source.
void check_tensors(const GgufFile& f, const HfTensors& src, DType weight_type, bool permute, int64_t hd,
                   bool tied) {
  std::set<std::string> want;
  for (const auto& [hf, t] : src) {
    if (hf == "lm_head.weight" && tied) continue;
    const std::string name = gguf_name(hf);
    want.insert(name);
    const GgufTensorInfo* g = f.find_tensor(name);
    ASSERT_NE(g, nullptr) << name;
    EXPECT_EQ(g->ne, std::vector<int64_t>(t.shape.rbegin(), t.shape.rend())) << name;
    EXPECT_EQ(g->type, t.shape.size() == 1 ? DType::F32 : weight_type) << name;
    const bool is_qk = name.find(".attn_q.") != std::string::npos || name.find(".attn_k.") != std::string::npos;
    EXPECT_EQ(values_of(*g), permute && is_qk ? permute_rows(t, hd) : t.values) << name;
  }
  std::set<std::string> got;
  for (const auto& t : f.tensors())
    if (t.name.rfind("rope_", 0) != 0) got.insert(t.name);  // generated: rope_freqs, rope_factors_*
  EXPECT_EQ(got, want);
}

}  // namespace

TEST(HfConvert, LlamaF32) {
  json cfg = tiny_llama_config();
  auto src = hf_weights(cfg);
  auto f = convert(write_hf_folder(cfg, src, "F32"));
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("general.type"), "model");
  EXPECT_EQ(f.get_string("general.name"), "hf-model");
  EXPECT_EQ(f.get_int("llama.block_count"), 2);
  EXPECT_EQ(f.get_int("llama.context_length"), 128);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 16);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), 24);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 4);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(f.get_int("llama.vocab_size"), 10);
  EXPECT_EQ(f.get_int("llama.rope.dimension_count"), 4);
  EXPECT_EQ(f.get_int("general.file_type"), 0);  // ALL_F32
  EXPECT_EQ(f.get_int("general.quantization_version"), 2);
  EXPECT_EQ(f.find("llama.rope.freq_base")->type, GgufType::F32);
  EXPECT_EQ(f.get_number("llama.rope.freq_base"), 10000.0);
  EXPECT_EQ(f.get_number("llama.attention.layer_norm_rms_epsilon"), static_cast<double>(1e-5f));
  EXPECT_EQ(f.find("llama.block_count")->type, GgufType::U32);
  EXPECT_EQ(f.find("llama.attention.key_length"), nullptr);  // no head_dim in config.json
  EXPECT_EQ(f.find("llama.rope.scaling.type"), nullptr);
  EXPECT_EQ(f.find_tensor("rope_freqs.weight"), nullptr);
  check_tensors(f, src, DType::F32, /*permute=*/true, /*hd=*/4, /*tied=*/false);
  // Spot check of the permutation on one row: GGUF blk.0.attn_k row 1 (head 0, pair 0, second half)
  // is HF row 2 (= hd/2 + 0).
  const auto& k = src.at("model.layers.0.self_attn.k_proj.weight");
  auto kv = values_of(*f.find_tensor("blk.0.attn_k.weight"));
  for (int c = 0; c < 16; ++c) EXPECT_EQ(kv[1 * 16 + c], k.values[2 * 16 + c]);
}

TEST(HfConvert, Bf16SourceKeptOrConverted) {
  json cfg = tiny_llama_config();
  cfg["torch_dtype"] = "bfloat16";
  auto src = hf_weights(cfg);
  const std::string dir = write_hf_folder(cfg, src, "BF16");
  auto f = convert(dir);  // auto keeps BF16
  EXPECT_EQ(f.get_int("general.file_type"), 32);
  check_tensors(f, src, DType::BF16, true, 4, false);
  auto f16 = convert(dir, "f16");
  EXPECT_EQ(f16.get_int("general.file_type"), 1);
  check_tensors(f16, src, DType::F16, true, 4, false);
  auto f32 = convert(dir, "f32");
  check_tensors(f32, src, DType::F32, true, 4, false);
}

TEST(HfConvert, F32ToBf16RoundsToNearestEven) {
  json cfg = tiny_llama_config();
  auto src = hf_weights(cfg);
  auto& emb = src.at("model.embed_tokens.weight").values;
  emb[0] = 1.0f + std::ldexp(1.0f, -8);      // halfway between two bf16 values: ties to even (1.0)
  emb[1] = 1.0f + 3 * std::ldexp(1.0f, -8);  // ties to even: 1 + 2^-6
  auto f = convert(write_hf_folder(cfg, src, "F32"), "bf16");
  auto v = values_of(*f.find_tensor("token_embd.weight"));
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 1.0f + std::ldexp(1.0f, -6));
}

TEST(HfConvert, ShardedEqualsSingleFile) {
  json cfg = tiny_llama_config();
  auto src = hf_weights(cfg);
  auto a = convert(write_hf_folder(cfg, src, "F32", false));
  auto b = convert(write_hf_folder(cfg, src, "F32", true));
  check_tensors(b, src, DType::F32, true, 4, false);
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (const auto& t : a.tensors()) {
    const GgufTensorInfo* u = b.find_tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(std::memcmp(t.data, u->data, t.nbytes), 0) << t.name;
  }
}

TEST(HfConvert, TiedEmbeddings) {
  json cfg = tiny_llama_config();
  cfg["tie_word_embeddings"] = true;
  auto src = hf_weights(cfg);
  ASSERT_EQ(src.count("lm_head.weight"), 0u);
  auto f = convert(write_hf_folder(cfg, src, "F32"));
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  check_tensors(f, src, DType::F32, true, 4, true);
  // A checkpoint that still carries lm_head.weight: it is the embedding, so it is dropped too.
  src["lm_head.weight"] = src.at("model.embed_tokens.weight");
  auto g = convert(write_hf_folder(cfg, src, "F32"));
  EXPECT_EQ(g.find_tensor("output.weight"), nullptr);
}

TEST(HfConvert, Qwen2BiasesNoPermutation) {
  json cfg = tiny_llama_config();
  cfg["architectures"] = {"Qwen2ForCausalLM"};
  cfg["rope_theta"] = 1000000.0;
  cfg["tie_word_embeddings"] = true;
  auto src = hf_weights(cfg);
  ASSERT_EQ(src.count("model.layers.1.self_attn.q_proj.bias"), 1u);
  auto f = convert(write_hf_folder(cfg, src, "BF16"));
  EXPECT_EQ(f.get_string("general.architecture"), "qwen2");
  EXPECT_EQ(f.get_int("qwen2.block_count"), 2);
  EXPECT_EQ(f.get_number("qwen2.rope.freq_base"), 1e6);
  EXPECT_EQ(f.find_tensor("blk.0.attn_output.bias"), nullptr);
  const GgufTensorInfo* qb = f.find_tensor("blk.1.attn_q.bias");
  ASSERT_NE(qb, nullptr);
  EXPECT_EQ(qb->type, DType::F32);
  EXPECT_EQ(qb->ne, std::vector<int64_t>{16});
  check_tensors(f, src, DType::BF16, /*permute=*/false, 4, true);
}

TEST(HfConvert, LlamaAttentionBiasIsPermutedToo) {
  json cfg = tiny_llama_config();
  cfg["attention_bias"] = true;
  auto src = hf_weights(cfg);
  auto f = convert(write_hf_folder(cfg, src, "F32"));
  ASSERT_NE(f.find_tensor("blk.0.attn_output.bias"), nullptr);
  check_tensors(f, src, DType::F32, true, 4, false);  // q/k biases permuted like their rows
}

TEST(HfConvert, Qwen3HeadDimAndQkNorm) {
  json cfg = tiny_llama_config();
  cfg["architectures"] = {"Qwen3ForCausalLM"};
  cfg["head_dim"] = 8;  // q_dim = 32 != hidden 16
  auto src = hf_weights(cfg);
  auto f = convert(write_hf_folder(cfg, src, "F32"));
  EXPECT_EQ(f.get_string("general.architecture"), "qwen3");
  EXPECT_EQ(f.get_int("qwen3.attention.key_length"), 8);
  EXPECT_EQ(f.get_int("qwen3.attention.value_length"), 8);
  EXPECT_EQ(f.get_int("qwen3.rope.dimension_count"), 8);
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->ne, (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(f.find_tensor("blk.0.attn_output.weight")->ne, (std::vector<int64_t>{32, 16}));
  const GgufTensorInfo* qn = f.find_tensor("blk.1.attn_k_norm.weight");
  ASSERT_NE(qn, nullptr);
  EXPECT_EQ(qn->ne, std::vector<int64_t>{8});
  EXPECT_EQ(qn->type, DType::F32);
  check_tensors(f, src, DType::F32, false, 8, false);
}

// Phi3ForCausalLM as llama.cpp's Phi3MiniModel writes it: qkv_proj / gate_up_proj kept fused,
// partial rotary dims, the original context, LongRoPE factors and the attention factor.
TEST(HfConvert, Phi3FusedTensorsAndLongRope) {
  json cfg = tiny_llama_config();
  cfg["architectures"] = {"Phi3ForCausalLM"};
  cfg["hidden_size"] = 32;  // head_dim 8; partial 0.75: int(0.75 * 32) / 4 = 6 rotary dims
  cfg["partial_rotary_factor"] = 0.75;
  cfg["original_max_position_embeddings"] = 32;  // max_position_embeddings 128: scale 4
  cfg["sliding_window"] = 64;
  cfg["rope_scaling"] = {{"type", "longrope"}, {"short_factor", {1.0, 1.5, 2.0}}, {"long_factor", {2.0, 4.0, 8.0}}};
  auto src = hf_weights(cfg);
  auto f = convert(write_hf_folder(cfg, src, "F32"));
  EXPECT_EQ(f.get_string("general.architecture"), "phi3");
  EXPECT_EQ(f.get_int("phi3.rope.dimension_count"), 6);
  EXPECT_EQ(f.get_int("phi3.context_length"), 128);
  EXPECT_EQ(f.get_int("phi3.rope.scaling.original_context_length"), 32);
  EXPECT_EQ(f.get_int("phi3.attention.sliding_window"), 64);
  EXPECT_EQ(f.find("phi3.rope.scaling.type"), nullptr);  // LongRoPE is carried by the tensors
  ASSERT_NE(f.get_number("phi3.rope.scaling.attn_factor"), std::nullopt);
  EXPECT_NEAR(*f.get_number("phi3.rope.scaling.attn_factor"), std::sqrt(1 + std::log(4.0) / std::log(32.0)), 1e-6);
  EXPECT_EQ(f.find_tensor("blk.0.attn_qkv.weight")->ne, (std::vector<int64_t>{32, 32 + 2 * 16}));
  EXPECT_EQ(f.find_tensor("blk.1.ffn_up.weight")->ne, (std::vector<int64_t>{32, 48}));
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_gate.weight"), nullptr);
  EXPECT_EQ(values_of(*f.find_tensor("rope_factors_short.weight")), (std::vector<float>{1.0f, 1.5f, 2.0f}));
  EXPECT_EQ(values_of(*f.find_tensor("rope_factors_long.weight")), (std::vector<float>{2.0f, 4.0f, 8.0f}));
  check_tensors(f, src, DType::F32, false, 8, false);  // fused tensors copied row for row

  // without rope_scaling (Phi-3-mini-4k): no factors, the original context still written
  cfg.erase("rope_scaling");
  cfg.erase("original_max_position_embeddings");
  auto g = convert(write_hf_folder(cfg, hf_weights(cfg), "F32"));
  EXPECT_EQ(g.find_tensor("rope_factors_long.weight"), nullptr);
  EXPECT_EQ(g.find("phi3.rope.scaling.attn_factor"), nullptr);
  EXPECT_EQ(g.get_int("phi3.rope.scaling.original_context_length"), 128);

  // factor arrays must cover the rotary dims
  cfg["rope_scaling"] = {{"type", "longrope"}, {"short_factor", {1.0, 1.5}}, {"long_factor", {2.0, 4.0}}};
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(cfg, hf_weights(cfg), "F32")), "expected 3 (rotary dims / 2)");
  // a yarn Phi-3 is not what this converter writes
  cfg["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(cfg, hf_weights(cfg), "F32")), "longrope rope_scaling only");
}

TEST(HfConvert, Llama3RopeFreqsMatchHandComputation) {
  json cfg = tiny_llama_config();
  cfg["hidden_size"] = 64;
  cfg["num_attention_heads"] = 2;  // head_dim 32: 16 frequencies
  cfg["num_key_value_heads"] = 1;
  cfg["rope_theta"] = 10000.0;
  cfg["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 1024}};
  auto src = hf_weights(cfg);
  auto f = convert(write_hf_folder(cfg, src, "F32"));
  EXPECT_EQ(f.tensors().front().name, "rope_freqs.weight");  // generated tensors come first
  const GgufTensorInfo* rf = f.find_tensor("rope_freqs.weight");
  ASSERT_NE(rf, nullptr);
  EXPECT_EQ(rf->type, DType::F32);
  ASSERT_EQ(rf->ne, std::vector<int64_t>{16});
  EXPECT_EQ(f.find("llama.rope.scaling.type"), nullptr);  // llama3 is carried by the tensor only
  auto got = values_of(*rf);
  int n_one = 0, n_factor = 0, n_mid = 0;
  for (int i = 0; i < 16; ++i) {
    // freq_i = theta^(-2i/d); wavelength 2*pi/freq; below 1024/4 unscaled, above 1024/1 divided by 8,
    // in between 1 / ((1 - s)/8 + s) with s = (1024/wavelength - 1) / (4 - 1).
    const double wavelen = 2 * M_PI * std::pow(10000.0, 2.0 * i / 32.0);
    double want;
    if (wavelen < 256) {
      want = 1, ++n_one;
    } else if (wavelen > 1024) {
      want = 8, ++n_factor;
    } else {
      const double s = (1024 / wavelen - 1) / 3;
      want = 1 / ((1 - s) / 8 + s), ++n_mid;
    }
    EXPECT_NEAR(got[i], want, 1e-5 * want) << i;
  }
  EXPECT_GT(n_one, 0);
  EXPECT_GT(n_factor, 0);
  EXPECT_GT(n_mid, 0);
  check_tensors(f, src, DType::F32, true, 32, false);
}

TEST(HfConvert, LinearAndYarnRopeScalingMetadata) {
  json cfg = tiny_llama_config();
  cfg["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  auto f = convert(write_hf_folder(cfg, hf_weights(cfg), "F32"));
  EXPECT_EQ(f.get_string("llama.rope.scaling.type"), "linear");
  EXPECT_EQ(f.get_number("llama.rope.scaling.factor"), 4.0);
  cfg["architectures"] = {"Qwen2ForCausalLM"};
  cfg["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  auto g = convert(write_hf_folder(cfg, hf_weights(cfg), "F32"));
  EXPECT_EQ(g.get_string("qwen2.rope.scaling.type"), "yarn");
  EXPECT_EQ(g.get_number("qwen2.rope.scaling.factor"), 4.0);
  EXPECT_EQ(g.get_int("qwen2.rope.scaling.original_context_length"), 32768);
}

TEST(HfConvert, TokenizerHookRunsBeforeQuantizationVersion) {
  json cfg = tiny_llama_config();
  const std::string dir = write_hf_folder(cfg, hf_weights(cfg), "F32");
  HfConvertOptions o;
  std::string seen_dir;
  o.add_tokenizer = [&](const std::string& d, GgufWriter& w) -> Status {
    seen_dir = d;
    w.set_string("tokenizer.ggml.model", "llama");
    return {};
  };
  const std::string out = temp_dir() + "/tok.gguf";
  ASSERT_TRUE(convert_hf_to_gguf(dir, out, o).ok());
  EXPECT_EQ(seen_dir, dir);
  auto f = GgufFile::open(out);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f->metadata().back().first, "general.quantization_version");
  o.add_tokenizer = [](const std::string&, GgufWriter&) -> Status { return Error{"no tokenizer.json"}; };
  auto st = convert_hf_to_gguf(dir, out + "2", o);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error(), "no tokenizer.json");
}

TEST(HfConvert, Errors) {
  json cfg = tiny_llama_config();
  auto src = hf_weights(cfg);
  // Missing tensor.
  auto missing = src;
  missing.erase("model.layers.1.mlp.up_proj.weight");
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(cfg, missing, "F32")), "missing tensor 'blk.1.ffn_up.weight'");
  // Wrong shape.
  auto bad = src;
  bad["model.layers.0.self_attn.k_proj.weight"] = {{16, 16}, std::vector<float>(256, 0.0f)};
  std::string err = convert_error(write_hf_folder(cfg, bad, "F32"));
  EXPECT_ERROR_HAS(err, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_ERROR_HAS(err, "shape [16, 16] does not match config.json (expected [8, 16])");
  // Unknown tensor.
  auto extra = src;
  extra["model.vision_tower.weight"] = {{2}, {1, 2}};
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(cfg, extra, "F32")),
                   "cannot map tensor 'model.vision_tower.weight'");
  // A layer the config does not have.
  extra = src;
  extra["model.layers.2.input_layernorm.weight"] = {{16}, std::vector<float>(16, 1.0f)};
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(cfg, extra, "F32")), "unexpected for LlamaForCausalLM");
  // Untied without lm_head.
  auto untied = src;
  untied.erase("lm_head.weight");
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(cfg, untied, "F32")), "missing tensor 'output.weight'");
  // Integer weights.
  const std::string dir = write_hf_folder(cfg, src, "F32");
  std::vector<StTensor> st;
  for (const auto& [name, t] : src) st.push_back({name, "F32", t.shape, encode_floats(t.values, "F32")});
  st[0].dtype = "I32";  // same byte size as F32
  write_bytes(dir + "/model.safetensors", build_safetensors(st));
  err = convert_error(dir);
  EXPECT_ERROR_HAS(err, "unsupported dtype I32");
  EXPECT_ERROR_HAS(err, st[0].name);
  // Bad output type, unsupported architecture and rope scaling.
  const std::string ok_dir = write_hf_folder(cfg, src, "F32");
  EXPECT_ERROR_HAS(convert_error(ok_dir, "q4_0"), "unknown output type 'q4_0'");
  json c2 = cfg;
  c2["architectures"] = {"GPT2LMHeadModel"};
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(c2, src, "F32")), "unsupported architecture 'GPT2LMHeadModel'");
  c2 = cfg;
  c2["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(c2, src, "F32")), "unsupported rope_scaling type 'dynamic'");
  EXPECT_ERROR_HAS(convert_error(temp_dir()), "config.json");
}

TEST(HfConvert, TensorNameMapping) {
  EXPECT_EQ(*hf_tensor_to_gguf_name("model.layers.12.self_attn.o_proj.weight"), "blk.12.attn_output.weight");
  EXPECT_EQ(*hf_tensor_to_gguf_name("model.layers.0.self_attn.k_norm.weight"), "blk.0.attn_k_norm.weight");
  EXPECT_EQ(*hf_tensor_to_gguf_name("model.layers.3.mlp.down_proj.bias"), "blk.3.ffn_down.bias");
  EXPECT_EQ(*hf_tensor_to_gguf_name("model.layers.0.self_attn.rotary_emb.inv_freq"), "");
  EXPECT_FALSE(hf_tensor_to_gguf_name("model.layers.x.mlp.up_proj.weight").ok());
  EXPECT_FALSE(hf_tensor_to_gguf_name("model.layers.01.mlp.up_proj.weight").ok());
  EXPECT_FALSE(hf_tensor_to_gguf_name("model.layers.1.mlp.up_proj.scales").ok());
  EXPECT_FALSE(hf_tensor_to_gguf_name("model.layers.1.mlp.up_proj").ok());
  // The permutation formula on head_dim 8: output rows 0..7 come from 0,4,1,5,2,6,3,7.
  std::vector<int64_t> rows;
  for (int r = 0; r < 8; ++r) rows.push_back(llama_qk_permuted_source_row(r, 8));
  EXPECT_EQ(rows, (std::vector<int64_t>{0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_EQ(llama_qk_permuted_source_row(9, 8), 12);  // second head
}
