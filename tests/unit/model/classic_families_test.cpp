// The classic families -- gpt2, starcoder, gptneox, falcon, bloom, mpt, olmo, baichuan -- read from their
// files: learned positions, ALiBi slopes, the parallel block's norms, bloom's embedding norm, olmo's
// weightless norms, mpt's and olmo's q/k/v clamp, baichuan's positions by layer count. And each
// matters: the same weights without it give other logits. (Every tiny form also runs FamilyTest's
// float64 and batched checks in model_test.cpp; llama.cpp's logits: tests/llamacpp/families.mjs.)
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "convert/dummy.h"
#include "family_fixture.h"
#include "gguf_edit.h"
#include "model/model.h"
#include "model/reference.h"
#include "quant/quant.h"
#include "test_support.h"

using namespace tmill;

namespace {

std::shared_ptr<Model> tiny(const std::string& shape) { return test::family_model(shape); }

// The logits at position 5 of a short sequence, with the model's config or weights edited.
std::vector<float> logits_of(const std::shared_ptr<Model>& m, const std::function<void(ModelConfig&, ModelWeights&)>& edit) {
  return test::family_logits(m, 6, edit);
}

std::vector<float> tensor(const Model& m, const std::string& name, int64_t n) {
  const GgufTensorInfo* t = m.file().find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  std::vector<float> v(static_cast<size_t>(n));
  if (t) dequantize_row(t->type, t->data, v.data(), n);
  return v;
}

}  // namespace

TEST(ClassicFamilies, Gpt2AndStarcoderLearnTheirPositions) {
  for (const char* shape : {"tiny-gpt2", "tiny-starcoder"}) {
    auto m = tiny(shape);
    ASSERT_NE(m, nullptr);
    const auto& c = m->config();
    const auto& w = m->weights();
    EXPECT_EQ(c.n_pos_embd, 256);
    EXPECT_EQ(w.pos_embd.rows, 256);
    EXPECT_TRUE(c.alibi.empty());
    for (int64_t l = 0; l < c.n_layer; ++l) EXPECT_FALSE(c.has_rope(l)) << shape << " " << l;
    const LayerWeights& L = w.layers[1];
    EXPECT_EQ(L.wq.name, "blk.1.attn_qkv.weight");
    EXPECT_EQ(L.bk.size(), static_cast<size_t>(c.kv_dim()));
    EXPECT_EQ(L.bo.size(), 64u);
    EXPECT_EQ(L.ffn_up_b.size(), 160u);
    EXPECT_EQ(w.output_norm_b.size(), 64u);
    const auto base = logits_of(m, nullptr);
    EXPECT_NE(base, logits_of(m, [](ModelConfig&, ModelWeights& w) { w.pos_embd = Matrix{}; }));
  }
  EXPECT_EQ(tiny("tiny-starcoder")->config().n_head_kv, 1);
}

