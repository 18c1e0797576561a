// Mixture of experts: hyper-parameters and expert views per family, routing, the batched MoE FFN's
// expert grouping (decode reads only the chosen experts; batching never changes a sequence's
// logits), and load errors. (Batched vs reference vs float64 per family: model_test's FamilyTest.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>

#include "convert/dummy.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "model/forward.h"
#include "model/moe.h"
#include "model/reference.h"
#include "quant/quant.h"
#include "gguf_edit.h"
#include "test_support.h"

using namespace tmill;
using tmill::test::load_edited;

namespace {

std::string write_shape(const ModelShape& shape, DType dtype, const std::string& name) {
  DummyOptions o;
  o.shape = shape;
  o.dtype = dtype;
  o.seed = 11;
  const std::string path = test::temp_dir() + "/" + name + ".gguf";
  auto st = write_dummy_model(o, path);
  EXPECT_TRUE(st.ok()) << st.error();
  return path;
}

std::shared_ptr<Model> load_shape(const std::string& shape_name, DType dtype = DType::F32) {
  auto m = Model::load(write_shape(*find_shape(shape_name), dtype, shape_name + "-moe"));
  EXPECT_TRUE(m.ok()) << m.error();
  return *m;
}

}  // namespace

// Each family reads its expert sizes as llama.cpp does: qwen3moe/qwen2moe from
// expert_feed_forward_length (qwen2moe's shared expert from expert_shared_feed_forward_length),
// olmoe and Mixtral-style llama use feed_forward_length; gating flags per family.
TEST(Moe, HyperParametersPerFamily) {
  struct Want {
    const char* shape;
    int64_t n_ff_exp, n_ff_shexp;
    bool norm, full_qk_norm;
  };
  for (const Want& want : {Want{"tiny-qwen3moe", 32, 0, true, false}, Want{"tiny-qwen2moe", 32, 96, false, false},
                           Want{"tiny-olmoe", 64, 0, false, true}, Want{"tiny-mixtral", 64, 0, true, false}}) {
    auto m = load_shape(want.shape);
    const ModelConfig& c = m->config();
    EXPECT_TRUE(c.is_moe()) << want.shape;
    EXPECT_EQ(c.n_expert, 8) << want.shape;
    EXPECT_EQ(c.n_expert_used, 2) << want.shape;
    EXPECT_EQ(c.n_ff_exp, want.n_ff_exp) << want.shape;
    EXPECT_EQ(c.n_ff_shexp, want.n_ff_shexp) << want.shape;
    EXPECT_EQ(c.arch.moe_norm_topk, want.norm) << want.shape;
    EXPECT_EQ(c.arch.qk_norm_full, want.full_qk_norm) << want.shape;
    const LayerWeights& L = m->weights().layers[1];
    EXPECT_FALSE(L.w_gate.valid());
    EXPECT_EQ(L.gate_exps.size(), 8u);
    EXPECT_EQ(L.gate_inp_shexp.empty(), want.n_ff_shexp == 0) << want.shape;
    if (want.full_qk_norm) {
      EXPECT_EQ(static_cast<int64_t>(L.q_norm.size()), c.q_dim());
      EXPECT_EQ(static_cast<int64_t>(L.k_norm.size()), c.kv_dim());
    }
  }
  // the dense families have no experts
  EXPECT_FALSE(load_shape("tiny-llama")->config().is_moe());
}

// Expert e of a 3-D tensor is rows [e*rows, (e+1)*rows) of its bytes, in every stored type.
TEST(Moe, ExpertsAreRowViewsOfTheThreeDimensionalTensor) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::IQ4_NL, DType::MXFP4}) {
    ModelShape s = *find_shape("tiny-qwen3moe");
    s.n_embd = 64;
    auto m = Model::load(write_shape(s, t, "views"));
    ASSERT_TRUE(m.ok()) << m.error();
    const LayerWeights& L = (*m)->weights().layers[0];
    const GgufTensorInfo* up = (*m)->file().find_tensor("blk.0.ffn_up_exps.weight");
    ASSERT_NE(up, nullptr);
    ASSERT_EQ(up->ne, (std::vector<int64_t>{64, 32, 8}));
    for (int e = 0; e < 8; ++e) {
      const Matrix& v = L.up_exps[e];
      EXPECT_EQ(v.type, up->type);
      EXPECT_EQ(v.rows, 32);
      EXPECT_EQ(v.cols, 64);
      EXPECT_EQ(v.name, "blk.0.ffn_up_exps.weight");
      EXPECT_EQ(v.row(0), up->data + static_cast<size_t>(e) * up->nbytes / 8) << dtype_name(t);
    }
    // down: rows n_embd of n_ff_exp columns (32: F16 where a 256-block type does not fit)
    EXPECT_EQ(L.down_exps[7].rows, 64);
    EXPECT_EQ(L.down_exps[7].cols, 32);
  }
}

