// Sliding windows, gemma2 / gemma3 and YaRN: what the loader makes of their metadata (windows per
// layer, RoPE per layer kind, soft-capping, embedding and query scale), that a window changes
// exactly the positions past it, and YaRN's frequencies as ggml computes them. (Batched vs reference
// vs float64 for these families, past their windows: model_test's FamilyTest.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "convert/dummy.h"
#include "formats/gguf.h"
#include "model/model.h"
#include "model/reference.h"
#include "model/rope.h"
#include "test_support.h"

using namespace tmill;

namespace {

std::string write_shape(const ModelShape& shape, const std::string& name, DType dtype = DType::F32) {
  DummyOptions o;
  o.shape = shape;
  o.dtype = dtype;
  o.seed = 7;
  const std::string path = test::temp_dir() + "/" + name + ".gguf";
  auto st = write_dummy_model(o, path);
  EXPECT_TRUE(st.ok()) << st.error();
  return path;
}

std::shared_ptr<Model> load(const std::string& shape_name) {
  auto m = Model::load(write_shape(*find_shape(shape_name), shape_name + "-swa"));
  EXPECT_TRUE(m.ok()) << m.error();
  return *m;
}

// A copy of `src` without the keys `drop`, with metadata edited by `edit_kv`.
Result<std::shared_ptr<Model>> load_edited(const std::string& src, const std::function<void(GgufWriter&)>& edit_kv,
                                           const std::vector<std::string>& drop = {}) {
  auto f = GgufFile::open(src);
  EXPECT_TRUE(f.ok());
  GgufWriter w;
  for (const auto& [k, v] : f->metadata())
    if (std::find(drop.begin(), drop.end(), k) == drop.end()) w.set(k, v);
  edit_kv(w);
  for (const auto& t : f->tensors()) EXPECT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.data).ok());
  const std::string out = src + ".edited.gguf";
  EXPECT_TRUE(w.write(out).ok());
  return Model::load(out);
}

std::vector<int64_t> windows(const ModelConfig& c) {
  std::vector<int64_t> w;
  for (const auto& la : c.layer_attn) w.push_back(la.window);
  return w;
}

}  // namespace

// gemma2: layers 0, 2 slide (pattern 2), soft-capping 50 / 30 from the file, embeddings times
// sqrt(64), queries 1/sqrt(head_dim), one RoPE for all layers, post-norms loaded, GeGLU, tied.
TEST(Gemma2, ConfigFromMetadata) {
  auto m = load("tiny-gemma2");
  const ModelConfig& c = m->config();
  EXPECT_EQ(windows(c), (std::vector<int64_t>{8, 0, 8}));
  ASSERT_EQ(c.ropes.size(), 1u);
  EXPECT_EQ(c.ropes[0].theta, 10000.0f);
  EXPECT_EQ(c.attn_softcap, 50.0f);
  EXPECT_EQ(c.final_softcap, 30.0f);
  EXPECT_EQ(c.embd_scale, 8.0f);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / std::sqrt(32.0f));
  EXPECT_EQ(c.arch.ffn_act, FfnActivation::GeluTanh);
  EXPECT_TRUE(c.tied_output);
  for (const auto& L : m->weights().layers) {
    EXPECT_EQ(L.attn_post_norm.size(), 64u);
    EXPECT_EQ(L.ffn_post_norm.size(), 64u);
  }
  // llama.cpp's defaults when the file has no soft-capping keys, and a file without its window
  // gets gemma2's 4096
  const std::string src = write_shape(*find_shape("tiny-gemma2"), "tiny-gemma2-keys");
  auto d = load_edited(src, [](GgufWriter&) {},
                       {"gemma2.attn_logit_softcapping", "gemma2.final_logit_softcapping", "gemma2.attention.sliding_window"});
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ((*d)->config().attn_softcap, 50.0f);
  EXPECT_EQ((*d)->config().final_softcap, 30.0f);
  EXPECT_EQ(windows((*d)->config()), (std::vector<int64_t>{4096, 0, 4096}));
}

