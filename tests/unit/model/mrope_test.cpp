// M-RoPE files served on text (model/config.h read_mrope_sections): Qwen's vision-language language
// models (qwen2vl sectioned, qwen3vl / qwen3vlmoe interleaved), GLM-4.1V / GLM-4.5V (glm4 / glm4moe with
// sections) and Qwen3.5. A text token's position is the same in the first three sections and 0 in the
// fourth, so the rotation is NeoX RoPE with the fourth section's pairs still. The forward passes against
// llama.cpp are tests/llamacpp/families.mjs's (qwen2vl, qwen3vl, qwen3vlmoe, GLM-4.1V, GLM-4.5V entries);
// FamilyTest checks the batched forward and the reference against float64 on the tiny shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "convert/dummy.h"
#include "formats/gguf.h"
#include "gguf_edit.h"
#include "model/model.h"
#include "model/reference.h"
#include "model/rope.h"
#include "test_support.h"

using namespace tmill;

namespace {

std::string write(const ModelShape& s, const std::string& tag) {
  DummyOptions o;
  o.shape = s;
  o.dtype = DType::F32;
  const std::string path = test::temp_dir() + "/mrope-" + tag + ".gguf";
  auto st = write_dummy_model(o, path);
  EXPECT_TRUE(st.ok()) << st.error();
  return path;
}

Result<std::shared_ptr<Model>> with_sections(const std::string& path, const std::string& arch, std::vector<int32_t> s) {
  return test::load_edited(path, [&](GgufWriter& w) { w.set(arch + ".rope.dimension_sections", GgufValue::i32_array(s)); });
}

std::vector<uint8_t> pairs(size_t n, std::initializer_list<size_t> still) {
  std::vector<uint8_t> v(n, 0);
  for (size_t i : still) v[i] = 1;
  return v;
}

}  // namespace

// Which pairs stay still: none for Qwen2.5-VL's sectioned 16/24/24; Qwen3-VL's interleaved 24/20/20 over
// 64 pairs leaves 61 and 62 (their residues 1 and 2 past 3 x 20), as llama.cpp's IMROPE does.
TEST(Mrope, StillPairsAsLlamaCppPlacesThem) {
  auto q2 = Model::load(write(*find_shape("tiny-qwen2vl"), "q2"));
  ASSERT_TRUE(q2.ok()) << q2.error();
  EXPECT_EQ((*q2)->config().arch.name, "qwen2vl");
  EXPECT_EQ((*q2)->config().arch.rope_layout, RopeLayout::NeoX);
  EXPECT_TRUE((*q2)->config().arch.qkv_bias);
  EXPECT_TRUE((*q2)->config().ropes[0].still.empty());

  ModelShape s = *find_shape("tiny-qwen3vl");
  s.head_dim = 128;  // Qwen3-VL's heads
  s.rope_sections = {24, 20, 20, 0};
  auto q3 = Model::load(write(s, "q3-128"));
  ASSERT_TRUE(q3.ok()) << q3.error();
  EXPECT_TRUE((*q3)->config().arch.qk_norm);
  EXPECT_EQ((*q3)->config().ropes[0].still, pairs(64, {61, 62}));

  auto q3moe = Model::load(write(*find_shape("tiny-qwen3vlmoe"), "q3moe"));
  ASSERT_TRUE(q3moe.ok()) << q3moe.error();
  EXPECT_GT((*q3moe)->config().n_expert, 0);
  EXPECT_EQ((*q3moe)->config().ropes[0].still, pairs(16, {13, 14}));  // the tiny form's 7/4/4

  // sectioned with a fourth section: pair i's section is i % 8, pairs 6 and 7 the fourth's
  const std::string q2path = write(*find_shape("tiny-qwen2vl"), "q2-4");
  auto four = with_sections(q2path, "qwen2vl", {2, 2, 2, 2});
  ASSERT_TRUE(four.ok()) << four.error();
  EXPECT_EQ((*four)->config().ropes[0].still, pairs(8, {6, 7}));
  // sections that wrap: 8 pairs over 3 + 1 sections, pairs 3 and 7 the fourth's
  auto wrap = with_sections(q2path, "qwen2vl", {1, 1, 1, 1});
  ASSERT_TRUE(wrap.ok()) << wrap.error();
  EXPECT_EQ((*wrap)->config().ropes[0].still, pairs(8, {3, 7}));
}

