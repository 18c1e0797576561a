// gpt-oss (llama.cpp's LLM_ARCH_OPENAI_MOE): hyper-parameters and tensors as llama.cpp reads them,
// sliding-window layers, YaRN's frequency blend, routing (top-k logits, softmax over those k), the
// clamped SwiGLU, and that the window, the sinks and YaRN each change what the model computes.
// (Reference vs float64 and batched vs reference: model_test's FamilyTest with tiny-gpt-oss.)
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "convert/dummy.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "model/forward.h"
#include "model/moe.h"
#include "model/reference.h"
#include "model/rope.h"
#include "gguf_edit.h"
#include "test_support.h"

using namespace tmill;
using tmill::test::load_edited;

namespace {

std::string write_tiny(const std::string& name, DType dtype = DType::F32) {
  DummyOptions o;
  o.shape = *find_shape("tiny-gpt-oss");
  o.dtype = dtype;
  o.seed = 5;
  const std::string path = test::temp_dir() + "/" + name + ".gguf";
  auto st = write_dummy_model(o, path);
  EXPECT_TRUE(st.ok()) << st.error();
  return path;
}

std::vector<std::vector<float>> reference_logits(std::shared_ptr<const Model> m, int n) {
  ReferenceForward ref(m, 64);
  std::vector<std::vector<float>> out;
  for (int p = 0; p < n; ++p) out.push_back(ref.forward((p * 37 + 5) % 512, p));
  return out;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max<double>(d, std::abs(a[i] - b[i]));
  return d;
}

}  // namespace

TEST(GptOss, HyperParametersAndTensorsAsLlamaCppReadsThem) {
  auto m = Model::load(write_tiny("gptoss-hp"));
  ASSERT_TRUE(m.ok()) << m.error();
  const ModelConfig& c = (*m)->config();
  EXPECT_EQ(c.arch.name, "gpt-oss");
  EXPECT_EQ(c.arch.rope_layout, RopeLayout::NeoX);
  EXPECT_TRUE(c.is_moe());
  EXPECT_EQ(c.n_expert, 8);
  EXPECT_EQ(c.n_expert_used, 4);
  EXPECT_EQ(c.n_ff_exp, 64);  // expert_feed_forward_length
  EXPECT_EQ(c.n_swa, 8);
  ASSERT_EQ(c.layer_attn.size(), 2u);
  EXPECT_EQ(c.layer_attn[0].window, 8);  // llama.cpp's pattern 2: even layers slide, odd ones see everything
  EXPECT_EQ(c.layer_attn[1].window, 0);
  EXPECT_EQ(c.rope_scaling, RopeScaling::Yarn);
  EXPECT_FLOAT_EQ(c.rope_scale_factor, 4.0f);
  EXPECT_EQ(c.n_ctx_orig, 64);
  const LayerWeights& L = (*m)->weights().layers[1];
  EXPECT_EQ(L.bq.size(), static_cast<size_t>(c.q_dim()));
  EXPECT_EQ(L.bk.size(), static_cast<size_t>(c.kv_dim()));
  EXPECT_EQ(L.bo.size(), static_cast<size_t>(c.n_embd));
  EXPECT_EQ(L.attn_sinks.size(), static_cast<size_t>(c.n_head));
  EXPECT_EQ(L.ffn_gate_inp_b.size(), 8u);
  EXPECT_EQ(L.gate_exps_b.size(), 8u * 64);
  EXPECT_EQ(L.up_exps_b.size(), 8u * 64);
  EXPECT_EQ(L.down_exps_b.size(), 8u * 64);
  EXPECT_EQ(L.ffn_norm.size(), 64u);  // from post_attention_norm
  EXPECT_EQ(L.gate_exps.size(), 8u);
}

// attention.sliding_window_pattern, when present, overrides the family's period: a per-layer flag
// array, or a period (0: every layer slides; 1: none does), as llama.cpp's load_swa_pattern.
TEST(GptOss, SlidingWindowPatternFromMetadata) {
  const std::string src = write_tiny("gptoss-swa");
  auto flags = load_edited(src, [](GgufWriter& w) {
    w.set("gpt-oss.attention.sliding_window_pattern", GgufValue::i32_array({0, 1}));
  });
  ASSERT_TRUE(flags.ok()) << flags.error();
  EXPECT_EQ((*flags)->config().layer_attn[0].window, 0);
  EXPECT_EQ((*flags)->config().layer_attn[1].window, 8);
  auto all = load_edited(src, [](GgufWriter& w) { w.set_u32("gpt-oss.attention.sliding_window_pattern", 0); });
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE((*all)->config().layer_attn[0].window == 8 && (*all)->config().layer_attn[1].window == 8);
  auto none = load_edited(src, [](GgufWriter& w) { w.set_u32("gpt-oss.attention.sliding_window_pattern", 1); });
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE((*none)->config().layer_attn[0].window == 0 && (*none)->config().layer_attn[1].window == 0);
  auto missing = load_edited(src, [](GgufWriter& w) { w.remove("gpt-oss.attention.sliding_window"); });
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("attention.sliding_window"), std::string::npos) << missing.error();
}