// The batched routing equals the reference's (as a set, in ascending expert order), with weights
// renormalized or not; equal probabilities go to the lower expert index.
TEST(Moe, RoutingMatchesTheReference) {
  std::vector<float> logits = {0.3f, -1.0f, 2.0f, 0.3f, 1.5f, -0.2f, 2.0f, 0.0f};
  std::vector<float> scratch(8);
  for (bool norm : {false, true})
    for (int k : {1, 2, 3, 4}) {
      std::vector<int32_t> ex(k);
      std::vector<float> wt(k);
      moe_route_token(logits.data(), 8, k, norm, ex.data(), wt.data(), scratch.data());
      auto want = ref::moe_route(logits.data(), 8, k, norm);
      std::sort(want.begin(), want.end());
      for (int j = 0; j < k; ++j) {
        EXPECT_EQ(ex[j], want[j].first) << k;
        EXPECT_FLOAT_EQ(wt[j], want[j].second) << k;
      }
    }
  // ties: experts 2 and 6 share the top probability, k = 1 takes 2; 0 and 3 tie for fourth place,
  // k = 4 takes 0
  auto one = ref::moe_route(logits.data(), 8, 1, false);
  EXPECT_EQ(one[0].first, 2);
  auto four = ref::moe_route(logits.data(), 8, 4, false);
  EXPECT_EQ(four[3].first, 0);
  auto five = ref::moe_route(logits.data(), 8, 5, true);
  EXPECT_EQ(five[4].first, 3);
  float sum = 0;
  for (auto& [e, w] : five) sum += w;
  EXPECT_NEAR(sum, 1.0f, 1e-6f);
  // unnormalized weights are the softmax probabilities
  float z = 0;
  for (float l : logits) z += std::exp(l - 2.0f);
  EXPECT_NEAR(one[0].second, 1.0f / z, 1e-6f);
}

// A decode step of one token computes only the experts it was routed to (at most k of 8); a batch
// computes the union of its tokens' experts, each once.
TEST(Moe, DecodeReadsOnlyTheChosenExperts) {
  auto m = load_shape("tiny-olmoe");
  const auto& c = m->config();
  Forward fwd(m, nullptr);
  auto kv = KvStorage::create(KvLayout{c.n_layer, c.n_head_kv, c.head_dim, 4, 16, DType::F32});
  ASSERT_TRUE(kv.ok());
  std::vector<float> logits;
  std::set<int32_t> seen;
  for (int32_t tok : {5, 77, 300, 12}) {
    ForwardBatch b;
    b.tokens = {tok};
    SeqSlice s;
    s.n_tokens = 1;
    s.block_table = {0};
    b.seqs = {s};
    fwd.run(b, *kv, logits);
    const auto& act = fwd.last_active_experts();
    EXPECT_GE(act.size(), 1u);
    EXPECT_LE(act.size(), static_cast<size_t>(c.n_expert_used));
    seen.insert(act.begin(), act.end());
  }
  EXPECT_GT(seen.size(), 2u);  // different tokens pick different experts
  ForwardBatch b;
  for (int i = 0; i < 12; ++i) b.tokens.push_back(i * 37 % 512);
  SeqSlice s;
  s.n_tokens = 12;
  s.block_table = {1, 2, 3};
  b.seqs = {s};
  fwd.run(b, *kv, logits);
  EXPECT_GT(fwd.last_active_experts().size(), static_cast<size_t>(c.n_expert_used));
  EXPECT_TRUE(std::is_sorted(fwd.last_active_experts().begin(), fwd.last_active_experts().end()));
}