// The files refused, each naming the key: no sections where the family needs them, an empty first or
// second section, sections wider than a head, a count other than 3 or 4.
TEST(Mrope, BadSectionsAreRefused) {
  const std::string path = write(*find_shape("tiny-qwen2vl"), "q2-bad");
  auto none = test::load_edited(path, [](GgufWriter& w) { w.remove("qwen2vl.rope.dimension_sections"); });
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().find("missing metadata key 'qwen2vl.rope.dimension_sections'"), std::string::npos) << none.error();
  for (const auto& [s, why] : std::vector<std::pair<std::vector<int32_t>, std::string>>{
           {{0, 4, 4, 0}, "must not be empty"}, {{8, 8, 8, 0}, "out of range"}, {{4, -1, 4, 0}, "out of range"},
           {{4, 4}, "3 or 4 section sizes"}, {{2, 2, 2, 2, 2}, "3 or 4 section sizes"}}) {
    auto bad = with_sections(path, "qwen2vl", s);
    ASSERT_FALSE(bad.ok()) << why;
    EXPECT_NE(bad.error().find("qwen2vl.rope.dimension_sections"), std::string::npos) << bad.error();
    EXPECT_NE(bad.error().find(why), std::string::npos) << bad.error();
  }
}

// GLM-4.1V's file is glm4 with sections (its q/k rows in NeoX order): NeoX RoPE; glm4 without them, or
// with empty ones (llama.cpp's use_mrope false), keeps the adjacent pairs. GLM-4.5V: glm4moe likewise.
TEST(Mrope, Glm4vRotatesNeoxGlm4Adjacent) {
  auto v = Model::load(write(*find_shape("tiny-glm4v"), "glm4v"));
  ASSERT_TRUE(v.ok()) << v.error();
  EXPECT_EQ((*v)->config().arch.rope_layout, RopeLayout::NeoX);
  EXPECT_TRUE((*v)->config().ropes[0].still.empty());
  auto plain = Model::load(write(*find_shape("tiny-glm4"), "glm4"));
  ASSERT_TRUE(plain.ok()) << plain.error();
  EXPECT_EQ((*plain)->config().arch.rope_layout, RopeLayout::Adjacent);
  auto empty = with_sections((*plain)->path(), "glm4", {0, 0, 0, 0});
  ASSERT_TRUE(empty.ok()) << empty.error();
  EXPECT_EQ((*empty)->config().arch.rope_layout, RopeLayout::Adjacent);
  auto moe = Model::load(write(*find_shape("tiny-glm4v-moe"), "glm4v-moe"));
  ASSERT_TRUE(moe.ok()) << moe.error();
  EXPECT_EQ((*moe)->config().arch.rope_layout, RopeLayout::NeoX);
}

// A still pair keeps angle 0 at every position -- in the batched forward's table and in the reference --
// while cos/sin keep the attention factor; the other pairs rotate as without sections.
TEST(Mrope, StillPairsDoNotRotate) {
  RopeParams r;
  r.theta = 100.0f;
  r.attn_factor = 0.5f;
  RopeParams still = r;
  still.still = pairs(4, {1, 3});
  const RopeTable t = rope_table(still, 8, nullptr), t0 = rope_table(r, 8, nullptr);
  EXPECT_EQ(t.inv_freq[1], 0.0f);
  EXPECT_EQ(t.inv_freq[3], 0.0f);
  EXPECT_EQ(t.inv_freq[0], t0.inv_freq[0]);
  EXPECT_EQ(t.inv_freq[2], t0.inv_freq[2]);
  float c[4], s[4];
  rope_cos_sin_at(t, 37, 4, c, s);
  EXPECT_FLOAT_EQ(c[1], 0.5f);
  EXPECT_FLOAT_EQ(s[1], 0.0f);
  EXPECT_GT(std::abs(s[0]), 0.01f);
  std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8}, b = a;
  ref::rope(a.data(), 8, 37, still, RopeLayout::NeoX, nullptr);
  ref::rope(b.data(), 8, 37, r, RopeLayout::NeoX, nullptr);
  EXPECT_FLOAT_EQ(a[1], 1.0f);  // pair 1: elements 1 and 5, times the attention factor only
  EXPECT_FLOAT_EQ(a[5], 3.0f);
  EXPECT_FLOAT_EQ(a[0], b[0]);
  EXPECT_FLOAT_EQ(a[6], b[6]);
  EXPECT_NE(a[1], b[1]);
}
