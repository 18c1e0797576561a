// Gemma 4 read from its files: each layer's geometry by its kind (sliding: narrow heads, more K/V heads,
// their own RoPE; full: wide heads, fewer K/V heads, proportional RoPE through rope_freqs, K = V), the
// shared-K/V layers reading an earlier layer's cache, the per-layer embeddings and output scales, the
// cache laid out per slot. And each matters: the same weights without it give other logits. (Both tiny
// forms also run FamilyTest's batched check in model_test.cpp; llama.cpp's logits:
// tests/llamacpp/families.mjs.)
#include <gtest/gtest.h>

#include <cmath>
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

std::string tiny_file(const std::string& shape) { return test::family_file(shape); }
std::shared_ptr<Model> tiny(const std::string& shape) { return test::family_model(shape); }

// The logits at position 11 (past the 8-position window) of a short sequence, the model edited.
std::vector<float> logits_of(const std::shared_ptr<Model>& m,
                             const std::function<void(ModelConfig&, ModelWeights&)>& edit = nullptr) {
  return test::family_logits(m, 12, edit);
}

}  // namespace

TEST(Gemma4, EachLayerHasTheGeometryOfItsKind) {
  auto m = tiny("tiny-gemma4");
  ASSERT_NE(m, nullptr);
  const ModelConfig& c = m->config();
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f);
  EXPECT_FLOAT_EQ(c.embd_scale, 8.0f);
  EXPECT_FLOAT_EQ(c.final_softcap, 30.0f);
  EXPECT_EQ(c.head_dim, 64);  // the widest
  EXPECT_EQ(c.n_head_kv, 2);
  ASSERT_EQ(c.ropes.size(), 2u);
  EXPECT_EQ(c.ropes[0].n_rot, 64);
  EXPECT_TRUE(c.ropes[0].freq_factors);
  EXPECT_EQ(c.ropes[1].n_rot, 32);
  EXPECT_FALSE(c.ropes[1].freq_factors);
  EXPECT_FLOAT_EQ(c.ropes[1].theta, 10000.0f);
  EXPECT_FLOAT_EQ(c.ropes[0].theta, 1000000.0f);
  ASSERT_EQ(m->weights().rope_freqs.size(), 32u);  // a quarter of the 32 pairs rotate
  EXPECT_EQ(m->weights().rope_freqs[7], 1.0f);
  EXPECT_EQ(m->weights().rope_freqs[8], 1e30f);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const bool full = (l + 1) % 4 == 0;
    EXPECT_EQ(c.layer_attn[static_cast<size_t>(l)].window, full ? 0 : 8) << l;
    EXPECT_EQ(c.layer_attn[static_cast<size_t>(l)].rope, full ? 0 : 1) << l;
    EXPECT_EQ(c.head_dim_of(l), full ? 64 : 32) << l;
    EXPECT_EQ(c.n_head_kv_of(l), full ? 1 : 2) << l;
    EXPECT_EQ(c.n_rot_of(l), full ? 64 : 32) << l;
    EXPECT_EQ(c.n_ff_of(l), l >= 4 ? 192 : 96) << l;  // twice as wide where K/V is shared
    const LayerWeights& L = m->weights().layers[static_cast<size_t>(l)];
    EXPECT_EQ(L.wq.rows, 4 * c.head_dim_of(l));
    EXPECT_EQ(L.wo.cols, 4 * c.head_dim_of(l));
    EXPECT_EQ(L.w_gate.rows, c.n_ff_of(l));
    EXPECT_EQ(L.per_layer_inp_gate.rows, 16);
    EXPECT_EQ(L.per_layer_proj.cols, 16);
    EXPECT_NE(L.out_scale, 1.0f);
    if (l >= 4) {  // the shared-K/V layers have no K/V projections
      EXPECT_FALSE(L.wk.valid()) << l;
      EXPECT_TRUE(L.k_norm.empty()) << l;
    } else if (full) {  // K = V: no attn_v, V is the K projection
      EXPECT_EQ(L.wv.data, L.wk.data) << l;
    } else {
      EXPECT_NE(L.wv.data, L.wk.data) << l;
    }
  }
  EXPECT_EQ(c.n_embd_per_layer, 16);
  EXPECT_EQ(m->weights().per_layer_tok_embd.cols, 8 * 16);
  EXPECT_EQ(m->weights().per_layer_model_proj.rows, 8 * 16);
}

TEST(Gemma4, SharedLayersReadTheLastSlidingAndFullLayersCaches) {
  auto m = tiny("tiny-gemma4");
  ASSERT_NE(m, nullptr);
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.kv_shared_from, 4);
  EXPECT_EQ(c.n_kv_layers(), 4);
  for (int64_t l = 0; l < 4; ++l) {
    EXPECT_TRUE(c.stores_kv(l));
    EXPECT_EQ(c.slot(l), l);
  }
  for (int64_t l = 4; l < 8; ++l) {
    EXPECT_FALSE(c.stores_kv(l));
    EXPECT_EQ(c.slot(l), l == 7 ? 3 : 2) << l;  // llama.cpp: kv_from - 1 for full layers, kv_from - 2 else
  }
  // the cache: one slot per K/V layer, each its layer's heads
  const KvLayout lay = KvLayout::for_model(c, 16, 10, DType::F16);
  EXPECT_EQ(lay.n_layer, 4);
  ASSERT_EQ(lay.slot_shape.size(), 4u);
  EXPECT_EQ(lay.head_dim_of(0), 32);
  EXPECT_EQ(lay.n_head_kv_of(0), 2);
  EXPECT_EQ(lay.head_dim_of(3), 64);
  EXPECT_EQ(lay.n_head_kv_of(3), 1);
  // F16 K and V of 16 positions: three slots of 2 x 32 and one of 1 x 64 dimensions
  EXPECT_EQ(lay.bytes_per_block(), 2u * 16 * 2 * (3 * 2 * 32 + 64));
  auto kv = KvStorage::create(lay);
  ASSERT_TRUE(kv.ok());
  const PagedKvView v2 = kv->view(2), v3 = kv->view(3);
  EXPECT_EQ(v2.head_dim, 32);
  EXPECT_EQ(v3.n_head_kv, 1);
  EXPECT_EQ(v3.head_dim, 64);
  // slots follow one another without overlap: slot 3's keys after slot 2's values
  EXPECT_EQ(kv->keys(3), kv->values(2) + lay.block_bytes_of(2) * 10);
}

