// Quantization mixtures: per-tensor types of llama.cpp's recipes, computed by hand for a synthetic
// 8-layer llama (use_more_bits(i, 8) is true for layers 0, 3, 6, 7).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "convert/quant_recipe.h"

namespace tmill {
namespace {

constexpr int kLayers = 8;

std::vector<QuantTensorDesc> llama_tensors(int64_t n_embd = 256, int64_t n_ff = 512, bool tied = false) {
  std::vector<QuantTensorDesc> t;
  t.push_back({"token_embd.weight", {n_embd, 1000}, DType::F16});
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    t.push_back({p + "attn_norm.weight", {n_embd}, DType::F32});
    t.push_back({p + "attn_q.weight", {n_embd, n_embd}, DType::F16});
    t.push_back({p + "attn_k.weight", {n_embd, n_embd / 4}, DType::F16});
    t.push_back({p + "attn_v.weight", {n_embd, n_embd / 4}, DType::F16});
    t.push_back({p + "attn_output.weight", {n_embd, n_embd}, DType::F16});
    t.push_back({p + "ffn_norm.weight", {n_embd}, DType::F32});
    t.push_back({p + "ffn_gate.weight", {n_embd, n_ff}, DType::F16});
    t.push_back({p + "ffn_up.weight", {n_embd, n_ff}, DType::F16});
    t.push_back({p + "ffn_down.weight", {n_ff, n_embd}, DType::F16});
  }
  t.push_back({"output_norm.weight", {n_embd}, DType::F32});
  if (!tied) t.push_back({"output.weight", {n_embd, 1000}, DType::F16});
  return t;
}

QuantModelShape llama_shape(int64_t n_head = 8, int64_t n_head_kv = 2) {
  QuantModelShape s;
  s.arch = "llama";
  s.n_layer = kLayers;
  s.n_head = n_head;
  s.n_head_kv = n_head_kv;
  return s;
}

std::map<std::string, DType> plan(const std::string& recipe, const std::vector<QuantTensorDesc>& t,
                                  const QuantPlanOptions& opt = {}, const QuantModelShape& shape = llama_shape()) {
  auto r = recipe_from_name(recipe);
  EXPECT_TRUE(r.ok()) << recipe;
  auto p = plan_tensor_types(*r, shape, t, opt);
  EXPECT_TRUE(p.ok()) << p.error();
  std::map<std::string, DType> out;
  for (size_t i = 0; i < t.size(); ++i) out[t[i].name] = (*p)[i].target;
  return out;
}

std::string blk(int l, const char* what) { return "blk." + std::to_string(l) + "." + what + ".weight"; }
bool more_bits(int l) { return l == 0 || l == 3 || l == 6 || l == 7; }

TEST(QuantRecipe, NamesAndFileTypeNumbers) {
  struct Case {
    const char* name;
    uint32_t ftype;
    DType def;
  } cases[] = {{"q4_k_m", 15, DType::Q4_K}, {"Q4_K", 15, DType::Q4_K}, {"Q4_K_S", 14, DType::Q4_K},
               {"q5_k_m", 17, DType::Q5_K}, {"Q5_K", 17, DType::Q5_K}, {"Q5_K_S", 16, DType::Q5_K},
               {"Q6_K", 18, DType::Q6_K},   {"q8_0", 7, DType::Q8_0},  {"Q4_0", 2, DType::Q4_0},
               {"Q4_1", 3, DType::Q4_1},    {"Q5_0", 8, DType::Q5_0},  {"Q5_1", 9, DType::Q5_1},
               {"Q3_K", 12, DType::Q3_K},   {"Q3_K_S", 11, DType::Q3_K}, {"Q3_K_L", 13, DType::Q3_K},
               {"Q2_K", 10, DType::Q2_K},   {"Q2_K_S", 21, DType::Q2_K}, {"f16", 1, DType::F16},
               {"BF16", 32, DType::BF16},   {"F32", 0, DType::F32},    {"15", 15, DType::Q4_K},
               {"iq4_nl", 25, DType::IQ4_NL}, {"IQ4_XS", 30, DType::IQ4_XS}, {"30", 30, DType::IQ4_XS},
               {"MXFP4_MOE", 38, DType::MXFP4}, {"mxfp4", 38, DType::MXFP4}, {"38", 38, DType::MXFP4},
               // the lattice i-quant mixes (llama_ftype_get_default_type: IQ2_S's default is IQ2_XS,
               // IQ2_M's IQ2_S, IQ3_XS's and IQ3_M's IQ3_S)
               {"IQ2_XXS", 19, DType::IQ2_XXS}, {"iq2_xs", 20, DType::IQ2_XS}, {"IQ3_XS", 22, DType::IQ3_S},
               {"IQ3_XXS", 23, DType::IQ3_XXS}, {"IQ1_S", 24, DType::IQ1_S}, {"IQ3_S", 26, DType::IQ3_S},
               {"IQ3_M", 27, DType::IQ3_S},     {"IQ2_S", 28, DType::IQ2_XS}, {"IQ2_M", 29, DType::IQ2_S},
               {"IQ1_M", 31, DType::IQ1_M},     {"31", 31, DType::IQ1_M}};
  for (const auto& c : cases) {
    auto r = recipe_from_name(c.name);
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.error();
    EXPECT_EQ(static_cast<uint32_t>(r->ftype), c.ftype) << c.name;
    EXPECT_EQ(r->default_type, c.def) << c.name;
  }
  EXPECT_EQ(recipe_from_name("q4_k")->name, "Q4_K_M");
  auto bad = recipe_from_name("IQ5_XS");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("Q4_K_M"), std::string::npos);  // lists what is supported
  EXPECT_NE(bad.error().find("IQ1_M"), std::string::npos);
  EXPECT_FALSE(recipe_from_name("Q4_K_X").ok());
  EXPECT_FALSE(recipe_from_name("4").ok());  // ftype 4 no longer exists
}