TEST(ClassicFamilies, GptNeoxAndFalconParallelBlocksReadTheirOwnNorms) {
  auto par = tiny("tiny-gptneox"), seq = tiny("tiny-gptneox-seq");
  ASSERT_NE(par, nullptr);
  ASSERT_NE(seq, nullptr);
  EXPECT_TRUE(par->config().arch.parallel_block);
  EXPECT_FALSE(seq->config().arch.parallel_block);
  EXPECT_EQ(par->config().n_rot, 4);
  EXPECT_EQ(par->config().arch.rope_layout, RopeLayout::NeoX);
  for (const auto& m : {par, seq}) {
    EXPECT_EQ(m->weights().layers[1].ffn_norm.size(), 64u);
    EXPECT_EQ(m->weights().layers[1].ffn_norm_b.size(), 64u);
  }
  const auto base = logits_of(par, nullptr);
  EXPECT_NE(base, logits_of(par, [](ModelConfig& c, ModelWeights&) { c.arch.parallel_block = false; }));
  // the FFN's own norm matters: reading the attention's normed input instead gives other logits
  EXPECT_NE(base, logits_of(par, [](ModelConfig&, ModelWeights& w) {
              for (auto& L : w.layers) L.ffn_norm.clear(), L.ffn_norm_b.clear();
            }));

  auto f7 = tiny("tiny-falcon"), f40 = tiny("tiny-falcon-40b");
  ASSERT_NE(f7, nullptr);
  ASSERT_NE(f40, nullptr);
  EXPECT_TRUE(f7->config().arch.parallel_block);
  EXPECT_TRUE(f7->weights().layers[0].ffn_norm.empty());  // one norm: the FFN reads the attention's input
  EXPECT_TRUE(f7->weights().layers[0].bq.empty());
  EXPECT_FALSE(f7->weights().layers[0].w_gate.valid());
  // 40B: attention reads attn_norm_2, the FFN attn_norm
  const LayerWeights& L = f40->weights().layers[1];
  EXPECT_EQ(L.attn_norm, tensor(*f40, "blk.1.attn_norm_2.weight", 64));
  EXPECT_EQ(L.attn_norm_b, tensor(*f40, "blk.1.attn_norm_2.bias", 64));
  EXPECT_EQ(L.ffn_norm, tensor(*f40, "blk.1.attn_norm.weight", 64));
  EXPECT_EQ(L.ffn_norm_b, tensor(*f40, "blk.1.attn_norm.bias", 64));
  const auto b40 = logits_of(f40, nullptr);
  EXPECT_NE(b40, logits_of(f40, [](ModelConfig&, ModelWeights& w) {
              for (auto& L : w.layers) L.ffn_norm.clear(), L.ffn_norm_b.clear();
            }));
  // llama.cpp refuses a falcon that rotates part of each head; so does this
  DummyOptions o;
  o.shape = *find_shape("tiny-falcon");
  o.seed = 7;
  const std::string src = test::temp_dir() + "/falcon-edit.gguf";
  ASSERT_TRUE(write_dummy_model(o, src).ok());
  auto part = test::load_edited(src, [](GgufWriter& w) { w.set_u32("falcon.rope.dimension_count", 8); });
  ASSERT_FALSE(part.ok());
  EXPECT_NE(part.error().find("rope.dimension_count 8"), std::string::npos) << part.error();
  // gptneox's use_parallel_residual is required (as llama.cpp requires it)
  o.shape = *find_shape("tiny-gptneox");
  const std::string neox = test::temp_dir() + "/gptneox-edit.gguf";
  ASSERT_TRUE(write_dummy_model(o, neox).ok());
  auto none = test::load_edited(neox, [](GgufWriter& w) { w.remove("gptneox.use_parallel_residual"); });
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().find("gptneox.use_parallel_residual"), std::string::npos) << none.error();
}

TEST(ClassicFamilies, BloomAndMptUseAlibi) {
  auto b = tiny("tiny-bloom");
  ASSERT_NE(b, nullptr);
  const auto& c = b->config();
  ASSERT_EQ(c.alibi.size(), 4u);  // 4 heads, bias 8: 2^-2, 2^-4, 2^-6, 2^-8
  for (int h = 0; h < 4; ++h) EXPECT_FLOAT_EQ(c.alibi[static_cast<size_t>(h)], std::pow(2.0f, -2.0f * float(h + 1)));
  for (int64_t l = 0; l < c.n_layer; ++l) EXPECT_FALSE(c.has_rope(l));
  EXPECT_EQ(b->weights().embd_norm.size(), 64u);
  EXPECT_EQ(b->weights().embd_norm_b.size(), 64u);
  EXPECT_EQ(c.n_pos_embd, 0);
  const auto base = logits_of(b, nullptr);
  EXPECT_NE(base, logits_of(b, [](ModelConfig& c, ModelWeights&) { c.alibi.clear(); }));
  EXPECT_NE(base, logits_of(b, [](ModelConfig&, ModelWeights& w) { w.embd_norm.clear(), w.embd_norm_b.clear(); }));

  auto m = tiny("tiny-mpt");  // MPT-7B's form: ALiBi, no biases, no positions
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->config().alibi, c.alibi);
  EXPECT_EQ(m->config().n_pos_embd, 0);
  EXPECT_FALSE(m->weights().pos_embd.valid());
  EXPECT_TRUE(m->weights().layers[0].attn_norm_b.empty());
  EXPECT_TRUE(m->weights().layers[0].bq.empty());
  EXPECT_TRUE(m->weights().layers[0].ffn_up_b.empty());
  EXPECT_EQ(m->config().clamp_kqv, 0.0f);
  auto mb = tiny("tiny-mpt-biased");  // every bias, learned positions, no ALiBi, the clamp
  ASSERT_NE(mb, nullptr);
  EXPECT_TRUE(mb->config().alibi.empty());
  EXPECT_EQ(mb->config().n_pos_embd, 256);
  EXPECT_EQ(mb->weights().layers[1].attn_norm_b.size(), 64u);
  EXPECT_EQ(mb->weights().layers[1].bv.size(), 64u);
  EXPECT_EQ(mb->weights().layers[1].ffn_down_b.size(), 64u);
  EXPECT_FLOAT_EQ(mb->config().clamp_kqv, 0.2f);
  const auto mbase = logits_of(mb, nullptr);
  EXPECT_NE(mbase, logits_of(mb, [](ModelConfig& c, ModelWeights&) { c.clamp_kqv = 0; }));
  // q / k LayerNorms (MPT's qk_ln) are not computed: refused naming the tensor, not ignored
  DummyOptions o;
  o.shape = *find_shape("tiny-mpt");
  o.seed = 7;
  const std::string src = test::temp_dir() + "/mpt-edit.gguf";
  ASSERT_TRUE(write_dummy_model(o, src).ok());
  static const std::vector<float> ones(64, 1.0f);
  auto qk = test::load_edited(src, [](GgufWriter& w) {
    EXPECT_TRUE(w.add_tensor("blk.0.attn_q_norm.weight", DType::F32, {64}, ones.data()).ok());
  });
  ASSERT_FALSE(qk.ok());
  EXPECT_NE(qk.error().find("blk.0.attn_q_norm.weight"), std::string::npos) << qk.error();
}

