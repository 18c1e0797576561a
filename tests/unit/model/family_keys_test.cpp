// What some families read from their files beyond the common keys: hunyuan-dense's NTK alpha and norm
// order, hunyuan-moe's shared width, bailingmoe2's fused q/k/v and routing, apertus's xIELU, minicpm's scalars.
#include <gtest/gtest.h>

#include <cmath>

#include "convert/dummy.h"
#include "gguf_edit.h"
#include "model/model.h"
#include "test_support.h"

using namespace tmill;

TEST(HunyuanDense, NtkAlphaAndNormOrderFromTheFile) {
  DummyOptions o;
  o.shape = *find_shape("tiny-hunyuan-dense");
  o.dtype = DType::F32;
  const std::string path = test::temp_dir() + "/tiny-hunyuan-dense.gguf";
  ASSERT_TRUE(write_dummy_model(o, path).ok());
  auto m = Model::load(path);
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_TRUE((*m)->config().arch.qk_norm_after_rope);
  EXPECT_FLOAT_EQ((*m)->config().ropes[0].theta, 10000.0f);
  auto scaled = test::load_edited(path, [](GgufWriter& w) { w.set_f32("hunyuan-dense.rope.scaling.alpha", 1000.0f); });
  ASSERT_TRUE(scaled.ok()) << scaled.error();
  const float want = 10000.0f * std::pow(1000.0f, 16.0f / 14.0f);  // head_dim 16
  EXPECT_FLOAT_EQ((*scaled)->config().rope_theta, want);
  EXPECT_FLOAT_EQ((*scaled)->config().ropes[0].theta, want);
  auto vl = test::load_edited(path, [](GgufWriter& w) {
    w.set("hunyuan-dense.rope.dimension_sections", GgufValue::i32_array({8, 0, 0, 0}));
  });
  ASSERT_FALSE(vl.ok());
  EXPECT_NE(vl.error().find("M-RoPE"), std::string::npos) << vl.error();
}

// hunyuan-moe: the shared expert's width from expert_shared_feed_forward_length (absent:
// feed_forward_length), experts of feed_forward_length rows; expert_feed_forward_length required as
// llama.cpp requires it.
TEST(HunyuanMoe, SharedExpertWidthAndRequiredKeys) {
  DummyOptions o;
  o.shape = *find_shape("tiny-hunyuan-moe");
  o.dtype = DType::F32;
  const std::string path = test::temp_dir() + "/tiny-hunyuan-moe.gguf";
  ASSERT_TRUE(write_dummy_model(o, path).ok());
  auto m = Model::load(path);
  ASSERT_TRUE(m.ok()) << m.error();
  const ModelConfig& c = (*m)->config();
  EXPECT_EQ(c.n_ff_shexp, 48);
  EXPECT_EQ(c.n_ff_exp, c.n_ff);
  EXPECT_TRUE(c.arch.moe_norm_topk && !c.moe_sigmoid && c.arch.qk_norm_after_rope);
  EXPECT_EQ((*m)->weights().layers[0].gate_shexp.rows, 48);
  auto no_key = test::load_edited(path, [](GgufWriter& w) { w.remove("hunyuan-moe.expert_shared_feed_forward_length"); });
  ASSERT_FALSE(no_key.ok());  // then the shared expert is n_ff (32) wide: its 48 rows do not fit
  EXPECT_NE(no_key.error().find("ffn_gate_shexp"), std::string::npos) << no_key.error();
  auto no_ff = test::load_edited(path, [](GgufWriter& w) { w.remove("hunyuan-moe.expert_feed_forward_length"); });
  ASSERT_FALSE(no_ff.ok());
  EXPECT_NE(no_ff.error().find("expert_feed_forward_length"), std::string::npos) << no_ff.error();
}