TEST(QuantRecipe, WhichTensorsAreQuantizable) {
  EXPECT_TRUE(tensor_allows_quantization({"blk.0.attn_q.weight", {256, 256}, DType::F16}));
  EXPECT_TRUE(tensor_allows_quantization({"token_embd.weight", {256, 1000}, DType::F16}));
  EXPECT_TRUE(tensor_allows_quantization({"blk.0.ffn_down_exps.weight", {512, 256, 8}, DType::F16}));
  EXPECT_FALSE(tensor_allows_quantization({"blk.0.attn_norm.weight", {256}, DType::F32}));
  EXPECT_FALSE(tensor_allows_quantization({"blk.0.attn_q.bias", {256}, DType::F32}));
  EXPECT_FALSE(tensor_allows_quantization({"blk.0.attn_q.weight", {256, 1}, DType::F32}));  // 1-D in ggml terms
  EXPECT_FALSE(tensor_allows_quantization({"blk.0.ffn_gate_inp.weight", {256, 8}, DType::F32}));
  EXPECT_FALSE(tensor_allows_quantization({"blk.0.attn_k_norm.weight", {64, 2}, DType::F32}));
  EXPECT_FALSE(tensor_allows_quantization({"position_embd.weight", {256, 512}, DType::F32}));
  EXPECT_FALSE(tensor_allows_quantization({"rope_freqs", {256, 2}, DType::F32}));
}

