// The families with recurrent layers (granitehybrid's Mamba-2 mixers, qwen35's gated delta nets,
// nemotron_h's single-block layers): what their files say -- which layer is what, the state each
// sequence carries, the cache layout -- and the files refused with a reason. The forward passes are
// FamilyTest's (reference against float64, batched against reference), tests/llamacpp/families.mjs's
// (against llama.cpp) and Invariance's (batching, preemption).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "convert/dummy.h"
#include "formats/gguf.h"
#include "gguf_edit.h"
#include "model/kv_storage.h"
#include "model/model.h"
#include "model/reference.h"
#include "test_support.h"

using namespace tmill;

namespace {

std::shared_ptr<Model> tiny(const std::string& shape) {
  DummyOptions o;
  o.shape = *find_shape(shape);
  o.dtype = DType::F32;
  const std::string path = test::temp_dir() + "/recurrent-" + shape + ".gguf";
  auto st = write_dummy_model(o, path);
  EXPECT_TRUE(st.ok()) << st.error();
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.error();
  return m.ok() ? *m : nullptr;
}

// m's file with metadata key `key` set to v, loaded again.
Result<std::shared_ptr<Model>> rewrite(const Model& m, const std::string& key, const GgufValue& v) {
  return test::load_edited(m.path(), [&](GgufWriter& w) { w.set(key, v); });
}

}  // namespace

TEST(Recurrent, GraniteHybridLayersAndState) {
  auto m = tiny("tiny-granitehybrid");
  ASSERT_TRUE(m);
  const ModelConfig& c = m->config();
  // mixers on layers 0, 2, 4 (head_count_kv 0), attention on 1 and 3, all without RoPE (finetuned false)
  EXPECT_EQ(c.ssm_layer, (std::vector<uint8_t>{1, 0, 1, 0, 1}));
  EXPECT_EQ(c.cache_slot, (std::vector<int32_t>{0, 0, 1, 1, 2}));
  for (int64_t l = 0; l < c.n_layer; ++l) EXPECT_FALSE(c.has_rope(l)) << l;
  EXPECT_EQ(c.ssm_d_inner, 128);
  EXPECT_EQ(c.ssm_head_dim(), 16);
  EXPECT_EQ(c.ssm_conv_dim(), 128 + 2 * 2 * 16);
  EXPECT_EQ(c.ssm_in_dim(), 2 * 128 + 2 * 2 * 16 + 8);
  const KvLayout lay = KvLayout::for_model(c, 16, 8, DType::F16);
  EXPECT_EQ(lay.n_layer, 2);
  EXPECT_EQ(lay.n_state_layers, 3);
  EXPECT_EQ(lay.state_floats, 3 * c.ssm_conv_dim() + 128 * 16);
  EXPECT_EQ(lay.num_state_slots, 1);
  EXPECT_EQ(lay.total_bytes(), lay.bytes_per_block() * 8 + 3 * lay.state_floats * sizeof(float));
  auto one = rewrite(*m, "granitehybrid.attention.head_count_kv", GgufValue::u32(2));
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.error().find("per layer"), std::string::npos) << one.error();
  auto heads = rewrite(*m, "granitehybrid.ssm.time_step_rank", GgufValue::u32(7));
  ASSERT_FALSE(heads.ok());
  EXPECT_NE(heads.error().find("not a multiple of ssm.time_step_rank"), std::string::npos) << heads.error();
  auto roped = rewrite(*m, "granitehybrid.rope.scaling.finetuned", GgufValue::boolean(true));
  ASSERT_TRUE(roped.ok()) << roped.error();
  EXPECT_TRUE((*roped)->config().has_rope(1));
}