// bailingmoe2 (Ling 2.0): q/k/v as row views of the fused attn_qkv, DeepSeek-V3's routing fields, and
// the shared experts' rows from expert_shared_feed_forward_length when present.
TEST(Bailingmoe2, FusedQkvAndDeepSeekRoutingFromTheFile) {
  DummyOptions o;
  o.shape = *find_shape("tiny-bailingmoe2");
  o.dtype = DType::F32;
  const std::string path = test::temp_dir() + "/tiny-bailingmoe2.gguf";
  ASSERT_TRUE(write_dummy_model(o, path).ok());
  auto m = Model::load(path);
  ASSERT_TRUE(m.ok()) << m.error();
  const ModelConfig& c = (*m)->config();
  const LayerWeights& L = (*m)->weights().layers[1];
  EXPECT_EQ(L.wq.name, "blk.1.attn_qkv.weight");
  EXPECT_EQ(L.wq.rows, c.q_dim());
  EXPECT_EQ(L.wk.rows, c.kv_dim());
  EXPECT_EQ(L.wk.data, L.wq.row(c.q_dim()));  // k's rows follow q's in the fused tensor
  EXPECT_TRUE(L.w_gate.valid() == false && L.gate_exps.size() == 8u);
  EXPECT_TRUE((*m)->weights().layers[0].w_gate.valid());  // the leading dense layer
  EXPECT_EQ(c.n_layer_dense_lead, 1);
  EXPECT_TRUE(c.moe_sigmoid);
  EXPECT_EQ(c.moe_groups, 4);
  EXPECT_EQ(c.moe_groups_used, 2);
  EXPECT_FLOAT_EQ(c.moe_weights_scale, 2.5f);
  EXPECT_EQ(c.n_rot, c.head_dim / 2);
  EXPECT_EQ(c.n_ff_shexp, 32);
  EXPECT_FALSE(c.tied_output);
  // expert_shared_feed_forward_length is each shared expert's width: the file's tensors must match it
  auto same = test::load_edited(path, [](GgufWriter& w) { w.set_u32("bailingmoe2.expert_shared_feed_forward_length", 32); });
  ASSERT_TRUE(same.ok()) << same.error();
  EXPECT_EQ((*same)->config().n_ff_shexp, 32);
  auto wider = test::load_edited(path, [](GgufWriter& w) { w.set_u32("bailingmoe2.expert_shared_feed_forward_length", 48); });
  ASSERT_FALSE(wider.ok());
  EXPECT_NE(wider.error().find("ffn_gate_shexp"), std::string::npos) << wider.error();
  // llama.cpp requires the gating function (no default for this family) and the shared expert count
  auto no_gating = test::load_edited(path, [](GgufWriter& w) { w.remove("bailingmoe2.expert_gating_func"); });
  ASSERT_FALSE(no_gating.ok());
  EXPECT_NE(no_gating.error().find("expert_gating_func"), std::string::npos) << no_gating.error();
}