TEST(QuantRecipe, Q4_K_M) {
  const auto t = llama_tensors();
  auto p = plan("Q4_K_M", t);
  EXPECT_EQ(p["token_embd.weight"], DType::Q4_K);
  EXPECT_EQ(p["output.weight"], DType::Q6_K);
  EXPECT_EQ(p["output_norm.weight"], DType::F32);
  for (int l = 0; l < kLayers; ++l) {
    const DType more = more_bits(l) ? DType::Q6_K : DType::Q4_K;
    EXPECT_EQ(p[blk(l, "attn_v")], more) << l;
    EXPECT_EQ(p[blk(l, "ffn_down")], more) << l;
    for (const char* w : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"}) EXPECT_EQ(p[blk(l, w)], DType::Q4_K);
    EXPECT_EQ(p[blk(l, "attn_norm")], DType::F32);
  }
}

TEST(QuantRecipe, Q4_K_SAndQ5Mixes) {
  const auto t = llama_tensors();
  auto s = plan("Q4_K_S", t);
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_EQ(s[blk(l, "attn_v")], l < 4 ? DType::Q5_K : DType::Q4_K) << l;
    EXPECT_EQ(s[blk(l, "ffn_down")], l < 1 ? DType::Q5_K : DType::Q4_K) << l;
    EXPECT_EQ(s[blk(l, "attn_q")], DType::Q4_K);
  }
  EXPECT_EQ(s["output.weight"], DType::Q6_K);
  auto m5 = plan("Q5_K_M", t);
  auto s5 = plan("Q5_K_S", t);
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_EQ(m5[blk(l, "attn_v")], more_bits(l) ? DType::Q6_K : DType::Q5_K);
    EXPECT_EQ(m5[blk(l, "ffn_down")], more_bits(l) ? DType::Q6_K : DType::Q5_K);
    EXPECT_EQ(m5[blk(l, "ffn_up")], DType::Q5_K);
    EXPECT_EQ(s5[blk(l, "attn_v")], DType::Q5_K);
    EXPECT_EQ(s5[blk(l, "ffn_down")], DType::Q5_K);
  }
  EXPECT_EQ(m5["output.weight"], DType::Q6_K);
  EXPECT_EQ(s5["token_embd.weight"], DType::Q5_K);
}

TEST(QuantRecipe, IQ4Mixes) {
  // llama.cpp: attn_v Q5_K when n_gqa >= 4 (here 8 / 2), the first n_layer/8 ffn_down Q5_K unless an
  // imatrix is given, output Q6_K; everything else the default type.
  const auto t = llama_tensors();
  for (const char* name : {"IQ4_NL", "IQ4_XS"}) {
    const DType def = std::string(name) == "IQ4_NL" ? DType::IQ4_NL : DType::IQ4_XS;
    auto p = plan(name, t);
    QuantPlanOptions imat;
    imat.has_imatrix = true;
    auto pi = plan(name, t, imat);
    auto no_gqa = plan(name, t, {}, llama_shape(8, 8));
    EXPECT_EQ(p["output.weight"], DType::Q6_K) << name;
    EXPECT_EQ(p["token_embd.weight"], def) << name;
    for (int l = 0; l < kLayers; ++l) {
      EXPECT_EQ(p[blk(l, "attn_v")], DType::Q5_K) << name << " " << l;
      EXPECT_EQ(no_gqa[blk(l, "attn_v")], def) << name << " " << l;
      EXPECT_EQ(p[blk(l, "ffn_down")], l < 1 ? DType::Q5_K : def) << name << " " << l;
      EXPECT_EQ(pi[blk(l, "ffn_down")], def) << name << " " << l;
      for (const char* w : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"}) EXPECT_EQ(p[blk(l, w)], def);
    }
  }
  // IQ4_XS rows that are not a multiple of 256 fall back to IQ4_NL (llama.cpp's table).
  auto f = plan("IQ4_XS", llama_tensors(96, 512), {}, llama_shape(8, 8));
  EXPECT_EQ(f[blk(0, "attn_q")], DType::IQ4_NL);
  EXPECT_EQ(f[blk(1, "ffn_down")], DType::IQ4_XS);  // 512 columns
}

TEST(QuantRecipe, MXFP4_MOEGivesExpertsMXFP4AndTheRestQ8_0) {
  // llama.cpp's MXFP4_MOE: tensors with more than one expert (ne[2] > 1) MXFP4, every other matrix
  // (attention, a dense FFN, the embedding, the output) Q8_0; --pure puts everything in MXFP4.
  auto t = llama_tensors();
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    t.push_back({p + "ffn_gate_exps.weight", {256, 512, 4}, DType::F16});
    t.push_back({p + "ffn_down_exps.weight", {512, 256, 4}, DType::F16});
    t.push_back({p + "ffn_gate_inp.weight", {256, 4}, DType::F32});
    t.push_back({p + "ffn_one_exps.weight", {256, 512, 1}, DType::F16});  // a single expert: not MoE
  }
  QuantModelShape shape = llama_shape();
  shape.n_expert = 4;
  auto p = plan("MXFP4_MOE", t, {}, shape);
  EXPECT_EQ(p["output.weight"], DType::Q8_0);
  EXPECT_EQ(p["token_embd.weight"], DType::Q8_0);
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_EQ(p[blk(l, "ffn_gate_exps")], DType::MXFP4) << l;
    EXPECT_EQ(p[blk(l, "ffn_down_exps")], DType::MXFP4) << l;
    EXPECT_EQ(p[blk(l, "ffn_gate_inp")], DType::F32) << l;  // never quantized
    EXPECT_EQ(p[blk(l, "ffn_one_exps")], DType::Q8_0) << l;
    for (const char* w : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
      EXPECT_EQ(p[blk(l, w)], DType::Q8_0) << l << " " << w;
  }
  QuantPlanOptions o;
  o.output_tensor_type = DType::Q6_K;
  EXPECT_EQ(plan("MXFP4_MOE", t, o, shape)["output.weight"], DType::Q6_K);
  QuantPlanOptions pure;
  pure.pure = true;
  auto pp = plan("MXFP4_MOE", t, pure, shape);
  EXPECT_EQ(pp[blk(0, "attn_q")], DType::MXFP4);
  EXPECT_EQ(pp["output.weight"], DType::MXFP4);
}