// YaRN's blend per rotated pair, from ggml's correction dimensions (model/rope.h): gpt-oss-20b (64
// rotated dims, base 150000, 4096 original positions, beta 32 / 1) keeps pairs 0..8 unscaled, divides
// pairs 18..31 by the factor 32 and ramps linearly in between; cos/sin scale 1 + 0.1 ln 32.
TEST(GptOss, YarnBlendsFrequenciesAsGgml) {
  RopeParams r;
  r.theta = 150000.0f;
  r.freq_scale = 1.0f / 32;
  r.yarn = true;
  r.n_ctx_orig = 4096;
  float dims[2];
  yarn_corr_dims(64, r.n_ctx_orig, r.theta, r.beta_fast, r.beta_slow, dims);
  EXPECT_EQ(dims[0], 8.0f);
  EXPECT_EQ(dims[1], 18.0f);
  const RopeTable t = rope_table(r, 64, nullptr);
  EXPECT_EQ(t.pos_scale, 1.0f);
  auto mix = [&](int64_t i) { return t.inv_freq[static_cast<size_t>(i)] / std::pow(150000.0, -2.0 * i / 64); };
  for (int64_t i = 0; i <= 8; ++i) EXPECT_NEAR(mix(i), 1.0, 1e-5) << i;
  for (int64_t i = 18; i < 32; ++i) EXPECT_NEAR(mix(i), 1.0 / 32, 1e-5 / 32) << i;
  const double r13 = 1.0 - (13.0 - 8.0) / 10.0;  // ramp at pair 13
  EXPECT_NEAR(mix(13), (1 - r13) / 32 + r13, 1e-5);
  EXPECT_FLOAT_EQ(t.mscale, 1.0f + 0.1f * std::log(32.0f));
  r.yarn = false;
  r.freq_scale = 1.0f;
  const RopeTable plain = rope_table(r, 64, nullptr);
  EXPECT_NEAR(plain.inv_freq[20] / std::pow(150000.0, -40.0 / 64), 1.0, 1e-5);
  EXPECT_EQ(plain.mscale, 1.0f);
}

// Top-k by raw (biased) logit, weights a softmax over those k logits only -- negative logits too.
TEST(GptOss, RoutingIsASoftmaxOverTheChosenLogits) {
  const float logits[] = {-3.0f, -1.0f, -2.0f, -5.0f, -1.5f};
  auto r = ref::moe_route(logits, 5, 2, false, true);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].first, 1);
  EXPECT_EQ(r[1].first, 4);
  const double w1 = 1.0 / (1.0 + std::exp(-0.5));
  EXPECT_NEAR(r[0].second, w1, 1e-6);
  EXPECT_NEAR(r[1].second, 1 - w1, 1e-6);
  int32_t experts[3];
  float weights[3], scratch[5];
  moe_route_token(logits, 5, 3, false, experts, weights, scratch, true);
  auto r3 = ref::moe_route(logits, 5, 3, false, true);
  // ascending expert order, the reference's weights bit for bit
  EXPECT_EQ(experts[0], 1);
  EXPECT_EQ(experts[1], 2);
  EXPECT_EQ(experts[2], 4);
  for (const auto& [e, w] : r3) {
    const int j = e == 1 ? 0 : e == 2 ? 1 : 2;
    EXPECT_EQ(weights[j], w) << e;
  }
}

// min(g, 7) * sigmoid(1.702 * min(g, 7)) * (clamp(u, -7, 7) + 1), biases added first.
TEST(GptOss, ClampedSwiGLU) {
  EXPECT_NEAR(ref::swiglu_oai(10.0f, 10.0f), 7.0 / (1 + std::exp(-1.702 * 7)) * 8, 1e-4);
  EXPECT_NEAR(ref::swiglu_oai(-1.0f, -9.0f), -1.0 / (1 + std::exp(1.702)) * -6, 1e-6);
  EXPECT_NEAR(ref::swiglu_oai(0.5f, 0.25f), 0.5 / (1 + std::exp(-1.702 * 0.5)) * 1.25, 1e-6);
  const int64_t F = 37, m = 3;
  std::vector<float> g(m * F), u(m * F), bg(F), bu(F), tmp(F);
  for (int64_t i = 0; i < m * F; ++i) {
    g[i] = -12.0f + 0.23f * static_cast<float>(i);
    u[i] = 11.0f - 0.19f * static_cast<float>(i);
  }
  for (int64_t i = 0; i < F; ++i) bg[i] = 0.1f * static_cast<float>(i % 5), bu[i] = -0.2f * static_cast<float>(i % 3);
  auto want = g;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < F; ++i) want[r * F + i] = ref::swiglu_oai(g[r * F + i] + bg[i], u[r * F + i] + bu[i]);
  swiglu_oai_rows(g.data(), u.data(), bg.data(), bu.data(), m, F, tmp.data());
  for (int64_t i = 0; i < m * F; ++i) ASSERT_NEAR(g[i], want[i], 1e-5f * (1 + std::abs(want[i]))) << i;
}