// apertus: each layer's xIELU parameters as ggml_xielu folds them (an = beta + softplus(alpha_n),
// ap = softplus(alpha_p)); one value for all layers is read as llama.cpp's get_key_or_arr reads it;
// the q/k norms' biases are read and not used; a missing key is refused.
TEST(Apertus, XieluParametersFromTheFile) {
  DummyOptions o;
  o.shape = *find_shape("tiny-apertus");
  o.dtype = DType::F32;
  const std::string path = test::temp_dir() + "/tiny-apertus.gguf";
  ASSERT_TRUE(write_dummy_model(o, path).ok());
  auto m = Model::load(path);
  ASSERT_TRUE(m.ok()) << m.error();
  const ModelConfig& c = (*m)->config();
  ASSERT_EQ(c.xielu.size(), 3u);
  const float alpha_n = 1.0f, alpha_p = 0.7f;  // layer 2's (0.8 + 0.1 l, 0.8 - 0.05 l)
  EXPECT_NEAR(c.xielu[2].an, 0.5f + std::log1p(std::exp(alpha_n)), 1e-6);
  EXPECT_NEAR(c.xielu[2].ap, std::log1p(std::exp(alpha_p)), 1e-6);
  EXPECT_FLOAT_EQ(c.xielu[2].beta, 0.5f);
  // x > 0: ap x^2 + beta x; x <= 0: (expm1(min(x, eps)) - x) an + beta x
  EXPECT_NEAR(c.xielu[2](2.0f), 4.0f * c.xielu[2].ap + 1.0f, 1e-6);
  EXPECT_NEAR(c.xielu[2](-1.0f), (std::expm1(-1.0f) + 1.0f) * c.xielu[2].an - 0.5f, 1e-6);
  EXPECT_TRUE((*m)->weights().layers[0].q_norm.size() == 16u);
  auto one = test::load_edited(path, [](GgufWriter& w) { w.set_f32("xielu.beta", 0.25f); });
  ASSERT_TRUE(one.ok()) << one.error();
  EXPECT_FLOAT_EQ((*one)->config().xielu[1].beta, 0.25f);
  auto none = test::load_edited(path, [](GgufWriter& w) { w.remove("xielu.eps"); });
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().find("xielu.eps"), std::string::npos) << none.error();
}

// minicpm: the three scalars from the file, and MiniCPM's own values for files from before the converter
// wrote them -- 12, 1.4 / sqrt(n_layer), and logits divided by n_embd / 256 (transformers' direction);
// the same weights with the values written give the same logits. Experts when expert_count > 1.
TEST(MiniCpm, ScalarsFromTheFileOrMiniCpmDefaults) {
  DummyOptions o;
  o.shape = *find_shape("tiny-minicpm");
  o.dtype = DType::F32;
  const std::string path = test::temp_dir() + "/tiny-minicpm.gguf";
  ASSERT_TRUE(write_dummy_model(o, path).ok());
  auto m = Model::load(path);
  ASSERT_TRUE(m.ok()) << m.error();
  const ModelConfig& c = (*m)->config();
  EXPECT_FLOAT_EQ(c.embd_scale, 12.0f);
  EXPECT_FLOAT_EQ(c.residual_scale, 1.4f / std::sqrt(2.0f));
  EXPECT_FLOAT_EQ(c.logit_scale, 0.25f);
  EXPECT_TRUE(c.has_rope(0));
  EXPECT_EQ(c.arch.rope_layout, RopeLayout::Adjacent);
  auto bare = test::load_edited(path, [](GgufWriter& w) {
    for (const char* k : {"minicpm.embedding_scale", "minicpm.residual_scale", "minicpm.logit_scale"}) w.remove(k);
  });
  ASSERT_TRUE(bare.ok()) << bare.error();
  EXPECT_FLOAT_EQ((*bare)->config().embd_scale, 12.0f);
  EXPECT_FLOAT_EQ((*bare)->config().residual_scale, 1.4f / std::sqrt(2.0f));
  EXPECT_FLOAT_EQ((*bare)->config().logit_scale, 64.0f / 256.0f);
  auto other = test::load_edited(path, [](GgufWriter& w) { w.set_f32("minicpm.logit_scale", 2.0f); });
  ASSERT_TRUE(other.ok()) << other.error();
  EXPECT_FLOAT_EQ((*other)->config().logit_scale, 2.0f);
  auto bad = test::load_edited(path, [](GgufWriter& w) { w.set_f32("minicpm.logit_scale", 0.0f); });
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("logit_scale"), std::string::npos) << bad.error();
  o.shape = *find_shape("tiny-minicpm-moe");
  const std::string moe_path = test::temp_dir() + "/tiny-minicpm-moe.gguf";
  ASSERT_TRUE(write_dummy_model(o, moe_path).ok());
  auto moe = Model::load(moe_path);
  ASSERT_TRUE(moe.ok()) << moe.error();
  EXPECT_EQ((*moe)->config().n_expert, 8);
  EXPECT_TRUE((*moe)->config().layer_is_moe(0));
}
