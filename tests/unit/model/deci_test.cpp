// DeciLM / Nemotron NAS (deci) and Nemotron (nemotron) read from their files. deci: each layer's query
// heads, K/V heads and FFN width, and the layer kinds their zeros mark -- no attention, "linear
// attention" (attn_output over the normed input, no K/V), no FFN --, the cache holding K/V for the
// attention layers only, each at its own width. nemotron: LayerNorms with biases, a part of each head
// rotated, the ungated ReLU-squared FFN. phimoe: RMS norms with biases around phi3's attention and softmax
// experts. afmoe: the attention gate of its own projection, NoPE on every fourth layer (windows on the
// others), sigmoid-routed experts with a required selection bias after dense layers. And each matters:
// the same weights without it give other logits.
// (Both tiny forms also run FamilyTest's float64 and batched checks; llama.cpp's logits: families.mjs.)
#include <gtest/gtest.h>

#include <functional>

#include "convert/dummy.h"
#include "family_fixture.h"
#include "gguf_edit.h"
#include "model/kv_storage.h"
#include "model/model.h"
#include "model/reference.h"
#include "test_support.h"

using namespace tmill;

namespace {

std::shared_ptr<Model> tiny(const std::string& shape) { return test::family_model(shape); }

std::vector<float> logits_of(const std::shared_ptr<Model>& m,
                             const std::function<void(ModelConfig&, ModelWeights&)>& edit = nullptr) {
  return test::family_logits(m, 6, edit);
}

}  // namespace

TEST(Deci, EachLayerIsOfItsKind) {
  auto m = tiny("tiny-deci");
  ASSERT_NE(m, nullptr);
  const ModelConfig& c = m->config();
  // heads {4, 4, 4, 0, 2, 0, 4, 4}, K/V {2, 1, 0, 0, 2, 0, 4, 2}, FFN {160, 96, 160, 128, 160, 0, 64, 160}
  const bool attention[] = {true, true, false, false, true, false, true, true};
  const bool linear[] = {false, false, true, false, false, false, false, false};
  const bool mixer[] = {true, true, true, false, true, false, true, true};
  const int64_t heads[] = {4, 4, 4, 0, 2, 0, 4, 4}, kv[] = {2, 1, 0, 0, 2, 0, 4, 2}, ff[] = {160, 96, 160, 128, 160, 0, 64, 160};
  for (int64_t l = 0; l < 8; ++l) {
    SCOPED_TRACE(l);
    EXPECT_EQ(c.has_attention(l), attention[l]);
    EXPECT_EQ(c.is_linear_attn(l), linear[l]);
    EXPECT_EQ(c.has_mixer(l), mixer[l]);
    EXPECT_EQ(c.has_ffn(l), ff[l] > 0);
    if (attention[l]) {
      EXPECT_EQ(c.n_head_of(l), heads[l]);
      EXPECT_EQ(c.n_head_kv_of(l), kv[l]);
      EXPECT_EQ(m->weights().layers[static_cast<size_t>(l)].wq.rows, heads[l] * 16);
    }
    if (ff[l] > 0) {
      EXPECT_EQ(c.n_ff_of(l), ff[l]);
    }
    EXPECT_EQ(m->weights().layers[static_cast<size_t>(l)].attn_norm.empty(), !mixer[l]);
  }
  // K/V for the five attention layers only, each slot its layer's heads
  EXPECT_EQ(c.n_kv_layers(), 5);
  const KvLayout lay = KvLayout::for_model(c, 16, 4, DType::F32);
  ASSERT_EQ(lay.n_layer, 5);
  EXPECT_EQ(lay.n_head_kv_of(c.slot(1)), 1);
  EXPECT_EQ(lay.n_head_kv_of(c.slot(6)), 4);
  EXPECT_EQ(lay.bytes_per_block(), 2u * 16 * 16 * 4 * (2 + 1 + 2 + 4 + 2));
}