// A sequence's logits are the same bits whether it runs alone or batched with others (its tokens'
// expert outputs are summed in the same order whatever else routes to those experts; the router
// runs per token), so batching and prefix-cache hits never change a greedy output. Quantized weights:
// the kernels are batch-invariant for those (bench/KERNELS.md), not for float weights.
TEST(Moe, BatchingNeverChangesASequencesLogits) {
  for (const char* shape : {"tiny-qwen3moe", "tiny-qwen2moe", "tiny-olmoe", "tiny-mixtral", "tiny-glm4moe", "tiny-deepseek3",
                            "tiny-ernie4_5-moe", "tiny-minimax-m2", "tiny-dots1"}) {
    auto m = load_shape(shape, DType::Q8_0);
    const auto& c = m->config();
    ThreadPool pool(2);
    Forward fwd(m, &pool);
    auto kv = KvStorage::create(KvLayout{c.n_layer, c.n_head_kv, c.head_dim, 4, 64, DType::F32});
    ASSERT_TRUE(kv.ok());
    const std::vector<int32_t> a = {5, 9, 13, 2, 7, 7, 1, 100, 42}, b = {11, 12, 13, 14, 15};
    auto alone = [&](const std::vector<int32_t>& toks, std::vector<int32_t> blocks) {
      ForwardBatch fb;
      fb.tokens = toks;
      SeqSlice s;
      s.n_tokens = static_cast<int32_t>(toks.size());
      s.block_table = std::move(blocks);
      s.logits = SeqSlice::Logits::All;
      fb.seqs = {s};
      std::vector<float> lg;
      fwd.run(fb, *kv, lg);
      return lg;
    };
    const auto la = alone(a, {0, 1, 2}), lb = alone(b, {3, 4});
    // together: a as a prompt chunk, b's first 4 tokens cached first (a prefix hit), then its 5th decoded
    ForwardBatch pre;
    pre.tokens = {11, 12, 13, 14};
    SeqSlice sp;
    sp.n_tokens = 4;
    sp.block_table = {10, 11};
    sp.logits = SeqSlice::Logits::None;
    pre.seqs = {sp};
    std::vector<float> lg;
    fwd.run(pre, *kv, lg);
    ForwardBatch mixed;
    mixed.tokens = a;
    mixed.tokens.push_back(15);
    SeqSlice sa, sb;
    sa.n_tokens = 9;
    sa.block_table = {20, 21, 22};
    sa.logits = SeqSlice::Logits::All;
    sb.token_begin = 9;
    sb.n_tokens = 1;
    sb.pos_begin = 4;
    sb.block_table = {10, 11};
    sb.logits = SeqSlice::Logits::Last;
    mixed.seqs = {sa, sb};
    fwd.run(mixed, *kv, lg);
    const size_t V = static_cast<size_t>(c.n_vocab);
    ASSERT_EQ(lg.size(), 10 * V);
    EXPECT_EQ(std::memcmp(lg.data(), la.data(), 9 * V * sizeof(float)), 0) << shape;
    EXPECT_EQ(std::memcmp(lg.data() + 9 * V, lb.data() + 4 * V, V * sizeof(float)), 0) << shape;
  }
}

// Greedy decoding with the batched forward picks the reference's tokens on every family.
TEST(Moe, BatchedGreedyEqualsReferenceGreedy) {
  for (const char* shape : {"tiny-qwen3moe", "tiny-qwen2moe", "tiny-olmoe", "tiny-mixtral", "tiny-glm4moe", "tiny-deepseek3",
                            "tiny-ernie4_5-moe", "tiny-minimax-m2", "tiny-dots1"}) {
    auto m = load_shape(shape);
    const auto& c = m->config();
    ThreadPool pool(2);
    Forward fwd(m, &pool);
    auto kv = KvStorage::create(KvLayout{c.n_layer, c.n_head_kv, c.head_dim, 4, 16, DType::F32});
    ASSERT_TRUE(kv.ok());
    ReferenceForward ref(m, 64);
    int32_t mine = 1, theirs = 1;
    SeqSlice s;
    for (int b = 0; b < 16; ++b) s.block_table.push_back(15 - b);
    std::vector<float> lg;
    for (int pos = 0; pos < 48; ++pos) {
      ASSERT_EQ(mine, theirs) << shape << " pos " << pos;
      ForwardBatch fb;
      fb.tokens = {mine};
      s.n_tokens = 1;
      s.pos_begin = pos;
      fb.seqs = {s};
      fwd.run(fb, *kv, lg);
      const auto& want = ref.forward(theirs, pos);
      mine = static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin());
      theirs = static_cast<int32_t>(std::max_element(want.begin(), want.end()) - want.begin());
    }
  }
}