TEST(QuantRecipe, Q3AndQ2Mixes) {
  const auto t = llama_tensors();
  auto m = plan("Q3_K_M", t);
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_EQ(m[blk(l, "attn_v")], l < 2 ? DType::Q5_K : DType::Q4_K) << l;
    EXPECT_EQ(m[blk(l, "ffn_down")], DType::Q4_K) << l;  // n_layer/16 == 0 layers get Q5_K
    EXPECT_EQ(m[blk(l, "attn_output")], DType::Q4_K);
    EXPECT_EQ(m[blk(l, "attn_q")], DType::Q3_K);
  }
  auto L = plan("Q3_K_L", t);
  EXPECT_EQ(L[blk(5, "attn_v")], DType::Q5_K);
  EXPECT_EQ(L[blk(5, "ffn_down")], DType::Q5_K);
  EXPECT_EQ(L[blk(5, "attn_output")], DType::Q5_K);
  EXPECT_EQ(L[blk(5, "ffn_up")], DType::Q3_K);
  auto S = plan("Q3_K_S", t);
  EXPECT_EQ(S[blk(0, "attn_v")], DType::Q3_K);
  EXPECT_EQ(S["output.weight"], DType::Q6_K);
  // Q2_K: attn_v Q3_K with GQA 4 -> Q4_K; ffn_down and attn_output Q3_K.
  auto q2 = plan("Q2_K", t, {}, llama_shape(8, 8));
  EXPECT_EQ(q2[blk(3, "attn_v")], DType::Q3_K);
  EXPECT_EQ(q2[blk(3, "ffn_down")], DType::Q3_K);
  EXPECT_EQ(q2[blk(3, "attn_output")], DType::Q3_K);
  EXPECT_EQ(q2[blk(3, "ffn_gate")], DType::Q2_K);
  auto q2gqa = plan("Q2_K", t, {}, llama_shape(8, 2));
  EXPECT_EQ(q2gqa[blk(3, "attn_v")], DType::Q4_K);
}

TEST(QuantRecipe, SingleTypeRecipesAndOutputHandling) {
  const auto t = llama_tensors();
  auto q8 = plan("Q8_0", t);
  EXPECT_EQ(q8["output.weight"], DType::Q8_0);
  EXPECT_EQ(q8[blk(0, "attn_v")], DType::Q8_0);
  // Q4_0 ("default mix"): output.weight goes to Q6_K when its rows fit 256-blocks.
  auto q4 = plan("Q4_0", t);
  EXPECT_EQ(q4["output.weight"], DType::Q6_K);
  EXPECT_EQ(q4["token_embd.weight"], DType::Q4_0);
  EXPECT_EQ(q4[blk(0, "ffn_down")], DType::Q4_0);
  auto q6 = plan("Q6_K", t);
  EXPECT_EQ(q6[blk(4, "ffn_up")], DType::Q6_K);
  auto f16 = plan("F16", t);
  EXPECT_EQ(f16["output.weight"], DType::F16);
  EXPECT_EQ(f16[blk(4, "attn_norm")], DType::F32);
  auto bf = plan("BF16", t);
  EXPECT_EQ(bf[blk(4, "attn_v")], DType::BF16);
}