// Each gpt-oss piece is live: without the window the logits agree while every position is inside it
// and differ after; without sinks (all -inf-like) or without YaRN they differ everywhere.
TEST(GptOss, WindowSinksAndYarnEachChangeTheLogits) {
  const std::string src = write_tiny("gptoss-live");
  auto base = Model::load(src);
  ASSERT_TRUE(base.ok());
  const auto want = reference_logits(*base, 14);
  auto wide = load_edited(src, [](GgufWriter& w) { w.set_u32("gpt-oss.attention.sliding_window", 1000); });
  ASSERT_TRUE(wide.ok());
  const auto got = reference_logits(*wide, 14);
  for (int p = 0; p < 8; ++p) EXPECT_EQ(max_diff(want[p], got[p]), 0.0) << p;
  for (int p = 9; p < 14; ++p) EXPECT_GT(max_diff(want[p], got[p]), 1e-4) << p;
  auto plain = load_edited(src, [](GgufWriter& w) { w.set_string("gpt-oss.rope.scaling.type", "none"); });
  ASSERT_TRUE(plain.ok());
  EXPECT_GT(max_diff(want[5], reference_logits(*plain, 6)[5]), 1e-4);
  // the sinks as -100: the same as no sink at all, which must differ from the file's sinks
  auto f = GgufFile::open(src);
  ASSERT_TRUE(f.ok());
  GgufWriter w;
  for (const auto& [k, v] : f->metadata()) w.set(k, v);
  std::vector<float> low(4, -100.0f);
  for (const auto& t : f->tensors()) {
    if (t.name.find("attn_sinks") != std::string::npos)
      ASSERT_TRUE(w.add_tensor(t.name, t.type, t.ne, reinterpret_cast<const uint8_t*>(low.data())).ok());
    else
      ASSERT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.data).ok());
  }
  ASSERT_TRUE(w.write(src + ".nosink.gguf").ok());
  auto nosink = Model::load(src + ".nosink.gguf");
  ASSERT_TRUE(nosink.ok());
  EXPECT_GT(max_diff(want[3], reference_logits(*nosink, 4)[3]), 1e-4);
}

TEST(GptOss, LoadErrorsNameTheMissingTensor) {
  const std::string src = write_tiny("gptoss-missing");
  for (const char* name : {"blk.1.attn_sinks.weight", "blk.0.ffn_gate_exps.bias", "blk.0.ffn_gate_inp.bias",
                           "blk.1.attn_output.bias", "blk.0.post_attention_norm.weight"}) {
    auto m = load_edited(src, [](GgufWriter&) {}, [&](const std::string& t) { return t == name; });
    ASSERT_FALSE(m.ok()) << name;
    EXPECT_NE(m.error().find(name), std::string::npos) << m.error();
  }
}

TEST(GptOss, DummyRefusesWhatLlamaCppCannotLoad) {
  DummyOptions o;
  o.shape = *find_shape("tiny-gpt-oss");
  o.shape.tied = true;
  EXPECT_FALSE(write_dummy_model(o, test::temp_dir() + "/gptoss-tied.gguf").ok());
  o.shape.tied = false;
  o.shape.n_swa = 0;
  EXPECT_FALSE(write_dummy_model(o, test::temp_dir() + "/gptoss-nowindow.gguf").ok());
}

// Decode of a token past the window through the batched forward touches only its k experts and
// equals the reference (MXFP4 experts, the type gpt-oss ships).
TEST(GptOss, Mxfp4BatchedDecodeEqualsReference) {
  auto m = Model::load(write_tiny("gptoss-mxfp4", DType::MXFP4));
  ASSERT_TRUE(m.ok()) << m.error();
  const ModelConfig& c = (*m)->config();
  EXPECT_EQ((*m)->weights().layers[0].gate_exps[0].type, DType::MXFP4);
  ThreadPool pool(2);
  Forward fwd(*m, &pool);
  KvLayout lay{c.n_layer, c.n_head_kv, c.head_dim, 4, 16, DType::F32};
  auto kv = KvStorage::create(lay);
  ASSERT_TRUE(kv.ok());
  ReferenceForward ref(*m, 64);
  SeqSlice s;
  for (int b = 0; b < 8; ++b) s.block_table.push_back((b * 3 + 1) % 16);
  std::vector<float> logits;
  for (int p = 0; p < 20; ++p) {
    const int32_t tok = (p * 37 + 5) % 512;
    const auto& want = ref.forward(tok, p);
    ForwardBatch batch;
    batch.tokens = {tok};
    s.n_tokens = 1;
    s.pos_begin = p;
    batch.seqs = {s};
    fwd.run(batch, *kv, logits);
    double num = 0, den = 0;
    for (int64_t v = 0; v < c.n_vocab; ++v) {
      num = std::max<double>(num, std::abs(logits[v] - want[v]));
      den = std::max<double>(den, std::abs(want[v]));
    }
    // the batched kernels quantize activations to 8 bits for the 4-bit products
    ASSERT_LT(num / den, 3e-2) << "pos " << p;
    EXPECT_EQ(fwd.last_active_experts().size(), 4u);
  }
}
