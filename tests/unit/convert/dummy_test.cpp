// `tokenmill dummy`: real shapes, reproducible bytes, the vocabulary copied verbatim, and a file
// that reads back (GgufFile) with exactly the metadata and tensors that were written. That the
// model layer loads these files with the shape asked for is tested in tests/unit/model/model_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "convert/dummy.h"
#include "formats/gguf.h"
#include "test_support.h"

using namespace tmill;

namespace {
std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}
std::string write(const std::string& shape, DType t, uint64_t seed, const std::string& vocab = "", bool pure = false) {
  DummyOptions o;
  o.shape = *find_shape(shape);
  o.dtype = t;
  o.seed = seed;
  o.vocab_path = vocab;
  o.pure = pure;
  std::string path = test::temp_dir() + "/m.gguf";
  auto st = write_dummy_model(o, path);
  EXPECT_TRUE(st.ok()) << st.error();
  return path;
}
}  // namespace

TEST(Dummy, SameSeedSameBytesDifferentSeedDifferentBytes) {
  const std::string a = slurp(write("tiny-qwen2", DType::Q8_0, 1));
  const std::string b = slurp(write("tiny-qwen2", DType::Q8_0, 1));
  const std::string c = slurp(write("tiny-qwen2", DType::Q8_0, 2));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a.size(), c.size());
}

TEST(Dummy, VocabularyIsCopiedVerbatim) {
  const std::string vocab = test::source_path("tests/data/tokenizers/ggml-vocab-llama-spm.gguf");
  auto src = GgufFile::open(vocab);
  ASSERT_TRUE(src.ok());
  auto out = GgufFile::open(write("tiny-llama", DType::F16, 5, vocab));
  ASSERT_TRUE(out.ok()) << out.error();
  int copied = 0;
  for (const auto& [k, v] : src->metadata()) {
    if (k.rfind("tokenizer.", 0) != 0) continue;
    const GgufValue* w = out->find(k);
    ASSERT_NE(w, nullptr) << k;
    EXPECT_TRUE(*w == v) << k;
    ++copied;
  }
  EXPECT_GE(copied, 5);
  // the vocabulary's size decides the embedding rows
  EXPECT_EQ(out->find_tensor("token_embd.weight")->ne[1], 32000);
}

TEST(Dummy, Q4_0DefaultMixKeepsTheOutputInQ8_0UnlessPure) {
  // tiny-qwen2 is tied: the embedding is the output matrix; 64 columns do not fit 256-blocks -> Q8_0
  auto mix = GgufFile::open(write("tiny-qwen2", DType::Q4_0, 1));
  ASSERT_TRUE(mix.ok());
  EXPECT_EQ(mix->find_tensor("token_embd.weight")->type, DType::Q8_0);
  EXPECT_EQ(mix->find_tensor("blk.0.attn_q.weight")->type, DType::Q4_0);
  auto pure = GgufFile::open(write("tiny-qwen2", DType::Q4_0, 1, "", true));
  ASSERT_TRUE(pure.ok());
  EXPECT_EQ(pure->find_tensor("token_embd.weight")->type, DType::Q4_0);
}

TEST(Dummy, IQ4TypesWithLlamaCppsFallbacks) {
  // tiny-qwen2 rows have 64 columns: IQ4_NL fits them; IQ4_XS (256-blocks) falls back to IQ4_NL as in
  // llama.cpp; the file type says which was asked for.
  auto nl = GgufFile::open(write("tiny-qwen2", DType::IQ4_NL, 1));
  ASSERT_TRUE(nl.ok());
  EXPECT_EQ(nl->find_tensor("blk.0.attn_q.weight")->type, DType::IQ4_NL);
  EXPECT_EQ(nl->find_tensor("token_embd.weight")->type, DType::Q8_0);
  EXPECT_EQ(nl->get_int("general.file_type"), 25);
  auto xs = GgufFile::open(write("tiny-qwen2", DType::IQ4_XS, 1));
  ASSERT_TRUE(xs.ok());
  EXPECT_EQ(xs->find_tensor("blk.0.attn_q.weight")->type, DType::IQ4_NL);
  EXPECT_EQ(xs->get_int("general.file_type"), 30);
  auto pure = GgufFile::open(write("tiny-qwen2", DType::IQ4_NL, 1, "", true));
  ASSERT_TRUE(pure.ok());
  EXPECT_EQ(pure->find_tensor("token_embd.weight")->type, DType::IQ4_NL);
}

