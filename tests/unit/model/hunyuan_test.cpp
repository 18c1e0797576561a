// hunyuan-dense read from its file: RoPE's base times alpha^(d / (d - 2)) when rope.scaling.alpha is
// there (as llama.cpp), the q/k norms after RoPE, Hunyuan-VL's M-RoPE refused.
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