TEST(QuantRecipe, TiedEmbeddingsTakeTheOutputType) {
  auto p = plan("Q4_K_M", llama_tensors(256, 512, /*tied=*/true));
  EXPECT_EQ(p["token_embd.weight"], DType::Q6_K);
  // Rows of 896 (Qwen2.5-0.5B) do not fit 256-blocks: the output-type rule picks Q8_0, and every
  // other Q4_K matrix falls back to Q5_0.
  auto q = plan("Q4_K_M", llama_tensors(896, 4864, true));
  EXPECT_EQ(q["token_embd.weight"], DType::Q8_0);
  EXPECT_EQ(q[blk(1, "attn_q")], DType::Q5_0);
  EXPECT_EQ(q[blk(0, "attn_v")], DType::Q8_0);    // Q6_K -> Q8_0 fallback
  EXPECT_EQ(q[blk(1, "ffn_down")], DType::Q4_K);  // 4864 = 19 * 256
  EXPECT_EQ(q[blk(0, "ffn_down")], DType::Q6_K);
}

TEST(QuantRecipe, PureAndOverrides) {
  const auto t = llama_tensors();
  QuantPlanOptions pure;
  pure.pure = true;
  auto p = plan("Q4_K_M", t, pure);
  for (const auto& d : t) {
    if (tensor_allows_quantization(d)) {
      EXPECT_EQ(p[d.name], DType::Q4_K) << d.name;
    }
  }
  QuantPlanOptions ov;
  ov.output_tensor_type = DType::F16;
  ov.token_embedding_type = DType::Q8_0;
  auto o = plan("Q4_K_M", t, ov);
  EXPECT_EQ(o["output.weight"], DType::F16);
  EXPECT_EQ(o["token_embd.weight"], DType::Q8_0);
  EXPECT_EQ(o[blk(0, "attn_v")], DType::Q6_K);
  QuantPlanOptions leave;
  leave.leave_output_tensor = true;
  auto lv = plan("Q4_K_M", t, leave);
  EXPECT_EQ(lv["output.weight"], DType::F16);  // unchanged input type
}

TEST(QuantRecipe, FallbacksAreReported) {
  std::vector<QuantTensorDesc> t = {{"blk.0.attn_q.weight", {96, 64}, DType::F32},
                               {"blk.0.attn_v.weight", {96, 64}, DType::F32},
                               {"blk.0.ffn_up.weight", {40, 64}, DType::F32},
                               {"blk.0.ffn_gate.weight", {300, 64}, DType::F32}};
  QuantModelShape s = llama_shape();
  s.n_layer = 1;
  auto r = plan_tensor_types(*recipe_from_name("Q4_K_M"), s, t, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].target, DType::Q5_0);
  EXPECT_NE((*r)[0].note.find("Q5_0"), std::string::npos);
  EXPECT_EQ((*r)[1].target, DType::Q8_0);  // layer 0 of 1 gets Q6_K -> Q8_0
  EXPECT_EQ((*r)[2].target, DType::F16);   // 40 fits no block
  EXPECT_EQ((*r)[3].target, DType::F16);   // 300 is not a multiple of 32 either
  auto q8 = plan_tensor_types(*recipe_from_name("Q8_0"), s, t, {});
  EXPECT_EQ((*q8)[0].target, DType::Q8_0);
  EXPECT_TRUE((*q8)[0].note.empty());
  EXPECT_EQ((*q8)[2].target, DType::F16);
}