TEST(Dummy, MXFP4WeightsWithAQ8_0Output) {
  // Every 2-D weight MXFP4 (32-blocks fit tiny-qwen2's 64 columns), the tied embedding / output Q8_0
  // as llama.cpp's MXFP4_MOE keeps it, file type 38; --pure makes it MXFP4 too.
  auto f = GgufFile::open(write("tiny-qwen2", DType::MXFP4, 1));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->type, DType::MXFP4);
  EXPECT_EQ(f->find_tensor("blk.0.ffn_down.weight")->type, DType::MXFP4);
  EXPECT_EQ(f->find_tensor("token_embd.weight")->type, DType::Q8_0);
  EXPECT_EQ(f->get_int("general.file_type"), 38);
  auto pure = GgufFile::open(write("tiny-qwen2", DType::MXFP4, 1, "", true));
  ASSERT_TRUE(pure.ok());
  EXPECT_EQ(pure->find_tensor("token_embd.weight")->type, DType::MXFP4);
}

TEST(Dummy, RealShapesHaveTheirParameterCounts) {
  // Parameter counts of the real models (embedding counted once when tied), without writing them.
  auto params = [](const ModelShape& s) {
    const int64_t q = s.n_head * s.head_dim, kv = s.n_head_kv * s.head_dim;
    int64_t per_layer = s.n_embd * q + 2 * s.n_embd * kv + q * s.n_embd + 3 * s.n_embd * s.n_ff + 2 * s.n_embd;
    if (s.arch == "qwen2") per_layer += q + 2 * kv;
    if (s.arch == "qwen3") per_layer += 2 * s.head_dim;
    return s.n_vocab * s.n_embd * (s.tied ? 1 : 2) + s.n_layer * per_layer + s.n_embd;
  };
  EXPECT_NEAR(params(*find_shape("qwen2.5-0.5b")) / 1e9, 0.494, 0.001);
  EXPECT_NEAR(params(*find_shape("qwen2.5-1.5b")) / 1e9, 1.544, 0.001);
  EXPECT_NEAR(params(*find_shape("qwen2.5-7b")) / 1e9, 7.616, 0.001);
  EXPECT_NEAR(params(*find_shape("llama-3.2-1b")) / 1e9, 1.236, 0.001);
  EXPECT_NEAR(params(*find_shape("llama-3-8b")) / 1e9, 8.030, 0.001);
}

// MoE dummies: llama.cpp's keys and 3-D expert tensors [n_embd, n_ff_exp, n_expert] (down transposed),
// the router F32 whatever the type, qwen2moe's shared expert and its gate vector.
TEST(Dummy, MixtureOfExpertsTensorsAndKeys) {
  auto f = GgufFile::open(write("tiny-qwen2moe", DType::Q8_0, 3));
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->get_int("qwen2moe.expert_count"), 8);
  EXPECT_EQ(f->get_int("qwen2moe.expert_used_count"), 2);
  EXPECT_EQ(f->get_int("qwen2moe.expert_feed_forward_length"), 32);
  EXPECT_EQ(f->get_int("qwen2moe.expert_shared_feed_forward_length"), 96);
  const GgufTensorInfo* gate = f->find_tensor("blk.1.ffn_gate_exps.weight");
  const GgufTensorInfo* down = f->find_tensor("blk.1.ffn_down_exps.weight");
  const GgufTensorInfo* router = f->find_tensor("blk.1.ffn_gate_inp.weight");
  ASSERT_TRUE(gate && down && router);
  EXPECT_EQ(gate->ne, (std::vector<int64_t>{64, 32, 8}));
  EXPECT_EQ(gate->type, DType::Q8_0);
  EXPECT_EQ(down->ne, (std::vector<int64_t>{32, 64, 8}));
  EXPECT_EQ(router->ne, (std::vector<int64_t>{64, 8}));
  EXPECT_EQ(router->type, DType::F32);
  EXPECT_EQ(f->find_tensor("blk.1.ffn_gate_inp_shexp.weight")->ne, (std::vector<int64_t>{64}));
  EXPECT_EQ(f->find_tensor("blk.1.ffn_down_shexp.weight")->ne, (std::vector<int64_t>{96, 64}));
  EXPECT_EQ(f->find_tensor("blk.1.ffn_gate.weight"), nullptr);
  EXPECT_NE(f->find_tensor("blk.1.attn_q.bias"), nullptr);
  // olmoe and Mixtral-style llama: experts of feed_forward_length rows, no expert_feed_forward_length
  auto o = GgufFile::open(write("tiny-olmoe", DType::F16, 3));
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o->get_int("olmoe.expert_feed_forward_length").has_value());
  EXPECT_EQ(o->find_tensor("blk.0.ffn_up_exps.weight")->ne, (std::vector<int64_t>{64, 64, 8}));
  EXPECT_EQ(o->find_tensor("blk.0.attn_k_norm.weight")->ne, (std::vector<int64_t>{64}));  // whole k
  auto l = GgufFile::open(write("tiny-mixtral", DType::F16, 3));
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->get_int("llama.expert_count"), 8);
}