TEST(Gemma4, EveryPieceChangesTheLogits) {
  auto m = tiny("tiny-gemma4");
  ASSERT_NE(m, nullptr);
  const auto base = logits_of(m);
  EXPECT_NE(base, logits_of(m, [](ModelConfig&, ModelWeights& w) {
    for (auto& L : w.layers) L.out_scale = 1.0f;
  }));
  EXPECT_NE(base, logits_of(m, [](ModelConfig& c, ModelWeights&) { c.n_embd_per_layer = 0; }));
  EXPECT_NE(base, logits_of(m, [](ModelConfig& c, ModelWeights&) { c.arch.v_norm = false; }));
  EXPECT_NE(base, logits_of(m, [](ModelConfig& c, ModelWeights&) { c.ropes[1].freq_factors = true; }));
  // reading another layer's cache: layer 7 sharing layer 3's K/V, not layer 2's
  EXPECT_NE(base, logits_of(m, [](ModelConfig& c, ModelWeights&) {
    c.cache_slot[4] = 1;
  }));
}

// 26B-A4B's layers: experts beside the dense FFN, each part normed on its own, routed from the
// input's weightless norm times ffn_gate_inp.scale, each expert's output scaled.
TEST(Gemma4, ExpertsBesideTheDenseFfn) {
  auto m = tiny("tiny-gemma4-moe");
  ASSERT_NE(m, nullptr);
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.n_expert, 8);
  EXPECT_EQ(c.n_expert_used, 2);
  EXPECT_EQ(c.n_ff_exp, 48);
  EXPECT_TRUE(c.arch.moe_norm_topk);
  for (int64_t l = 0; l < c.n_layer; ++l) EXPECT_TRUE(c.layer_is_moe(l)) << l;
  const LayerWeights& L = m->weights().layers[2];
  EXPECT_EQ(L.w_gate.rows, 96);  // the dense FFN beside them
  ASSERT_EQ(L.gate_exps.size(), 8u);
  EXPECT_EQ(L.gate_exps[3].rows, 48);
  EXPECT_EQ(L.up_exps[3].data, L.gate_exps[3].row(48));  // one ffn_gate_up_exps: gate rows, then up rows
  EXPECT_EQ(L.down_exps_s.size(), 8u);
  const auto base = logits_of(m);
  EXPECT_NE(base, logits_of(m, [](ModelConfig&, ModelWeights& w) { for (auto& l : w.layers) l.down_exps_s.clear(); }));
  EXPECT_NE(base, logits_of(m, [](ModelConfig&, ModelWeights& w) {
    for (auto& l : w.layers) std::fill(l.ffn_gate_inp_s.begin(), l.ffn_gate_inp_s.end(), 1.0f);
  }));
  EXPECT_NE(base, logits_of(m, [](ModelConfig& c, ModelWeights&) { c.moe_layer.assign(c.moe_layer.size(), 0); }));
}

TEST(Gemma4, FilesThatDoNotFitAreRefused) {
  const std::string src = tiny_file("tiny-gemma4");
  {  // the shared layers must follow a sliding and a full layer
    auto bad = test::load_edited(src, [](GgufWriter& w) { w.set_u32("gemma4.attention.shared_kv_layers", 5); });
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().find("shared_kv_layers 5"), std::string::npos) << bad.error();
  }
  {
    auto bad = test::load_edited(src, [](GgufWriter& w) { w.set_u32("gemma4.attention.shared_kv_layers", 7); });
    ASSERT_FALSE(bad.ok());
  }
  {  // the sliding layers' head size is required
    auto f = GgufFile::open(src);
    ASSERT_TRUE(f.ok());
    GgufWriter w;
    for (const auto& [k, v] : f->metadata())
      if (k != "gemma4.attention.key_length_swa") w.set(k, v);
    for (const auto& t : f->tensors()) ASSERT_TRUE(w.add_tensor(t.name, t.type, t.ne, t.data).ok());
    const std::string out = src + ".noswa.gguf";
    ASSERT_TRUE(w.write(out).ok());
    auto bad = Model::load(out);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().find("key_length_swa"), std::string::npos) << bad.error();
  }
  {  // an expert layer without its router's input scale is refused naming the tensor
    auto bad = test::load_edited(tiny_file("tiny-gemma4-moe"), [](GgufWriter&) {},
                                 [](const std::string& t) { return t == "blk.1.ffn_gate_inp.scale"; });
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().find("blk.1.ffn_gate_inp.scale"), std::string::npos) << bad.error();
  }
  {  // a shared layer's K projection, when a file has one, is read and unused -- as llama.cpp does
    static std::vector<float> k(static_cast<size_t>(2 * 32 * 64), 0.25f);
    auto with = test::load_edited(src, [](GgufWriter& w) {
      EXPECT_TRUE(w.add_tensor("blk.5.attn_k.weight", DType::F32, {64, 64}, k.data()).ok());
    });
    ASSERT_TRUE(with.ok()) << with.error();
    EXPECT_EQ(logits_of(*with), logits_of(tiny("tiny-gemma4")));
  }
}