TEST(ClassicFamilies, OlmoNormsHaveNoWeightsAndItsQkvIsClamped) {
  auto m = tiny("tiny-olmo");
  ASSERT_NE(m, nullptr);
  const auto& c = m->config();
  EXPECT_TRUE(c.arch.layer_norm);
  EXPECT_FLOAT_EQ(c.clamp_kqv, 0.2f);
  for (const auto& L : m->weights().layers) {
    EXPECT_EQ(L.attn_norm, std::vector<float>(64, 1.0f));
    EXPECT_EQ(L.ffn_norm, std::vector<float>(64, 1.0f));
    EXPECT_TRUE(L.attn_norm_b.empty());
  }
  EXPECT_EQ(m->weights().output_norm, std::vector<float>(64, 1.0f));
  const auto base = logits_of(m, nullptr);
  EXPECT_NE(base, logits_of(m, [](ModelConfig& c, ModelWeights&) { c.clamp_kqv = 0; }));
  EXPECT_NE(base, logits_of(m, [](ModelConfig& c, ModelWeights&) { c.arch.layer_norm = false; }));
}

TEST(ClassicFamilies, BaichuanPicksItsPositionsByLayerCount) {
  auto b7 = tiny("tiny-baichuan"), b13 = tiny("tiny-baichuan-13b");
  ASSERT_NE(b7, nullptr);
  ASSERT_NE(b13, nullptr);
  for (int64_t l = 0; l < 32; ++l) EXPECT_TRUE(b7->config().has_rope(l)) << l;
  EXPECT_TRUE(b7->config().alibi.empty());
  EXPECT_EQ(b13->config().alibi.size(), 2u);
  for (int64_t l = 0; l < 40; ++l) EXPECT_FALSE(b13->config().has_rope(l)) << l;
  // any other count: neither (llama.cpp's LLM_TYPE_UNKNOWN)
  DummyOptions o;
  o.shape = *find_shape("tiny-baichuan");
  o.shape.n_layer = 3;
  o.seed = 7;
  const std::string p = test::temp_dir() + "/baichuan-3.gguf";
  ASSERT_TRUE(write_dummy_model(o, p).ok());
  auto b3 = Model::load(p);
  ASSERT_TRUE(b3.ok()) << b3.error();
  EXPECT_TRUE((*b3)->config().alibi.empty());
  for (int64_t l = 0; l < 3; ++l) EXPECT_FALSE((*b3)->config().has_rope(l));
}

// ChatGLM: gate and up in one ffn_up (row views), attn_qkv's bias, half of each head rotated on adjacent
// pairs; CodeShell: starcoder's layer with NeoX RoPE; Jais 2: the same with ReLU squared.
TEST(ClassicFamilies, ChatglmAndCodeshell) {
  auto g = tiny("tiny-chatglm");
  ASSERT_NE(g, nullptr);
  const auto& c = g->config();
  EXPECT_EQ(c.n_rot, 8);
  EXPECT_EQ(c.arch.rope_layout, RopeLayout::Adjacent);
  EXPECT_FALSE(c.arch.layer_norm);
  const LayerWeights& L = g->weights().layers[1];
  EXPECT_EQ(L.w_gate.name, "blk.1.ffn_up.weight");
  EXPECT_EQ(L.w_up.name, "blk.1.ffn_up.weight");
  EXPECT_EQ(L.w_up.data, L.w_gate.row(160));  // up: the second half of the rows
  EXPECT_EQ(L.bq.size(), 64u);
  EXPECT_EQ(L.bk.size(), static_cast<size_t>(c.kv_dim()));
  auto s = tiny("tiny-codeshell");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->config().arch.rope_layout, RopeLayout::NeoX);
  EXPECT_TRUE(s->config().has_rope(0));
  EXPECT_EQ(s->config().n_pos_embd, 0);
  EXPECT_EQ(s->weights().layers[0].bo.size(), 64u);
  EXPECT_EQ(s->weights().layers[0].ffn_up_b.size(), 160u);
  EXPECT_EQ(s->weights().layers[0].attn_norm_b.size(), 64u);
  auto j = tiny("tiny-jais2");  // Jais 2: codeshell's layer with ReLU squared, tied
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->config().arch.ffn_act, FfnActivation::ReluSqr);
  EXPECT_EQ(j->config().arch.rope_layout, RopeLayout::NeoX);
  EXPECT_TRUE(j->config().tied_output);
  EXPECT_EQ(j->weights().layers[1].ffn_up_b.size(), 160u);
}