TEST(Dummy, RealMoeShapesHaveTheirParameterCounts) {
  auto params = [](const ModelShape& s) {
    const int64_t q = s.n_head * s.head_dim, kv = s.n_head_kv * s.head_dim;
    const int64_t ff_exp = s.n_ff_exp ? s.n_ff_exp : s.n_ff;
    int64_t per_layer = s.n_embd * q + 2 * s.n_embd * kv + q * s.n_embd + 2 * s.n_embd;
    per_layer += s.n_expert * (3 * s.n_embd * ff_exp + s.n_embd);
    if (s.n_ff_shexp) per_layer += 3 * s.n_embd * s.n_ff_shexp + s.n_embd;
    return s.n_vocab * s.n_embd * (s.tied ? 1 : 2) + s.n_layer * per_layer + s.n_embd;
  };
  EXPECT_NEAR(params(*find_shape("olmoe-1b-7b")) / 1e9, 6.92, 0.01);
  EXPECT_NEAR(params(*find_shape("qwen3-30b-a3b")) / 1e9, 30.53, 0.01);
  EXPECT_NEAR(params(*find_shape("qwen1.5-moe-a2.7b")) / 1e9, 14.32, 0.01);
  EXPECT_NEAR(params(*find_shape("mixtral-8x7b")) / 1e9, 46.70, 0.01);
}

// gemma2 / gemma3 / Mistral dummies: llama.cpp's keys (windows, soft-capping, the sliding layers'
// RoPE base, rope scaling) and tensors (post-norms, gemma3's per-head q/k norms, no output.weight).
TEST(Dummy, GemmaAndSlidingWindowKeysAndTensors) {
  auto g2 = GgufFile::open(write("tiny-gemma2", DType::F16, 3));
  ASSERT_TRUE(g2.ok()) << g2.error();
  EXPECT_EQ(g2->get_int("gemma2.attention.sliding_window"), 8);
  EXPECT_EQ(g2->get_number("gemma2.attn_logit_softcapping"), 50.0);
  EXPECT_EQ(g2->get_number("gemma2.final_logit_softcapping"), 30.0);
  EXPECT_EQ(g2->get_int("gemma2.attention.key_length"), 32);
  EXPECT_NE(g2->find_tensor("blk.2.post_attention_norm.weight"), nullptr);
  EXPECT_NE(g2->find_tensor("blk.2.post_ffw_norm.weight"), nullptr);
  EXPECT_EQ(g2->find_tensor("output.weight"), nullptr);
  EXPECT_EQ(g2->find_tensor("blk.0.attn_q_norm.weight"), nullptr);
  auto g3 = GgufFile::open(write("tiny-gemma3", DType::F16, 3));
  ASSERT_TRUE(g3.ok()) << g3.error();
  EXPECT_EQ(g3->get_number("gemma3.rope.freq_base_swa"), 10000.0);
  EXPECT_EQ(g3->get_string("gemma3.rope.scaling.type"), "linear");
  EXPECT_EQ(g3->get_number("gemma3.rope.scaling.factor"), 2.0);
  EXPECT_FALSE(g3->get_number("gemma3.attn_logit_softcapping").has_value());
  EXPECT_EQ(g3->find_tensor("blk.6.attn_k_norm.weight")->ne, (std::vector<int64_t>{32}));
  auto mi = GgufFile::open(write("tiny-mistral", DType::F16, 3));
  ASSERT_TRUE(mi.ok()) << mi.error();
  EXPECT_EQ(mi->get_int("llama.attention.sliding_window"), 8);
  auto y = GgufFile::open(write("tiny-llama-yarn", DType::F16, 3));
  ASSERT_TRUE(y.ok()) << y.error();
  EXPECT_EQ(y->get_string("llama.rope.scaling.type"), "yarn");
  EXPECT_EQ(y->get_int("llama.rope.scaling.original_context_length"), 32);
  // qwen2 has no sliding window here
  DummyOptions o;
  o.shape = *find_shape("tiny-qwen2");
  o.shape.n_swa = 16;
  EXPECT_FALSE(write_dummy_model(o, test::temp_dir() + "/bad.gguf").ok());
}