// gemma3: five sliding layers to one global (layer 5 of 7), the sliding ones on base 10000 without
// scaling, the global one on base 1e6 with the file's linear x2; per-head q/k norms; no soft-capping.
TEST(Gemma3, ConfigFromMetadata) {
  auto m = load("tiny-gemma3");
  const ModelConfig& c = m->config();
  EXPECT_EQ(windows(c), (std::vector<int64_t>{8, 8, 8, 8, 8, 0, 8}));
  ASSERT_EQ(c.ropes.size(), 2u);
  EXPECT_EQ(c.ropes[0].theta, 1e6f);
  EXPECT_EQ(c.ropes[0].freq_scale, 0.5f);
  EXPECT_EQ(c.ropes[1].theta, 10000.0f);
  EXPECT_EQ(c.ropes[1].freq_scale, 1.0f);
  for (int64_t l = 0; l < c.n_layer; ++l) EXPECT_EQ(c.layer_attn[static_cast<size_t>(l)].rope, l == 5 ? 0 : 1);
  EXPECT_EQ(c.attn_softcap, 0.0f);
  EXPECT_EQ(c.final_softcap, 0.0f);
  EXPECT_EQ(m->weights().layers[0].q_norm.size(), 32u);
  // an explicit pattern: every 3rd layer global; a per-layer bool array; no window: all global
  const std::string src = write_shape(*find_shape("tiny-gemma3"), "tiny-gemma3-keys");
  auto p3 = load_edited(src, [](GgufWriter& w) { w.set_u32("gemma3.attention.sliding_window_pattern", 3); });
  ASSERT_TRUE(p3.ok()) << p3.error();
  EXPECT_EQ(windows((*p3)->config()), (std::vector<int64_t>{8, 8, 0, 8, 8, 0, 8}));
  auto arr = load_edited(src, [](GgufWriter& w) {
    w.set("gemma3.attention.sliding_window_pattern", GgufValue::i32_array({0, 1, 1, 0, 0, 1, 0}));
  });
  ASSERT_TRUE(arr.ok()) << arr.error();
  EXPECT_EQ(windows((*arr)->config()), (std::vector<int64_t>{0, 8, 8, 0, 0, 8, 0}));
  auto none = load_edited(src, [](GgufWriter&) {}, {"gemma3.attention.sliding_window"});
  ASSERT_TRUE(none.ok()) << none.error();
  EXPECT_EQ(windows((*none)->config()), (std::vector<int64_t>(7, 0)));
  EXPECT_EQ((*none)->config().ropes.size(), 1u);
  auto bad = load_edited(src, [](GgufWriter& w) {
    w.set("gemma3.attention.sliding_window_pattern", GgufValue::i32_array({1, 0}));
  });
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("sliding_window_pattern"), std::string::npos) << bad.error();
}

// Mistral's window on llama: every layer. The same weights without the key (tiny-llama: same dims
// and seed) give the same logits up to the window, and different ones from there on.
TEST(SlidingWindow, LlamaWindowChangesExactlyThePositionsPastIt) {
  auto swa = load("tiny-mistral");
  auto full = load("tiny-llama");
  EXPECT_EQ(windows(swa->config()), (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(windows(full->config()), (std::vector<int64_t>{0, 0}));
  ReferenceForward a(swa, 32), b(full, 32);
  for (int64_t pos = 0; pos < 20; ++pos) {
    const int32_t tok = static_cast<int32_t>((pos * 37 + 5) % 512);
    const std::vector<float> la = a.forward(tok, pos), lb = b.forward(tok, pos);
    double diff = 0;
    for (size_t i = 0; i < la.size(); ++i) diff = std::max<double>(diff, std::abs(la[i] - lb[i]));
    if (pos < 8) EXPECT_EQ(diff, 0.0) << "pos " << pos;
    else EXPECT_GT(diff, 1e-4) << "pos " << pos;
  }
}

// YaRN (rope.scaling.type yarn, factor 4, original context 32, n_rot 16, base 1e4): ggml's
// correction dims are [0, 2], so pair 0 keeps its frequency, pair 1 takes half of the scaled one,
// the rest are scaled by 1/4; cos/sin gain 1 + 0.1 ln 4.
TEST(Yarn, FrequenciesAndGainAsGgml) {
  auto m = load("tiny-llama-yarn");
  const ModelConfig& c = m->config();
  ASSERT_EQ(c.rope_scaling, RopeScaling::Yarn);
  const RopeParams& r = c.ropes[0];
  EXPECT_TRUE(r.yarn);
  EXPECT_EQ(r.freq_scale, 0.25f);
  EXPECT_EQ(r.n_ctx_orig, 32);
  float dims[2];
  yarn_corr_dims(c.n_rot, r.n_ctx_orig, r.theta, r.beta_fast, r.beta_slow, dims);
  EXPECT_EQ(dims[0], 0.0f);
  EXPECT_EQ(dims[1], 2.0f);
  const RopeTable t = rope_table(r, c.n_rot, nullptr);
  EXPECT_EQ(t.pos_scale, 1.0f);
  EXPECT_NEAR(t.mscale, 1 + 0.1 * std::log(4.0), 1e-6);
  for (int64_t i = 0; i < c.n_rot / 2; ++i) {
    const double base = std::pow(1e4, -2.0 * i / c.n_rot);
    const double want = base * (i == 0 ? 1.0 : i == 1 ? 0.5 * 0.25 + 0.5 : 0.25);
    EXPECT_NEAR(t.inv_freq[static_cast<size_t>(i)], want, 1e-6 * base) << i;
  }
  // linear scaling stays a position scale
  const std::string src = write_shape(*find_shape("tiny-llama-yarn"), "tiny-llama-linear");
  auto lin = load_edited(src, [](GgufWriter& w) { w.set_string("llama.rope.scaling.type", "linear"); });
  ASSERT_TRUE(lin.ok()) << lin.error();
  const RopeTable tl = rope_table((*lin)->config().ropes[0], c.n_rot, nullptr);
  EXPECT_EQ(tl.pos_scale, 0.25f);
  EXPECT_EQ(tl.mscale, 1.0f);
}
