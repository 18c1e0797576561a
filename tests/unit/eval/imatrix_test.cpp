// imatrix collection through the forward's activation observer: hand-computed sums, the GGUF file
// round trip, and the point of it all: a lower KL divergence after imatrix-weighted quantization.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "convert/imatrix_file.h"
#include "core/thread_pool.h"
#include "eval/imatrix_collect.h"
#include "eval/perplexity.h"
#include "eval_models.h"
#include "test_support.h"
#include "model/reference.h"

using namespace tmill;
using namespace tmill::eval;

namespace {

std::shared_ptr<Model> load(const std::string& path) {
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.error();
  return *m;
}

std::unique_ptr<LogitStream> stream(std::shared_ptr<const Model> m, int64_t ctx, ThreadPool* pool) {
  LogitStreamOptions o;
  o.max_ctx = ctx;
  o.batch = 16;
  o.kv_dtype = DType::F32;
  auto s = LogitStream::create(std::move(m), o, pool);
  EXPECT_TRUE(s.ok()) << s.error();
  return std::move(s).value();
}

std::vector<std::vector<int32_t>> chunks_of(const Model& m, const std::string& text, int64_t ctx, int64_t n = 0) {
  auto t = tokenize_text_file(m, text);
  EXPECT_TRUE(t.ok()) << t.error();
  return make_chunks(t->tokens, ctx, t->bos, n);
}

Imatrix collect(const std::string& model_path, int64_t ctx, bool output = false, int64_t n = 0) {
  ThreadPool pool(2);
  auto m = load(model_path);
  auto s = stream(m, ctx, &pool);
  ImatrixOptions o;
  o.include_output = output;
  o.dataset = "calibration.txt";
  auto im = collect_imatrix(*s, chunks_of(*m, test::source_path("tests/data/eval/calibration.txt"), ctx, n), o);
  EXPECT_TRUE(im.ok()) << im.error();
  return im.ok() ? *im : Imatrix{};
}

double kld_mean(const std::string& ref, const std::string& model, int64_t ctx = 64) {
  ThreadPool pool(2);
  auto a = load(ref);
  auto b = load(model);
  auto rs = stream(a, ctx, &pool);
  auto ms = stream(b, ctx, &pool);
  auto r = compare(*rs, *ms, chunks_of(*a, test::story_text_path(), ctx));
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? r->kld.mean : -1;
}

}  // namespace

// Layer 0's Q/K/V input is rmsnorm(embedding(token)) * attn_norm: the sums are computed here from
// the file's tensors, independently of the forward.
TEST(Imatrix, SumsAreSquaredInputsOfEachWeight) {
  const std::string path = test::dummy_model("tiny-llama");
  auto m = load(path);
  const ModelConfig& c = m->config();
  const int64_t ctx = 32;
  const auto chunks = chunks_of(*m, test::source_path("tests/data/eval/calibration.txt"), ctx, 3);
  ASSERT_EQ(chunks.size(), 3u);
  const Imatrix im = collect(path, ctx, false, 3);
  EXPECT_EQ(im.chunk_count, 3);
  EXPECT_EQ(im.chunk_size, ctx);
  EXPECT_EQ(im.datasets, std::vector<std::string>{"calibration.txt"});
  EXPECT_EQ(static_cast<int64_t>(im.entries.size()), 7 * c.n_layer);  // no output matrix by default
  const GgufTensorInfo* emb = m->file().find_tensor("token_embd.weight");
  ASSERT_EQ(emb->type, DType::F32);
  const float* E = reinterpret_cast<const float*>(emb->data);
  const std::vector<float>& norm = m->weights().layers[0].attn_norm;
  std::vector<double> want(static_cast<size_t>(c.n_embd), 0.0);
  std::vector<float> xb(static_cast<size_t>(c.n_embd));
  for (const auto& ch : chunks)
    for (int32_t tok : ch) {
      ref::rmsnorm(xb.data(), E + static_cast<int64_t>(tok) * c.n_embd, norm.data(), c.n_embd, c.rms_eps);
      for (int64_t j = 0; j < c.n_embd; ++j) want[j] += static_cast<double>(xb[j]) * xb[j];
    }
  for (const char* w : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"}) {
    auto it = im.entries.find(w);
    ASSERT_NE(it, im.entries.end()) << w;
    ASSERT_EQ(it->second.counts, std::vector<float>{3.0f * ctx});
    ASSERT_EQ(it->second.n_cols(), c.n_embd);
    for (int64_t j = 0; j < c.n_embd; ++j) EXPECT_NEAR(it->second.sums[j], want[j], 1e-4 * want[j] + 1e-6) << w << " col " << j;
  }
  // every matrix of every layer, with its input width
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    EXPECT_EQ(im.entries.at(b + "attn_output.weight").n_cols(), c.q_dim());
    EXPECT_EQ(im.entries.at(b + "ffn_gate.weight").n_cols(), c.n_embd);
    EXPECT_EQ(im.entries.at(b + "ffn_down.weight").n_cols(), c.n_ff);
    EXPECT_EQ(im.entries.at(b + "attn_q.weight").sums, im.entries.at(b + "attn_v.weight").sums);
    EXPECT_EQ(im.entries.at(b + "ffn_gate.weight").sums, im.entries.at(b + "ffn_up.weight").sums);
  }
  // --process-output adds the output projection (all positions produce logits then)
  const Imatrix with_out = collect(path, ctx, true, 3);
  ASSERT_TRUE(with_out.entries.count("output.weight"));
  EXPECT_EQ(with_out.entries.at("output.weight").counts, std::vector<float>{3.0f * ctx});
  EXPECT_EQ(with_out.entries.at("blk.1.ffn_down.weight").sums, im.entries.at("blk.1.ffn_down.weight").sums);
}

