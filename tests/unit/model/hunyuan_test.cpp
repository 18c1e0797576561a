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