TEST(QuantRecipe, LayerChoicesDoNotDependOnFileOrder) {
  auto t = llama_tensors();
  const auto ref = plan("Q4_K_M", t);
  std::mt19937 rng(1);
  std::shuffle(t.begin(), t.end(), rng);
  EXPECT_EQ(plan("Q4_K_M", t), ref);
  EXPECT_EQ(plan("Q3_K_M", t), plan("Q3_K_M", llama_tensors()));
}

TEST(QuantRecipe, ImatrixAndExpertRules) {
  const auto t = llama_tensors();
  QuantPlanOptions im;
  im.has_imatrix = true;
  auto q4 = plan("Q4_0", t, im);
  EXPECT_EQ(q4[blk(0, "ffn_down")], DType::Q4_1);  // first n_layer/8 layers
  EXPECT_EQ(q4[blk(1, "ffn_down")], DType::Q4_0);
  EXPECT_EQ(plan("Q5_0", t, im)[blk(0, "ffn_down")], DType::Q5_1);
  EXPECT_EQ(plan("Q4_0", t)[blk(0, "ffn_down")], DType::Q4_0);

  QuantModelShape moe = llama_shape();
  moe.n_expert = 8;
  std::vector<QuantTensorDesc> e = {{"blk.0.attn_v.weight", {256, 64}, DType::F16},
                               {"blk.0.attn_k.weight", {256, 64}, DType::F16},
                               {"blk.0.attn_output.weight", {256, 256}, DType::F16},
                               {"blk.7.ffn_down_exps.weight", {512, 256, 8}, DType::F16},
                               {"blk.1.ffn_down_exps.weight", {512, 256, 8}, DType::F16}};
  auto m = plan("Q4_K_M", e, {}, moe);
  EXPECT_EQ(m["blk.0.attn_v.weight"], DType::Q8_0);
  EXPECT_EQ(m["blk.0.attn_k.weight"], DType::Q8_0);
  EXPECT_EQ(m["blk.0.attn_output.weight"], DType::Q5_K);
  EXPECT_EQ(m["blk.7.ffn_down_exps.weight"], DType::Q6_K);  // layer parsed from the name
  EXPECT_EQ(m["blk.1.ffn_down_exps.weight"], DType::Q4_K);

  // Q2_K_S needs an importance matrix.
  EXPECT_FALSE(plan_tensor_types(*recipe_from_name("Q2_K_S"), llama_shape(), t, {}).ok());
  EXPECT_TRUE(plan_tensor_types(*recipe_from_name("Q2_K_S"), llama_shape(), t, im).ok());
}