// phi3's fused attn_qkv and gate/up ffn_up are one weight each, as llama.cpp's imatrix names them:
// one entry per fused tensor, counted once per token (not once per q/k/v view).
TEST(Imatrix, Phi3FusedWeightsAreOneEntryEach) {
  const std::string path = test::dummy_model("tiny-phi3");
  auto m = load(path);
  const ModelConfig& c = m->config();
  const int64_t ctx = 32;
  const Imatrix im = collect(path, ctx, false, 2);
  EXPECT_EQ(static_cast<int64_t>(im.entries.size()), 4 * c.n_layer);  // qkv, output, up, down
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    ASSERT_TRUE(im.entries.count(b + "attn_qkv.weight")) << l;
    ASSERT_TRUE(im.entries.count(b + "ffn_up.weight")) << l;
    EXPECT_EQ(im.entries.at(b + "attn_qkv.weight").counts, std::vector<float>{2.0f * ctx});
    EXPECT_EQ(im.entries.at(b + "attn_qkv.weight").n_cols(), c.n_embd);
    EXPECT_EQ(im.entries.at(b + "ffn_up.weight").counts, std::vector<float>{2.0f * ctx});
    EXPECT_EQ(im.entries.at(b + "ffn_down.weight").n_cols(), c.n_ff);
    EXPECT_EQ(im.entries.count(b + "attn_q.weight"), 0u);
  }
}

TEST(Imatrix, SavedFileLoadsBackAndDrivesTheQuantizer) {
  const std::string path = test::dummy_model("tiny-qwen2");
  const Imatrix im = collect(path, 64);
  const std::string file = test::temp_dir() + "/tiny.imatrix.gguf";
  ASSERT_TRUE(save_imatrix(im, file).ok());
  auto back = load_imatrix(file);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->chunk_count, im.chunk_count);
  ASSERT_EQ(back->entries.size(), im.entries.size());
  for (const auto& [name, e] : im.entries) {
    EXPECT_EQ(back->entries.at(name).sums, e.sums) << name;
    EXPECT_EQ(back->entries.at(name).counts, e.counts) << name;
  }
  QuantizeModelOptions q;
  q.input = path;
  q.output = test::temp_dir() + "/tiny-q4-imat.gguf";
  q.recipe = *recipe_from_name("Q4_0");
  q.plan.pure = true;
  q.imatrix_path = file;
  q.threads = 2;
  auto rep = quantize_model(q);
  ASSERT_TRUE(rep.ok()) << rep.error();
  int used = 0;
  for (const auto& t : rep->tensors) used += t.used_imatrix;
  EXPECT_EQ(used, static_cast<int>(im.entries.size()));  // every block matrix; the tied embedding has none
}

// Random weights and activations have no outlier columns, so an imatrix has little to say; models
// whose norm weights amplify a few channels (as real LLMs' do) gain clearly at width 256. At width 64
// with two outliers per 32-column block, Q4_0 gained nothing in our runs (see docs/eval.md), so
// only the 256-wide cases are asserted. Calibration on calibration.txt, evaluation on story.txt.
TEST(Imatrix, LowersKldOfQ4OnAModelWithOutlierChannels) {
  struct Case {
    std::string name, f32, type;
    bool assert_gain;
  };
  const std::string plain = test::dummy_model("tiny-qwen2");
  const std::string out64 = test::outlier_model(plain, {3, 17, 40, 51}, 30.0f);
  const std::string plain256 = test::dummy_model(test::shape_256());
  const std::string out256 = test::outlier_model(plain256, {5, 77, 130, 201}, 30.0f);
  const std::vector<Case> cases = {{"random tiny-qwen2", plain, "Q4_0", false},
                                   {"outlier tiny-qwen2", out64, "Q4_0", false},
                                   {"random qwen2-256", plain256, "Q4_0", false},
                                   {"outlier qwen2-256", out256, "Q4_0", true},
                                   {"outlier qwen2-256", out256, "Q4_K_M", true}};
  for (const Case& c : cases) {
    // (the sanitized build, where this test took 150 s of CI, runs the two asserted cases only)
    if (test::sanitized_build() && !c.assert_gain) continue;
    const std::string imf = test::temp_dir() + "/" + std::to_string(std::hash<std::string>{}(c.f32)) + ".imatrix.gguf";
    ASSERT_TRUE(save_imatrix(collect(c.f32, 64), imf).ok());
    const double without = kld_mean(c.f32, test::quantized(c.f32, c.type));
    const double with = kld_mean(c.f32, test::quantized(c.f32, c.type, imf));
    std::printf("imatrix %-20s %-7s KLD mean without %.6f, with %.6f (%.1f%% lower)\n", c.name.c_str(), c.type.c_str(),
                without, with, 100.0 * (1.0 - with / without));
    if (c.assert_gain) {
      EXPECT_LT(with, 0.75 * without) << c.name << " " << c.type;
    }
  }
}