TEST(Deci, EveryKindOfLayerChangesTheLogits) {
  auto d = tiny("tiny-deci");
  ASSERT_NE(d, nullptr);
  const auto base = logits_of(d);
  EXPECT_NE(base, logits_of(d, [](ModelConfig&, ModelWeights& w) {  // layer 2: linear attention on its norm
    for (float& v : w.layers[2].attn_norm) v *= 0.5f;
  }));
  EXPECT_NE(base, logits_of(d, [](ModelConfig&, ModelWeights& w) {  // layer 3: no attention, the FFN on ffn_norm's
    for (float& v : w.layers[3].ffn_norm) v *= 0.5f;
  }));
  // a layer with attention and no FFN: its attention output joins the residual stream (llama.cpp's graph
  // skips the layer whole)
  auto m = tiny("tiny-deci-noffn");
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->config().has_ffn(1));
  EXPECT_TRUE(m->config().has_attention(1));
  EXPECT_NE(logits_of(m), logits_of(m, [](ModelConfig&, ModelWeights& w) {
    for (float& v : w.layers[1].attn_norm) v *= 0.5f;
  }));
}

TEST(Nemotron, LayerNormsPartialRopeReluSquared) {
  auto m = tiny("tiny-nemotron");
  ASSERT_NE(m, nullptr);
  const ModelConfig& c = m->config();
  EXPECT_TRUE(c.arch.layer_norm);
  EXPECT_EQ(c.arch.ffn_act, FfnActivation::ReluSqr);
  EXPECT_EQ(c.n_rot, 8);  // half of each 16-wide head
  EXPECT_FALSE(c.tied_output);
  const LayerWeights& L = m->weights().layers[1];
  EXPECT_EQ(L.attn_norm_b.size(), 64u);
  EXPECT_EQ(L.ffn_up_b.size(), 160u);
  EXPECT_EQ(L.bo.size(), 64u);
  EXPECT_FALSE(L.w_gate.valid());
  const auto base = logits_of(m);
  EXPECT_NE(base, logits_of(m, [](ModelConfig& c, ModelWeights&) { c.arch.ffn_act = FfnActivation::GeluTanh; }));
}

TEST(Phimoe, RmsNormsWithBiasesAndExperts) {
  auto m = tiny("tiny-phimoe");
  ASSERT_NE(m, nullptr);
  const ModelConfig& c = m->config();
  EXPECT_FALSE(c.arch.layer_norm);
  EXPECT_EQ(c.n_expert, 8);
  EXPECT_EQ(c.n_expert_used, 2);
  EXPECT_EQ(c.n_ff_exp, 96);
  EXPECT_TRUE(c.arch.moe_norm_topk);
  const LayerWeights& L = m->weights().layers[1];
  EXPECT_EQ(L.attn_norm_b.size(), 64u);
  EXPECT_EQ(L.ffn_norm_b.size(), 64u);
  EXPECT_EQ(L.bq.size(), 64u);  // attn_qkv.bias split with the weight
  EXPECT_EQ(m->weights().output_b.size(), 512u);
  const auto base = logits_of(m);
  EXPECT_NE(base, logits_of(m, [](ModelConfig&, ModelWeights& w) { w.layers[1].attn_norm_b.assign(64, 0.0f); }));
  EXPECT_NE(base, logits_of(m, [](ModelConfig&, ModelWeights& w) { w.output_norm_b.assign(64, 0.0f); }));
}