// The 1-3 bit i-quant mixes (llama_tensor_get_type_impl's branches for them), on the 8-layer llama:
// ffn_down's first n_layer / 8 = 1 layer gets more bits; with n_gqa >= 4 attn_v gets Q4_K.
TEST(QuantRecipe, IQ2AndIQ1Mixes) {
  const auto t = llama_tensors();
  QuantPlanOptions im;
  im.has_imatrix = true;
  const QuantModelShape mha = llama_shape(8, 8), gqa = llama_shape(8, 2);
  struct Case {
    const char* recipe;
    const QuantModelShape* shape;
    DType def, embd, attn_v, down0, attn_out;
  } cases[] = {
      {"IQ2_XXS", &mha, DType::IQ2_XXS, DType::Q2_K, DType::Q2_K, DType::Q2_K, DType::IQ2_XXS},
      {"IQ2_XS", &gqa, DType::IQ2_XS, DType::Q2_K, DType::Q4_K, DType::Q2_K, DType::IQ2_XS},
      {"IQ1_S", &mha, DType::IQ1_S, DType::Q2_K, DType::Q2_K, DType::Q2_K, DType::IQ2_XXS},
      {"IQ1_M", &gqa, DType::IQ1_M, DType::Q2_K, DType::Q4_K, DType::Q2_K, DType::IQ2_XXS},
      {"IQ2_S", &mha, DType::IQ2_XS, DType::IQ3_S, DType::IQ3_S, DType::IQ3_S, DType::IQ3_S},
      {"IQ2_M", &mha, DType::IQ2_S, DType::IQ3_S, DType::IQ3_S, DType::IQ3_S, DType::IQ3_S},
  };
  for (const Case& c : cases) {
    auto p = plan(c.recipe, t, im, *c.shape);
    EXPECT_EQ(p["token_embd.weight"], c.embd) << c.recipe;
    EXPECT_EQ(p["output.weight"], DType::Q5_K) << c.recipe;
    for (int l = 0; l < kLayers; ++l) {
      EXPECT_EQ(p[blk(l, "attn_v")], c.attn_v) << c.recipe << " " << l;
      EXPECT_EQ(p[blk(l, "ffn_down")], l == 0 ? c.down0 : c.def) << c.recipe << " " << l;
      EXPECT_EQ(p[blk(l, "attn_output")], c.attn_out) << c.recipe << " " << l;
      for (const char* w : {"attn_q", "attn_k", "ffn_gate", "ffn_up"}) EXPECT_EQ(p[blk(l, w)], c.def) << c.recipe << w;
    }
    // Without an imatrix llama-quantize refuses these, and so do we, saying how to make one.
    auto r = plan_tensor_types(*recipe_from_name(c.recipe), *c.shape, t, {});
    ASSERT_FALSE(r.ok()) << c.recipe;
    EXPECT_NE(r.error().find("needs an importance matrix"), std::string::npos) << r.error();
    EXPECT_NE(r.error().find("tokenmill eval imatrix"), std::string::npos) << r.error();
  }
  auto tied = plan("IQ2_XXS", llama_tensors(256, 512, true), im, mha);
  EXPECT_EQ(tied["token_embd.weight"], DType::Q5_K);  // the output's rule

  // MoE: 4+ experts give attn_v Q4_K even without GQA; 8 experts also attn_k Q4_K, attn_output Q5_K.
  const std::vector<QuantTensorDesc> e = {{"blk.0.attn_v.weight", {256, 256}, DType::F16},
                                          {"blk.0.attn_k.weight", {256, 256}, DType::F16},
                                          {"blk.0.attn_output.weight", {256, 256}, DType::F16},
                                          {"blk.0.ffn_up_exps.weight", {256, 512, 8}, DType::F16}};
  QuantModelShape moe = mha;
  for (int n_expert : {4, 8}) {
    moe.n_expert = n_expert;
    auto p = plan("IQ1_S", e, im, moe);
    EXPECT_EQ(p["blk.0.attn_v.weight"], DType::Q4_K) << n_expert;
    EXPECT_EQ(p["blk.0.attn_k.weight"], n_expert == 8 ? DType::Q4_K : DType::IQ1_S) << n_expert;
    EXPECT_EQ(p["blk.0.attn_output.weight"], n_expert == 8 ? DType::Q5_K : DType::IQ2_XXS) << n_expert;
    EXPECT_EQ(p["blk.0.ffn_up_exps.weight"], DType::IQ1_S) << n_expert;
  }
  auto x8 = plan("IQ3_XXS", e, im, moe);  // 8 experts: the general rules
  EXPECT_EQ(x8["blk.0.attn_v.weight"], DType::Q8_0);
  EXPECT_EQ(x8["blk.0.attn_k.weight"], DType::Q8_0);
  EXPECT_EQ(x8["blk.0.attn_output.weight"], DType::Q5_K);
}