// Jais: ALiBi from its key, q.k over head_dim (muP), a gated FFN with biases -- each of which matters.
TEST(ClassicFamilies, JaisScalesByHeadDimAndBiasesItsGatedFfn) {
  auto m = tiny("tiny-jais");
  ASSERT_NE(m, nullptr);
  const auto& c = m->config();
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / 16.0f);
  EXPECT_EQ(c.alibi.size(), 4u);
  const LayerWeights& L = m->weights().layers[1];
  EXPECT_EQ(L.ffn_gate_b.size(), 160u);
  EXPECT_EQ(L.ffn_up_b.size(), 160u);
  EXPECT_EQ(L.ffn_down_b.size(), 64u);
  EXPECT_TRUE(L.w_gate.valid());
  const auto base = logits_of(m, nullptr);
  EXPECT_NE(base, logits_of(m, [](ModelConfig& c, ModelWeights&) { c.attn_scale = 0.25f; }));
  EXPECT_NE(base, logits_of(m, [](ModelConfig&, ModelWeights& w) {
              for (auto& L : w.layers) L.ffn_gate_b.clear(), L.ffn_up_b.clear(), L.ffn_down_b.clear();
            }));
}

// DeepSeek-MoE: layer 0 dense, then softmax experts (not renormalized, scaled) beside gated shared ones;
// llama.cpp reads no gating key for it, so a file's sigmoid gating is not taken.
TEST(ClassicFamilies, DeepseekMoeRoutesBySoftmax) {
  auto m = tiny("tiny-deepseek-moe");
  ASSERT_NE(m, nullptr);
  const auto& c = m->config();
  EXPECT_EQ(c.n_expert, 8);
  EXPECT_EQ(c.n_layer_dense_lead, 1);
  EXPECT_FALSE(c.layer_is_moe(0));
  EXPECT_TRUE(c.layer_is_moe(1));
  EXPECT_FALSE(c.moe_sigmoid);
  EXPECT_FALSE(c.arch.moe_norm_topk);
  EXPECT_FLOAT_EQ(c.moe_weights_scale, 2.5f);
  EXPECT_EQ(c.n_ff_shexp, 2 * 32);
  const LayerWeights& L = m->weights().layers[2];
  EXPECT_TRUE(L.gate_shexp.valid());
  EXPECT_TRUE(L.exp_probs_b.empty());
  DummyOptions o;
  o.shape = *find_shape("tiny-deepseek-moe");
  o.seed = 7;
  const std::string src = test::temp_dir() + "/deepseek-edit.gguf";
  ASSERT_TRUE(write_dummy_model(o, src).ok());
  auto sig = test::load_edited(src, [](GgufWriter& w) {
    w.set_u32("deepseek.expert_gating_func", 2);
    w.set_bool("deepseek.expert_weights_norm", true);
  });
  ASSERT_TRUE(sig.ok()) << sig.error();
  EXPECT_FALSE((*sig)->config().moe_sigmoid);
  EXPECT_FALSE((*sig)->config().arch.moe_norm_topk);
}

// ggml's soft_max slopes (n = 8 for 12 heads: m0 = 2^-1 for heads 0..7, m1 = 2^-0.5 odd powers after).
TEST(ClassicFamilies, SetAlibiGivesGgmlSlopesAndTurnsRopeOff) {
  ModelConfig c;
  c.n_head = 12;
  c.layer_attn.assign(3, LayerAttention{});
  set_alibi(c, 8.0f);
  ASSERT_EQ(c.alibi.size(), 12u);
  for (int h = 0; h < 8; ++h) EXPECT_FLOAT_EQ(c.alibi[h], std::pow(0.5f, float(h + 1))) << h;
  for (int h = 8; h < 12; ++h) EXPECT_FLOAT_EQ(c.alibi[h], std::pow(std::sqrt(0.5f), float(2 * (h - 8) + 1))) << h;
  for (const LayerAttention& la : c.layer_attn) EXPECT_EQ(la.rope, -1);
  c.n_head = 32;  // a power of two: m0^(h+1) for all, with max bias 4: 2^(-(h+1)/8)
  set_alibi(c, 4.0f);
  for (int h = 0; h < 32; ++h) EXPECT_NEAR(c.alibi[h], std::pow(2.0f, -float(h + 1) / 8.0f), 1e-6f) << h;
}