TEST(Afmoe, GateNoPeLayersWindowsAndSigmoidExperts) {
  auto m = tiny("tiny-afmoe");
  ASSERT_NE(m, nullptr);
  const ModelConfig& c = m->config();
  EXPECT_TRUE(c.arch.attn_gate_proj);
  EXPECT_TRUE(c.moe_sigmoid);  // (the file has no expert_gating_func: llama.cpp's afmoe default)
  EXPECT_EQ(c.n_layer_dense_lead, 1);
  EXPECT_EQ(c.n_ff_shexp, 48);
  EXPECT_FLOAT_EQ(c.moe_weights_scale, 2.5f);
  EXPECT_FLOAT_EQ(c.embd_scale, 8.0f);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const bool global = l % 4 == 3;
    EXPECT_EQ(c.layer_attn[static_cast<size_t>(l)].window, global ? 0 : 8) << l;
    EXPECT_EQ(c.has_rope(l), !global) << l;
  }
  const LayerWeights& L = m->weights().layers[2];
  EXPECT_EQ(L.wq_gate.rows, 64);
  EXPECT_EQ(L.exp_probs_b.size(), 8u);
  EXPECT_FALSE(m->weights().layers[0].exp_probs_b.size());  // the dense layer
  const auto base = logits_of(m);
  EXPECT_NE(base, logits_of(m, [](ModelConfig&, ModelWeights& w) { w.layers[2].wq_gate = Matrix{}; }));
  EXPECT_NE(base, logits_of(m, [](ModelConfig& c, ModelWeights&) { c.layer_attn[3].rope = 0; }));
  EXPECT_NE(base, logits_of(m, [](ModelConfig& c, ModelWeights&) { c.moe_sigmoid = false; }));
  // without windows the fourth layers still have no RoPE
  auto full = tiny("tiny-afmoe-full");
  ASSERT_NE(full, nullptr);
  EXPECT_EQ(full->config().n_swa, 0);
  EXPECT_FALSE(full->config().has_rope(3));
  EXPECT_TRUE(full->config().has_rope(4));
  EXPECT_EQ(full->config().n_ff_shexp, 64);  // two shared experts of 32 rows
  // the selection bias is required, as llama.cpp requires it
  auto no_bias = test::load_edited(test::family_file("tiny-afmoe"), [](GgufWriter&) {},
                                   [](const std::string& name) { return name == "blk.2.exp_probs_b.bias"; });
  ASSERT_FALSE(no_bias.ok());
  EXPECT_NE(no_bias.error().find("exp_probs_b"), std::string::npos) << no_bias.error();
}

// OpenELM: each layer's heads, K/V heads and FFN width from the per-layer keys, q / k / v split out of the
// layer's own attn_qkv, per-head q/k norms; a layer without attention is refused (llama.cpp has none).
TEST(Openelm, PerLayerWidthsFromOneQkvEach) {
  auto m = tiny("tiny-openelm");
  ASSERT_NE(m, nullptr);
  const ModelConfig& c = m->config();
  const int64_t heads[] = {2, 4, 4, 6}, kv[] = {1, 2, 1, 3}, ff[] = {96, 128, 160, 192};
  for (int64_t l = 0; l < 4; ++l) {
    EXPECT_EQ(c.n_head_of(l), heads[l]);
    EXPECT_EQ(c.n_head_kv_of(l), kv[l]);
    EXPECT_EQ(c.n_ff_of(l), ff[l]);
    const LayerWeights& L = m->weights().layers[static_cast<size_t>(l)];
    EXPECT_EQ(L.wq.rows, heads[l] * 16);
    EXPECT_EQ(L.wk.rows, kv[l] * 16);
    EXPECT_EQ(L.wv.rows, kv[l] * 16);
    EXPECT_EQ(static_cast<const uint8_t*>(L.wk.data), static_cast<const uint8_t*>(L.wq.data) + L.wq.bytes());
    EXPECT_EQ(L.q_norm.size(), 16u);
  }
  EXPECT_TRUE(c.tied_output);
  const auto base = logits_of(m);
  EXPECT_NE(base, logits_of(m, [](ModelConfig&, ModelWeights& w) { w.layers[3].k_norm.assign(16, 1.0f); }));
  auto zero = test::load_edited(test::family_file("tiny-openelm"), [](GgufWriter& w) {
    w.set("openelm.attention.head_count", GgufValue::i32_array({2, 4, 0, 6}));
  });
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().find("every layer has attention"), std::string::npos) << zero.error();
}