// DeepSeek-V3's routing as glm4moe and deepseek2 use it: sigmoid scores, the experts chosen by score +
// selection bias (within the best groups, when grouped) but weighted by score alone, renormalized,
// then scaled; the batched routing equals the reference's for every option.
TEST(Moe, SigmoidRoutingWithSelectionBias) {
  std::vector<float> logits = {2.0f, 1.9f, 0.0f, -1.0f, 0.5f, -0.3f, 1.0f, -2.0f};
  std::vector<float> bias = {0.0f, 0.0f, 0.5f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  const auto sig = [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  const ModelConfig::MoeGate glm{/*norm=*/true, /*softmax_topk=*/false, /*sigmoid=*/true, /*scale=*/2.5f};
  // score + bias: expert 2 (0.5 + 0.5) beats expert 0 (0.881) and 1 (0.870)
  auto r = ref::moe_route(logits.data(), 8, 2, glm, bias.data());
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].first, 2);
  EXPECT_EQ(r[1].first, 0);
  const float sum = sig(0.0f) + sig(2.0f);
  EXPECT_NEAR(r[0].second, sig(0.0f) / sum * 2.5f, 1e-6f);  // weighted by the score, not score + bias
  EXPECT_NEAR(r[1].second, sig(2.0f) / sum * 2.5f, 1e-6f);
  // without the bias, 0 and 1; unnormalized and unscaled weights are the scores
  auto plain = ref::moe_route(logits.data(), 8, 2, ModelConfig::MoeGate{false, false, true, 1.0f}, nullptr);
  EXPECT_EQ(plain[0].first, 0);
  EXPECT_EQ(plain[1].first, 1);
  EXPECT_FLOAT_EQ(plain[1].second, sig(1.9f));
  // grouped routing: 4 groups of 2, the best 2 by their two best scores -- expert 0's group
  // (0.95 + 0.05) loses to {2, 3} (0.73 + 0.73) and {4, 5} (0.62 + 0.62), so 2 and 3 are chosen
  const std::vector<float> gl = {3.0f, -3.0f, 1.0f, 1.0f, 0.5f, 0.5f, -1.0f, -1.0f};
  ModelConfig::MoeGate grouped{false, false, true, 1.0f, 4, 2};
  auto g = ref::moe_route(gl.data(), 8, 2, grouped, nullptr);
  EXPECT_EQ(g[0].first, 2);
  EXPECT_EQ(g[1].first, 3);
  EXPECT_EQ(ref::moe_route(gl.data(), 8, 2, ModelConfig::MoeGate{false, false, true, 1.0f}, nullptr)[0].first, 0);
  std::vector<float> scratch(16), wt(4);
  std::vector<int32_t> ex(4);
  uint32_t state = 7;
  auto rnd = [&] { return static_cast<float>((state = state * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f; };
  for (int trial = 0; trial < 50; ++trial) {
    for (float& v : logits) v = 4 * rnd();
    for (float& v : bias) v = 0.4f * rnd();
    for (bool norm : {false, true})
      for (float scale : {1.0f, 2.5f})
        for (int k : {1, 2, 4}) {
          const ModelConfig::MoeGate g{norm, false, true, scale, trial % 3 ? 1 : 4, 2};
          const float* b = trial % 2 ? bias.data() : nullptr;
          moe_route_token(logits.data(), 8, k, g, b, ex.data(), wt.data(), scratch.data());
          auto want = ref::moe_route(logits.data(), 8, k, g, b);
          std::sort(want.begin(), want.end());
          for (int j = 0; j < k; ++j) {
            ASSERT_EQ(ex[j], want[j].first) << trial << " k " << k;
            ASSERT_EQ(wt[j], want[j].second) << trial << " k " << k;
          }
        }
  }
}

// glm4moe files: the leading dense layers, the experts' layers with the selection bias and an
// ungated shared expert, the routing options read from the file; what it cannot run is refused.
TEST(Moe, Glm4MoeLayersAndOptions) {
  const std::string src = write_shape(*find_shape("tiny-glm4moe"), DType::F32, "glm4moe");
  auto m = Model::load(src);
  ASSERT_TRUE(m.ok()) << m.error();
  const ModelConfig& c = (*m)->config();
  EXPECT_TRUE(c.moe_sigmoid);
  EXPECT_TRUE(c.arch.moe_norm_topk);
  EXPECT_FLOAT_EQ(c.moe_weights_scale, 2.5f);
  EXPECT_EQ(c.n_layer_dense_lead, 1);
  EXPECT_EQ(c.n_ff_exp, 32);
  EXPECT_EQ(c.n_ff_shexp, 32);  // one shared expert of n_ff_exp rows
  EXPECT_EQ(c.n_rot, 8);        // half of each head
  EXPECT_EQ(c.arch.rope_layout, RopeLayout::NeoX);
  const auto& layers = (*m)->weights().layers;
  EXPECT_TRUE(layers[0].w_gate.valid());
  EXPECT_EQ(layers[0].w_gate.rows, 160);
  EXPECT_TRUE(layers[0].gate_exps.empty());
  for (size_t l = 1; l < 3; ++l) {
    EXPECT_FALSE(layers[l].w_gate.valid());
    EXPECT_EQ(layers[l].gate_exps.size(), 8u);
    EXPECT_EQ(layers[l].exp_probs_b.size(), 8u);
    EXPECT_TRUE(layers[l].has_shared_expert());
    EXPECT_TRUE(layers[l].gate_inp_shexp.empty());
    EXPECT_EQ(layers[l].bq.size(), static_cast<size_t>(c.q_dim()));
    EXPECT_EQ(layers[l].q_norm.size(), static_cast<size_t>(c.head_dim));
  }
  auto keep = [](const std::string&) { return false; };
  auto err = [](const Result<std::shared_ptr<Model>>& r) { return r.ok() ? std::string("loaded") : r.error(); };
  auto softmax = load_edited(src, [](GgufWriter& w) { w.set_u32("glm4moe.expert_gating_func", 1); }, keep);
  ASSERT_TRUE(softmax.ok()) << softmax.error();
  EXPECT_FALSE((*softmax)->config().moe_sigmoid);
  EXPECT_NE(err(load_edited(src, [](GgufWriter& w) { w.set_u32("glm4moe.expert_gating_func", 3); }, keep))
                .find("glm4moe.expert_gating_func 3"), std::string::npos);
  EXPECT_NE(err(load_edited(src, [](GgufWriter& w) { w.remove("glm4moe.expert_shared_count"); }, keep))
                .find("missing metadata key 'glm4moe.expert_shared_count'"), std::string::npos);
  EXPECT_NE(err(load_edited(src, [](GgufWriter& w) { w.set_u32("glm4moe.leading_dense_block_count", 0); }, keep))
                .find("missing tensor 'blk.0.ffn_gate_inp.weight'"), std::string::npos);
  EXPECT_NE(err(load_edited(src, [](GgufWriter&) {}, [](const std::string& n) { return n == "blk.2.exp_probs_b.bias"; }))
                .find("missing tensor 'blk.2.exp_probs_b.bias'"), std::string::npos);
  // no shared expert: the count 0 and its tensors gone
  auto unshared = load_edited(src, [](GgufWriter& w) { w.set_u32("glm4moe.expert_shared_count", 0); },
                              [](const std::string& n) { return n.find("_shexp") != std::string::npos; });
  ASSERT_TRUE(unshared.ok()) << unshared.error();
  EXPECT_FALSE((*unshared)->weights().layers[1].has_shared_expert());
  // each option changes the logits
  auto first = [](const std::shared_ptr<Model>& model) {
    ReferenceForward ref(model, 8);
    ref.forward(3, 0);
    return ref.forward(9, 1);
  };
  const auto base = first(*m);
  auto unscaled = load_edited(src, [](GgufWriter& w) { w.set_f32("glm4moe.expert_weights_scale", 1.0f); }, keep);
  ASSERT_TRUE(unscaled.ok());
  for (const auto& other : {*softmax, *unshared, *unscaled}) EXPECT_NE(first(other), base);
}

// ERNIE 4.5 MoE files: softmax routing chosen with the optional selection bias over probabilities,
// always renormalized, a dense first layer, an ungated shared expert of its own width; the layer
// step must be 1 (what llama.cpp loads).
TEST(Moe, Ernie45MoeLayersAndOptions) {
  const std::string src = write_shape(*find_shape("tiny-ernie4_5-moe"), DType::F32, "ernie-moe");
  auto m = Model::load(src);
  ASSERT_TRUE(m.ok()) << m.error();
  const ModelConfig& c = (*m)->config();
  EXPECT_FALSE(c.moe_sigmoid);
  EXPECT_TRUE(c.arch.moe_norm_topk);
  EXPECT_EQ(c.n_layer_dense_lead, 1);
  EXPECT_EQ(c.n_ff_shexp, 64);
  const auto& layers = (*m)->weights().layers;
  EXPECT_TRUE(layers[0].w_gate.valid());
  EXPECT_EQ(layers[1].exp_probs_b.size(), 8u);
  EXPECT_TRUE(layers[1].has_shared_expert());
  EXPECT_TRUE(layers[1].gate_inp_shexp.empty());
  auto keep = [](const std::string&) { return false; };
  auto err = [](const Result<std::shared_ptr<Model>>& r) { return r.ok() ? std::string("loaded") : r.error(); };
  EXPECT_NE(err(load_edited(src, [](GgufWriter& w) { w.set_u32("ernie4_5-moe.interleave_moe_layer_step", 2); }, keep))
                .find("interleave_moe_layer_step 2"), std::string::npos);
  EXPECT_NE(err(load_edited(src, [](GgufWriter& w) { w.remove("ernie4_5-moe.interleave_moe_layer_step"); }, keep))
                .find("missing metadata key 'ernie4_5-moe.interleave_moe_layer_step'"), std::string::npos);
  // without the bias (older files) it loads and routes by probability alone: other logits
  auto unbiased = load_edited(src, [](GgufWriter&) {}, [](const std::string& n) { return n.ends_with("exp_probs_b.bias"); });
  ASSERT_TRUE(unbiased.ok()) << unbiased.error();
  EXPECT_TRUE((*unbiased)->weights().layers[1].exp_probs_b.empty());
  ReferenceForward a(*m, 8), b(*unbiased, 8);
  std::vector<float> la, lb;
  for (int64_t p = 0; p < 6; ++p) {
    la = a.forward(static_cast<int32_t>(p * 37 + 3), p);
    lb = b.forward(static_cast<int32_t>(p * 37 + 3), p);
  }
  EXPECT_NE(la, lb);
}

// What is not supported, or inconsistent, is a load error naming the key or tensor.
TEST(Moe, LoadErrorsNameTheProblem) {
  const std::string src = write_shape(*find_shape("tiny-qwen3moe"), DType::F32, "errors");
  auto keep = [](const std::string&) { return false; };
  auto err = [](const Result<std::shared_ptr<Model>>& r) { return r.ok() ? std::string("loaded") : r.error(); };
  EXPECT_NE(err(load_edited(src, [](GgufWriter& w) { w.remove("qwen3moe.expert_count"); }, keep))
                .find("qwen3moe.expert_count"), std::string::npos);
  EXPECT_NE(err(load_edited(src, [](GgufWriter& w) { w.set_u32("qwen3moe.expert_used_count", 9); }, keep))
                .find("expert_used_count"), std::string::npos);
  EXPECT_NE(err(load_edited(src, [](GgufWriter& w) { w.set_u32("qwen3moe.expert_gating_func", 2); }, keep))
                .find("expert_gating_func"), std::string::npos);
  // grouped routing: the used count is required, and the experts must split into groups of two or more
  EXPECT_NE(err(load_edited(src, [](GgufWriter& w) { w.set_u32("qwen3moe.expert_group_count", 4); }, keep))
                .find("missing metadata key 'qwen3moe.expert_group_used_count'"), std::string::npos);
  EXPECT_NE(err(load_edited(src, [](GgufWriter& w) {
                  w.set_u32("qwen3moe.expert_group_count", 3);
                  w.set_u32("qwen3moe.expert_group_used_count", 1);
                }, keep)).find("expert_group_count 3: 8 experts do not split"), std::string::npos);
  EXPECT_NE(err(load_edited(src, [](GgufWriter&) {}, [](const std::string& n) { return n == "blk.1.ffn_down_exps.weight"; }))
                .find("missing tensor 'blk.1.ffn_down_exps.weight'"), std::string::npos);
  // a wrong expert size is a shape error of the 3-D tensor
  EXPECT_NE(err(load_edited(src, [](GgufWriter& w) { w.set_u32("qwen3moe.expert_feed_forward_length", 64); }, keep))
                .find("ffn_gate_exps.weight' has shape [64, 32, 8], expected [64, 64, 8]"), std::string::npos);
  // a dense family with experts
  const std::string dense = write_shape(*find_shape("tiny-qwen3"), DType::F32, "dense");
  EXPECT_NE(err(load_edited(dense, [](GgufWriter& w) { w.set_u32("qwen3.expert_count", 8); }, keep))
                .find("qwen3.expert_count 8: experts are not supported"), std::string::npos);
  // llama with one expert or none is dense (as in llama.cpp)
  const std::string mix = write_shape(*find_shape("tiny-mixtral"), DType::F32, "mixtral");
  auto one = load_edited(mix, [](GgufWriter& w) { w.set_u32("llama.expert_count", 1); }, keep);
  EXPECT_NE(err(one).find("missing tensor 'blk.0.ffn_gate.weight'"), std::string::npos);
}

// tokenmill dummy refuses expert options that llama.cpp could not load.
TEST(Moe, DummyRefusesWhatLlamaCppCannotLoad) {
  auto fails = [](ModelShape s, const std::string& needle) {
    DummyOptions o;
    o.shape = s;
    o.dtype = DType::F32;
    auto st = write_dummy_model(o, test::temp_dir() + "/refused.gguf");
    return !st.ok() && st.error().find(needle) != std::string::npos;
  };
  ModelShape s = *find_shape("tiny-olmoe");
  s.n_head_kv = 2;
  EXPECT_TRUE(fails(s, "olmoe needs --n-head-kv == --n-head"));
  s = *find_shape("tiny-olmoe");
  s.n_ff_exp = 32;
  EXPECT_TRUE(fails(s, "--n-ff-exp 32 != --n-ff 64"));
  s = *find_shape("tiny-qwen3moe");
  s.n_expert_used = 9;
  EXPECT_TRUE(fails(s, "--n-expert-used 9"));
  s = *find_shape("tiny-qwen3");
  s.n_expert = 4;
  EXPECT_TRUE(fails(s, "has no experts"));
  s = *find_shape("tiny-qwen3moe");
  s.n_expert = 0;
  EXPECT_TRUE(fails(s, "needs --n-expert >= 2"));
}

// The activation observer (imatrix) sees every routed row of every active expert: for each layer,
// gate and up get n_tokens * k rows in all (n_embd wide), down as many of SwiGLU's output (n_ff_exp
// wide), each tagged with its expert; observing does not change the logits.
TEST(Moe, ObserverSeesEachExpertsRows) {
  struct Seen : ActivationObserver {
    std::map<std::string, int64_t> rows, cols;
    std::set<int64_t> experts;
    void on_matmul_input(const std::string& name, const float*, int64_t n_rows, int64_t n_cols) override {
      rows[name] += n_rows;
      cols[name] = n_cols;
    }
    void on_expert_matmul_input(const std::string& name, int64_t expert, int64_t n_expert, const float* x,
                                int64_t n_rows, int64_t n_cols) override {
      EXPECT_EQ(n_expert, 8);
      EXPECT_TRUE(std::isfinite(x[n_rows * n_cols - 1]));
      experts.insert(expert);
      rows[name] += n_rows;
      cols[name] = n_cols;
    }
  } seen;
  auto m = load_shape("tiny-qwen2moe", DType::Q8_0);
  const auto& c = m->config();
  ThreadPool pool(2);
  Forward fwd(m, &pool);
  auto kv = KvStorage::create(KvLayout{c.n_layer, c.n_head_kv, c.head_dim, 4, 16, DType::F32});
  ASSERT_TRUE(kv.ok());
  ForwardBatch b;
  for (int i = 0; i < 6; ++i) b.tokens.push_back(i * 41 % 512);
  SeqSlice s;
  s.n_tokens = 6;
  s.block_table = {0, 1};
  s.logits = SeqSlice::Logits::All;
  b.seqs = {s};
  std::vector<float> plain, observed;
  fwd.run(b, *kv, plain);
  fwd.set_activation_observer(&seen);
  fwd.run(b, *kv, observed);
  fwd.set_activation_observer(nullptr);
  EXPECT_EQ(plain, observed);
  for (const char* t : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
    const std::string name = fmt::format("blk.1.{}.weight", t);
    EXPECT_EQ(seen.rows[name], 6 * c.n_expert_used) << name;
    EXPECT_EQ(seen.cols[name], std::string(t) == "ffn_down_exps" ? c.n_ff_exp : c.n_embd) << name;
  }
  EXPECT_EQ(seen.rows["blk.0.ffn_gate_inp.weight"], 6);
  EXPECT_GT(seen.experts.size(), 2u);
}
