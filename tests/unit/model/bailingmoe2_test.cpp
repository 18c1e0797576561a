// bailingmoe2 (Ling 2.0) read from its file: q/k/v as row views of the fused attn_qkv, DeepSeek-V3's
// routing fields, and the shared experts' rows from expert_shared_feed_forward_length when present.
#include <gtest/gtest.h>

#include "convert/dummy.h"
#include "gguf_edit.h"
#include "model/model.h"
#include "test_support.h"

using namespace tmill;

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