TEST(Recurrent, Qwen35LayersAndRefusals) {
  auto m = tiny("tiny-qwen35");
  ASSERT_TRUE(m);
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.ssm_layer, (std::vector<uint8_t>{1, 1, 1, 0}));  // full_attention_interval 4
  for (int64_t l = 0; l < 3; ++l) EXPECT_TRUE(c.is_gdn(l));
  EXPECT_EQ(c.q_proj_dim(), 2 * c.q_dim());  // queries and gates
  EXPECT_EQ(m->weights().layers[3].wq.rows, 2 * c.q_dim());
  EXPECT_EQ(c.n_rot, 8);
  // attention.recurrent_layers wins over the interval
  auto marked = rewrite(*m, "qwen35.attention.recurrent_layers", GgufValue::i32_array({1, 0, 1, 1}));
  ASSERT_FALSE(marked.ok());  // (layer 1's tensors are a delta net's: the loader names the first it misses)
  EXPECT_NE(marked.error().find("blk.1."), std::string::npos) << marked.error();
  // M-RoPE sections that put rotated pair 2 of 4 on the extra position: it stays still for text, as in
  // llama.cpp (mrope_test.cpp); sections wider than a head are refused
  auto sections = rewrite(*m, "qwen35.rope.dimension_sections", GgufValue::i32_array({2, 2, 0, 0}));
  ASSERT_TRUE(sections.ok()) << sections.error();
  EXPECT_EQ((*sections)->config().ropes[0].still, (std::vector<uint8_t>{0, 0, 1, 0}));
  auto wide = rewrite(*m, "qwen35.rope.dimension_sections", GgufValue::i32_array({8, 8, 8, 0}));
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.error().find("out of range"), std::string::npos) << wide.error();
  // value heads of another width than the key heads (llama.cpp's delta net needs them equal)
  auto widths = rewrite(*m, "qwen35.ssm.inner_size", GgufValue::u32(128));
  ASSERT_FALSE(widths.ok());
  EXPECT_NE(widths.error().find("key heads' size"), std::string::npos) << widths.error();
}

// Qwen3-Next's fused projections, regrouped at load: ssm_ba's [beta, alpha] per key head's group
// into one beta and one alpha row per value head, and an older file's ssm_in ([q, k, v, z] per group)
// into attn_qkv's and attn_gate's rows -- the same weights in that form give the same logits. Its value
// heads are grouped by key head (Qwen3.5's are tiled); against llama.cpp: families.mjs's qwen3next entries.
TEST(Recurrent, Qwen3NextRegroupsItsFusedProjections) {
  auto m = tiny("tiny-qwen3next");
  ASSERT_TRUE(m);
  const ModelConfig& c = m->config();
  ASSERT_EQ(c.ssm_n_head, 4);
  ASSERT_EQ(c.ssm_n_group, 2);
  EXPECT_EQ(c.ssm_layer, (std::vector<uint8_t>{1, 1, 1, 0}));
  for (int64_t h = 0; h < 4; ++h) EXPECT_EQ(c.gdn_key_head(h), h / 2);
  EXPECT_TRUE(c.ropes[0].still.empty());
  EXPECT_EQ(c.arch.rope_layout, RopeLayout::NeoX);
  const int64_t E = c.n_embd, H = 4, HK = 2, R = 2, D = c.ssm_d_state, CD = c.ssm_conv_dim(), DI = c.ssm_d_inner;
  const size_t row = static_cast<size_t>(E) * sizeof(float);
  for (int64_t l = 0; l < 3; ++l) {
    const LayerWeights& L = m->weights().layers[static_cast<size_t>(l)];
    const GgufTensorInfo* ba = m->file().find_tensor("blk." + std::to_string(l) + ".ssm_ba.weight");
    ASSERT_NE(ba, nullptr);
    for (int64_t h = 0; h < H; ++h) {
      const uint8_t* group = ba->data + static_cast<size_t>((h / R) * 2 * R) * row;
      EXPECT_EQ(std::memcmp(L.ssm_beta.row(h), group + static_cast<size_t>(h % R) * row, row), 0) << l << " " << h;
      EXPECT_EQ(std::memcmp(L.ssm_alpha.row(h), group + static_cast<size_t>(R + h % R) * row, row), 0) << l << " " << h;
    }
  }
  // the older form, built from the same rows: per key head g, its q, k, value heads' and z rows
  std::vector<std::vector<float>> ssm_in(3);
  auto legacy = test::load_edited(
      m->path(),
      [&](GgufWriter& w) {
        for (int64_t l = 0; l < 3; ++l) {
          const std::string p = "blk." + std::to_string(l) + ".";
          const auto* qkv = reinterpret_cast<const float*>(m->file().find_tensor(p + "attn_qkv.weight")->data);
          const auto* z = reinterpret_cast<const float*>(m->file().find_tensor(p + "attn_gate.weight")->data);
          std::vector<float>& out = ssm_in[static_cast<size_t>(l)];
          auto rows = [&](const float* src, int64_t r0, int64_t n) { out.insert(out.end(), src + r0 * E, src + (r0 + n) * E); };
          for (int64_t g = 0; g < HK; ++g) {
            rows(qkv, g * D, D);                // q
            rows(qkv, HK * D + g * D, D);       // k
            rows(qkv, 2 * HK * D + g * R * D, R * D);  // the group's value heads
            rows(z, g * R * D, R * D);          // their z
          }
          ASSERT_EQ(static_cast<int64_t>(out.size()), (CD + DI) * E);
          ASSERT_TRUE(w.add_tensor(p + "ssm_in.weight", DType::F32, {E, CD + DI}, out.data()).ok());
        }
      },
      [](const std::string& t) { return t.find("attn_qkv") != std::string::npos || t.find("attn_gate") != std::string::npos; });
  ASSERT_TRUE(legacy.ok()) << legacy.error();
  ReferenceForward a(m, 16), b(*legacy, 16);
  for (int64_t p = 0; p < 6; ++p) {
    const auto tok = static_cast<int32_t>(p * 37 + 5);
    ASSERT_EQ(a.forward(tok, p), b.forward(tok, p)) << p;
  }
  // without ssm_ba the file is refused naming it
  auto no_ba = test::load_edited(m->path(), [](GgufWriter&) {},
                                 [](const std::string& t) { return t == "blk.1.ssm_ba.weight"; });
  ASSERT_FALSE(no_ba.ok());
  EXPECT_NE(no_ba.error().find("blk.1.ssm_ba.weight"), std::string::npos) << no_ba.error();
}