// --std S: the matrices' values have standard deviation S (uniform in +-S sqrt 3), every family.
TEST(Dummy, StdSetsTheWeightsSpread) {
  for (const char* shape : {"tiny-llama", "tiny-gemma3", "tiny-qwen3moe"}) {
    DummyOptions o;
    o.shape = *find_shape(shape);
    o.dtype = DType::F32;
    o.std = 0.2f;
    const std::string path = test::temp_dir() + "/std.gguf";
    ASSERT_TRUE(write_dummy_model(o, path).ok());
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.ok());
    for (const char* name : {"token_embd.weight", "blk.0.attn_q.weight"}) {
      const GgufTensorInfo* t = f->find_tensor(name);
      const auto* v = reinterpret_cast<const float*>(t->data);
      double ss = 0, mx = 0;
      for (int64_t i = 0; i < t->n_elements; ++i) {
        ss += double(v[i]) * v[i];
        mx = std::max<double>(mx, std::abs(v[i]));
      }
      EXPECT_NEAR(std::sqrt(ss / t->n_elements), 0.2, 0.01) << shape << " " << name;
      EXPECT_LE(mx, 0.2 * std::sqrt(3.0) + 1e-6) << shape << " " << name;
    }
    auto norm = f->find_tensor("output_norm.weight");  // norms stay around 1
    EXPECT_NEAR(reinterpret_cast<const float*>(norm->data)[0], 1.0, 0.1);
  }
}

TEST(Dummy, RealGemmaMistralAndLlamaBlockShapesHaveTheirParameterCounts) {
  auto params = [](const ModelShape& s) {
    const int64_t q = s.n_head * s.head_dim, kv = s.n_head_kv * s.head_dim;
    int64_t per_layer = s.n_embd * q + 2 * s.n_embd * kv + q * s.n_embd + 3 * s.n_embd * s.n_ff + 2 * s.n_embd;
    if (s.arch == "gemma2" || s.arch == "gemma3") per_layer += 2 * s.n_embd;  // post-norms
    if (s.arch == "gemma3") per_layer += 2 * s.head_dim;                      // q/k norms
    if (s.arch == "olmo2") per_layer += q + kv;  // q/k norms over the projections (post- for pre-norms)
    return s.n_vocab * s.n_embd * (s.tied ? 1 : 2) + s.n_layer * per_layer + s.n_embd;
  };
  EXPECT_NEAR(params(*find_shape("gemma-2-2b")) / 1e9, 2.614, 0.001);
  EXPECT_NEAR(params(*find_shape("gemma-3-1b")) / 1e9, 1.000, 0.001);
  EXPECT_NEAR(params(*find_shape("mistral-7b")) / 1e9, 7.242, 0.001);
  // the model cards' sizes: Gemma 2B 2.51B, Granite 3.3 2B 2.53B, SmolLM3 3.08B, OLMo 2 1B 1.48B, OLMo 2 7B 7.30B
  EXPECT_NEAR(params(*find_shape("gemma-2b")) / 1e9, 2.506, 0.001);
  EXPECT_NEAR(params(*find_shape("granite-3.3-2b")) / 1e9, 2.534, 0.001);
  EXPECT_NEAR(params(*find_shape("smollm3-3b")) / 1e9, 3.075, 0.001);
  EXPECT_NEAR(params(*find_shape("olmo-2-1b")) / 1e9, 1.485, 0.001);
  EXPECT_NEAR(params(*find_shape("olmo-2-7b")) / 1e9, 7.299, 0.001);
}