TEST(QuantRecipe, IQ3Mixes) {
  const auto t = llama_tensors();
  QuantPlanOptions im;
  im.has_imatrix = true;
  const QuantModelShape mha = llama_shape(8, 8), gqa = llama_shape(8, 2);
  auto xxs = plan("IQ3_XXS", t, im, mha);
  EXPECT_EQ(xxs["token_embd.weight"], DType::IQ3_S);
  EXPECT_EQ(xxs["output.weight"], DType::Q5_K);
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_EQ(xxs[blk(l, "attn_v")], DType::IQ3_XXS) << l;  // IQ3_S without an imatrix
    EXPECT_EQ(xxs[blk(l, "attn_q")], DType::IQ2_S) << l;
    EXPECT_EQ(xxs[blk(l, "attn_k")], DType::IQ2_S) << l;
    EXPECT_EQ(xxs[blk(l, "attn_output")], DType::IQ3_S) << l;
    for (const char* w : {"ffn_gate", "ffn_up", "ffn_down"}) EXPECT_EQ(xxs[blk(l, w)], DType::IQ3_XXS) << l << w;
  }
  EXPECT_EQ(plan("IQ3_XXS", t, im, gqa)[blk(3, "attn_v")], DType::Q4_K);
  EXPECT_FALSE(plan_tensor_types(*recipe_from_name("IQ3_XXS"), mha, t, {}).ok());  // IQ2_S / IQ3_XXS tensors

  auto xs = plan("IQ3_XS", t, im, mha);
  EXPECT_EQ(xs["token_embd.weight"], DType::IQ3_S);
  EXPECT_EQ(xs["output.weight"], DType::Q6_K);
  for (int l = 0; l < kLayers; ++l) {
    const DType mid = l >= 1 && l < 7 ? DType::IQ3_XXS : DType::IQ3_S;  // n_layer/8 <= l < 7 n_layer/8
    EXPECT_EQ(xs[blk(l, "ffn_gate")], mid) << l;
    EXPECT_EQ(xs[blk(l, "ffn_up")], mid) << l;
    EXPECT_EQ(xs[blk(l, "attn_q")], DType::IQ3_XXS) << l;
    EXPECT_EQ(xs[blk(l, "attn_k")], DType::IQ3_XXS) << l;
    for (const char* w : {"attn_v", "attn_output", "ffn_down"}) EXPECT_EQ(xs[blk(l, w)], DType::IQ3_S) << l << w;
  }

  auto s = plan("IQ3_S", t, {}, gqa);  // no imatrix needed
  EXPECT_EQ(s["output.weight"], DType::Q6_K);
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_EQ(s[blk(l, "attn_v")], DType::Q4_K) << l;
    for (const char* w : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
      EXPECT_EQ(s[blk(l, w)], DType::IQ3_S) << l << w;
  }
  auto m = plan("IQ3_M", t, {}, mha);
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_EQ(m[blk(l, "attn_v")], DType::Q4_K) << l;
    EXPECT_EQ(m[blk(l, "attn_output")], DType::Q4_K) << l;
    EXPECT_EQ(m[blk(l, "ffn_down")], l == 0 ? DType::Q4_K : DType::IQ3_S) << l;
    EXPECT_EQ(m[blk(l, "ffn_up")], DType::IQ3_S) << l;
  }
}

TEST(QuantRecipe, ImatrixRequirement) {
  const auto ft = LlamaFileType::MOSTLY_IQ2_XXS;
  for (DType d : {DType::IQ1_S, DType::IQ1_M, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS})
    EXPECT_TRUE(tensor_requires_imatrix("blk.0.ffn_up.weight", d, ft)) << dtype_name(d);
  for (DType d : {DType::IQ3_S, DType::IQ4_XS, DType::Q2_K, DType::Q4_K})
    EXPECT_FALSE(tensor_requires_imatrix("blk.0.ffn_up.weight", d, ft)) << dtype_name(d);
  EXPECT_TRUE(tensor_requires_imatrix("blk.0.ffn_up.weight", DType::Q2_K, LlamaFileType::MOSTLY_Q2_K_S));
  for (const char* n : {"token_embd.weight", "per_layer_token_embd.weight", "output.weight"})
    EXPECT_FALSE(tensor_requires_imatrix(n, DType::IQ2_XXS, ft)) << n;
  // --pure too: every matrix gets the default type, which needs the imatrix.
  QuantPlanOptions pure;
  pure.pure = true;
  EXPECT_FALSE(plan_tensor_types(*recipe_from_name("IQ2_XXS"), llama_shape(), llama_tensors(), pure).ok());
  pure.has_imatrix = true;
  EXPECT_TRUE(plan_tensor_types(*recipe_from_name("IQ2_XXS"), llama_shape(), llama_tensors(), pure).ok());
}

}  // namespace
}  // namespace tmill