// Falcon-H1: every layer has attention and a Mamba-2 mixer, so each holds K/V and a sequence state under
// the same cache slot; its mixers have a width of their own (96, not 2 x 64) and the grouped norm is
// the file's choice; the FFN's norm is the tensor blk.N.ffn_norm, as its converter names it.
TEST(Recurrent, FalconH1LayersHoldKvAndState) {
  auto m = tiny("tiny-falcon-h1");
  ASSERT_TRUE(m);
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.ssm_layer, (std::vector<uint8_t>{1, 1, 1}));
  EXPECT_EQ(c.cache_slot, (std::vector<int32_t>{0, 1, 2}));
  for (int64_t l = 0; l < 3; ++l) EXPECT_TRUE(c.has_attention(l) && c.is_ssm(l) && c.has_rope(l)) << l;
  EXPECT_EQ(c.n_kv_layers(), 3);
  EXPECT_EQ(c.arch.rope_layout, RopeLayout::NeoX);
  EXPECT_EQ(c.ssm_d_inner, 96);
  EXPECT_EQ(c.ssm_head_dim(), 16);
  const KvLayout lay = KvLayout::for_model(c, 16, 8, DType::F16);
  EXPECT_EQ(lay.n_layer, 3);
  EXPECT_EQ(lay.n_state_layers, 3);
  EXPECT_EQ(lay.state_floats, 3 * c.ssm_conv_dim() + 96 * 16);
  for (const LayerWeights& L : m->weights().layers) {
    EXPECT_TRUE(L.wq.valid() && L.conv_in.valid());
    EXPECT_EQ(L.ssm_norm.size(), 96u);
    EXPECT_EQ(L.ffn_norm.size(), 64u);
  }
  auto bare = tiny("tiny-falcon-h1-nonorm");
  ASSERT_TRUE(bare);
  for (const LayerWeights& L : bare->weights().layers) EXPECT_TRUE(L.ssm_norm.empty());
  // the FFN's norm under the usual name is not the file llama.cpp reads: refused, naming the one it needs
  auto renamed = test::load_edited(
      m->path(),
      [&](GgufWriter& w) {
        const GgufTensorInfo* t = m->file().find_tensor("blk.0.ffn_norm");
        ASSERT_TRUE(w.add_tensor("blk.0.ffn_norm.weight", t->type, t->ne, t->data).ok());
      },
      [](const std::string& t) { return t == "blk.0.ffn_norm"; });
  ASSERT_FALSE(renamed.ok());
  EXPECT_NE(renamed.error().find("'blk.0.ffn_norm'"), std::string::npos) << renamed.error();
  // FFN biases (llama.cpp would add them) are refused by name
  static const std::vector<float> bias(160, 0.5f);
  auto biased = test::load_edited(m->path(), [](GgufWriter& w) {
    ASSERT_TRUE(w.add_tensor("blk.0.ffn_up.bias", DType::F32, {160}, bias.data()).ok());
  });
  ASSERT_FALSE(biased.ok());
  EXPECT_NE(biased.error().find("FFN biases (blk.0.ffn_up.bias)"), std::string::npos) << biased.error();
}

// The attention-free stacks: every layer one mixer and nothing else (no K/V layer at all, no FFN), each
// with its state slot; Mamba-1's sizes (dt's rank, no groups: the convolution spans d_inner) and
// falcon-mamba's norms from the file; its expansion other than 2 refused as llama.cpp refuses it.
TEST(Recurrent, MambaStacksHaveStatesOnly) {
  for (const char* shape : {"tiny-mamba", "tiny-mamba2"}) {
    auto m = tiny(shape);
    ASSERT_TRUE(m);
    const ModelConfig& c = m->config();
    EXPECT_EQ(c.n_kv_layers(), 0) << shape;
    EXPECT_EQ(c.n_ssm_layers(), 3) << shape;
    for (int64_t l = 0; l < 3; ++l) EXPECT_TRUE(!c.has_attention(l) && !c.has_ffn(l) && c.slot(l) == l) << shape;
    const KvLayout lay = KvLayout::for_model(c, 16, 8, DType::F16);
    EXPECT_EQ(lay.bytes_per_block(), 0u) << shape;
    EXPECT_EQ(lay.n_state_layers, 3) << shape;
  }
  auto m = tiny("tiny-mamba");
  const ModelConfig& c = m->config();
  EXPECT_TRUE(c.arch.mamba1);
  EXPECT_EQ(c.ssm_d_inner, 128);
  EXPECT_EQ(c.ssm_dt_rank, 4);  // ceil(64 / 16)
  EXPECT_EQ(c.ssm_conv_dim(), 128);
  EXPECT_EQ(c.ssm_in_dim(), 256);
  EXPECT_EQ(c.ssm_state_floats(), 3 * 128 + 128 * 16);
  EXPECT_FALSE(c.ssm_dt_b_c_rms);
  EXPECT_EQ(m->weights().layers[0].ssm_x.rows, 4 + 2 * 16);
  EXPECT_EQ(m->weights().layers[0].ssm_a.size(), 128u * 16u);
  auto falcon = tiny("tiny-falcon-mamba");
  ASSERT_TRUE(falcon);
  EXPECT_TRUE(falcon->config().ssm_dt_b_c_rms);
  EXPECT_FALSE(falcon->config().tied_output);
  auto wide = rewrite(*m, "mamba.ssm.inner_size", GgufValue::u32(192));
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.error().find("not 2 x embedding_length"), std::string::npos) << wide.error();
  auto flag = rewrite(*m, "mamba.ssm.dt_b_c_rms", GgufValue::u32(1));
  ASSERT_FALSE(flag.ok());
  EXPECT_NE(flag.error().find("must be a bool"), std::string::npos) << flag.error();
}

// Jamba: Mamba-1 mixers (head_count_kv 0) with weighted dt / B / C norms, attention without RoPE, and
// experts where the file has a router -- every other layer in the releases.
TEST(Recurrent, JambaLayersExpertsAndNorms) {
  auto m = tiny("tiny-jamba");
  ASSERT_TRUE(m);
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.ssm_layer, (std::vector<uint8_t>{1, 1, 0, 1}));
  EXPECT_EQ(c.cache_slot, (std::vector<int32_t>{0, 1, 0, 2}));
  EXPECT_EQ(c.n_kv_layers(), 1);
  EXPECT_FALSE(c.has_rope(2));
  EXPECT_EQ(c.moe_layer, (std::vector<uint8_t>{0, 1, 0, 1}));
  for (int64_t l = 0; l < 4; ++l) EXPECT_EQ(c.layer_is_moe(l), l % 2 == 1) << l;
  EXPECT_FALSE(c.arch.moe_norm_topk);
  EXPECT_EQ(c.ssm_dt_rank, 4);
  EXPECT_EQ(m->weights().layers[0].ssm_dt_norm.size(), 4u);
  EXPECT_EQ(m->weights().layers[0].ssm_c_norm.size(), 16u);
  auto bare = test::load_edited(m->path(), [](GgufWriter&) {},
                                [](const std::string& t) { return t == "blk.1.ssm_b_norm.weight"; });
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.error().find("blk.1.ssm_b_norm.weight"), std::string::npos) << bare.error();
}

TEST(Recurrent, NemotronHSingleBlockLayers) {
  auto m = tiny("tiny-nemotron-h");
  ASSERT_TRUE(m);
  const ModelConfig& c = m->config();
  // "M-M*-M-": mixers 0, 2, 5; MLPs 1, 4, 6; attention 3, without RoPE
  EXPECT_EQ(c.ssm_layer, (std::vector<uint8_t>{1, 0, 1, 0, 0, 1, 0}));
  EXPECT_EQ(c.ffn_only, (std::vector<uint8_t>{0, 1, 0, 0, 1, 0, 1}));
  EXPECT_EQ(c.no_ffn, (std::vector<uint8_t>{1, 0, 1, 1, 0, 1, 0}));
  EXPECT_EQ(c.n_kv_layers(), 1);
  EXPECT_EQ(c.slot(3), 0);
  EXPECT_EQ(c.slot(5), 2);
  EXPECT_FALSE(c.has_rope(3));
  EXPECT_EQ(c.n_ff, 160);
  for (int64_t l : {1, 4, 6}) {
    EXPECT_FALSE(m->weights().layers[static_cast<size_t>(l)].wq.valid()) << l;
    EXPECT_TRUE(m->weights().layers[static_cast<size_t>(l)].w_up.valid()) << l;
    EXPECT_TRUE(m->weights().layers[static_cast<size_t>(l)].ffn_norm.empty()) << l;
  }
  EXPECT_FALSE(m->weights().layers[3].w_up.valid());
  const KvLayout lay = KvLayout::for_model(c, 16, 8, DType::F16);
  EXPECT_EQ(lay.n_layer, 1);
  EXPECT_EQ(lay.n_state_layers, 3);
  auto both = rewrite(*m, "nemotron_h.feed_forward_length", GgufValue::i32_array({0, 160, 0, 160, 160, 0, 160}));
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.error().find("layer 3 has both attention and an FFN"), std::string::npos) << both.error();
  auto widths = rewrite(*m, "nemotron_h.feed_forward_length", GgufValue::i32_array({0, 160, 0, 0, 96, 0, 160}));
  ASSERT_FALSE(widths.ok());
  EXPECT_NE(widths.error().find("per-layer FFN widths"), std::string::npos) << widths.error();
  auto scalar = rewrite(*m, "nemotron_h.feed_forward_length", GgufValue::u32(160));
  ASSERT_FALSE(scalar.ok());
  EXPECT_NE(scalar.error().find("width per layer"), std::string::npos) << scalar.error();
}

// Nemotron 3's experts: no gate (ffn_up / ffn_down, ReLU squared), sigmoid routing with a selection bias,
// renormalized and scaled as the file says, an ungated shared expert; the layers as nemotron_h's.
TEST(Recurrent, NemotronHMoeUngatedExperts) {
  auto m = tiny("tiny-nemotron-h-moe");
  ASSERT_TRUE(m);
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.ffn_only, (std::vector<uint8_t>{0, 1, 0, 0, 1, 0, 1}));  // "MEM*EME"
  EXPECT_TRUE(c.arch.moe_ungated);
  EXPECT_TRUE(c.moe_sigmoid);
  EXPECT_TRUE(c.arch.moe_norm_topk);
  EXPECT_FLOAT_EQ(c.moe_weights_scale, 2.5f);
  EXPECT_EQ(c.n_ff_exp, 32);
  EXPECT_EQ(c.n_ff_shexp, 48);
  const LayerWeights& L = m->weights().layers[1];
  EXPECT_TRUE(L.gate_exps.empty());
  EXPECT_EQ(L.up_exps.size(), 8u);
  EXPECT_FALSE(L.gate_shexp.valid());
  EXPECT_TRUE(L.has_shared_expert());
  EXPECT_EQ(L.exp_probs_b.size(), 8u);
  auto shared = test::load_edited(m->path(), [&](GgufWriter& w) { w.remove("nemotron_h_moe.expert_shared_feed_forward_length"); });
  ASSERT_FALSE(shared.ok());
  EXPECT_NE(shared.error().find("expert_shared_feed_forward_length"), std::string::npos) << shared.error();
}
