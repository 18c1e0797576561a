// Gemma 1, Granite, SmolLM3, OLMo 2, OLMo 3, EXAONE 4.0, GLM-4, Granite MoE, Ministral 3 and GLM-4.5
// Hugging Face folders convert as llama.cpp's converters do: the tiny dummy of each family (tokenmill dummy, F32)
// written back as an HF folder (HF names, q/k rows of the llama-RoPE families in HF's rotate-half
// order, Gemma's norms stored as w for 1 + w, config.json with the family's fields) converts to the same
// tensors byte for byte, the same hyper-parameters and the same logits. Fields the GGUF family cannot
// express are refused naming them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "convert/dummy.h"
#include "convert/hf_model.h"
#include "formats/gguf.h"
#include "hf_folder.h"
#include "round_trip.h"
#include "model/model.h"
#include "model/reference.h"

using namespace tmill;
using namespace tmill::test;
using nlohmann::json;

namespace {

bool permuted(const std::string& arch) {
  return arch == "granite" || arch == "granitemoe" || arch == "smollm3" || arch == "mistral3";
}

// GGUF name -> HF name for the family.
std::string hf_name_of(const std::string& gg, const std::string& arch) {
  if (gg == "token_embd.weight") return "model.embed_tokens.weight";
  if (gg == "output_norm.weight") return "model.norm.weight";
  if (gg == "output.weight") return "lm_head.weight";
  if (gg == "token_embd_norm.weight") return "model.embedding_norm.weight";  // lfm2's final norm
  static const std::map<std::string, std::string> sub = {
      {"attn_norm", "input_layernorm"},         {"ffn_norm", "post_attention_layernorm"},
      {"post_attention_norm", "post_attention_layernorm"}, {"post_ffw_norm", "post_feedforward_layernorm"},
      {"attn_q", "self_attn.q_proj"},           {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},           {"attn_output", "self_attn.o_proj"},
      {"attn_q_norm", "self_attn.q_norm"},      {"attn_k_norm", "self_attn.k_norm"},
      {"ffn_gate", "mlp.gate_proj"},            {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"}};
  // glm4: its own names for the sandwich norms, gate/up fused
  static const std::map<std::string, std::string> glm4 = {{"post_attention_norm", "post_self_attn_layernorm"},
                                                          {"post_ffw_norm", "post_mlp_layernorm"},
                                                          {"ffn_up", "mlp.gate_up_proj"}};
  // glm4moe: the router, the ungated shared experts (the selection bias and the experts: hf_tensors_of)
  static const std::map<std::string, std::string> glm4moe = {{"ffn_gate_inp", "mlp.gate"},
                                                             {"ffn_gate_shexp", "mlp.shared_experts.gate_proj"},
                                                             {"ffn_up_shexp", "mlp.shared_experts.up_proj"},
                                                             {"ffn_down_shexp", "mlp.shared_experts.down_proj"}};
  // deepseek2: the latent attention's projections (attn_k_b / attn_v_b: merged into kv_b_proj by hf_tensors_of)
  static const std::map<std::string, std::string> deepseek2 = {
      {"attn_q_a", "self_attn.q_a_proj"},           {"attn_q_a_norm", "self_attn.q_a_layernorm"},
      {"attn_q_b", "self_attn.q_b_proj"},           {"attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa"},
      {"attn_kv_a_norm", "self_attn.kv_a_layernorm"}};
  // minimax-m2: its block_sparse_moe names (the experts and the selection bias: hf_tensors_of)
  static const std::map<std::string, std::string> minimax = {{"ffn_gate_inp", "block_sparse_moe.gate"}};
  // lfm2: its own names (the convolution's kernel gets its unit axis back in hf_tensors_of)
  static const std::map<std::string, std::string> lfm2 = {
      {"attn_norm", "operator_norm"},           {"ffn_norm", "ffn_norm"},
      {"attn_output", "self_attn.out_proj"},    {"attn_q_norm", "self_attn.q_layernorm"},
      {"attn_k_norm", "self_attn.k_layernorm"}, {"ffn_gate", "feed_forward.w1"},
      {"ffn_up", "feed_forward.w3"},            {"ffn_down", "feed_forward.w2"},
      {"shortconv.in_proj", "conv.in_proj"},    {"shortconv.out_proj", "conv.out_proj"},
      {"shortconv.conv", "conv.conv"}};
  // granitemoe: the router (the experts are merged by hf_tensors_of)
  static const std::map<std::string, std::string> granitemoe = {{"ffn_gate_inp", "block_sparse_moe.router.layer"},
                                                                {"ffn_down_exps", "block_sparse_moe.output_linear"}};
  const size_t dot1 = gg.find('.'), dot2 = gg.find('.', dot1 + 1), last = gg.rfind('.');
  const std::string layer = gg.substr(dot1 + 1, dot2 - dot1 - 1), kind = gg.substr(dot2 + 1, last - dot2 - 1);
  const std::string& hf = arch == "glm4" && glm4.count(kind)                 ? glm4.at(kind)
                          : arch == "granitemoe" && granitemoe.count(kind) ? granitemoe.at(kind)
                          : (arch == "glm4moe" || arch == "deepseek2") && glm4moe.count(kind) ? glm4moe.at(kind)
                          : arch == "deepseek2" && deepseek2.count(kind)   ? deepseek2.at(kind)
                          : arch == "minimax-m2" && minimax.count(kind)    ? minimax.at(kind)
                          : arch == "lfm2" && lfm2.count(kind)             ? lfm2.at(kind)
                                                                           : sub.at(kind);
  return "model.layers." + layer + "." + hf + gg.substr(last);  // .weight or .bias
}

json config_of(const ModelShape& s) {
  static const std::map<std::string, std::string> hf = {{"gemma", "GemmaForCausalLM"},
                                                        {"granite", "GraniteForCausalLM"},
                                                        {"smollm3", "SmolLM3ForCausalLM"},
                                                        {"olmo2", "Olmo2ForCausalLM"},
                                                        {"exaone4", "Exaone4ForCausalLM"},
                                                        {"glm4", "Glm4ForCausalLM"},
                                                        {"granitemoe", "GraniteMoeForCausalLM"},
                                                        {"mistral3", "Ministral3ForCausalLM"},
                                                        {"glm4moe", "Glm4MoeForCausalLM"},
                                                        {"deepseek2", s.mla_q_rank > 0 ? "DeepseekV3ForCausalLM"
                                                                                       : "DeepseekV2ForCausalLM"},
                                                        {"minimax-m2", "MiniMaxM2ForCausalLM"},
                                                        {"seed_oss", "SeedOssForCausalLM"},
                                                        {"lfm2", "Lfm2ForCausalLM"}};
  json cfg = {{"architectures", {hf.at(s.arch)}},
              {"hidden_size", s.n_embd},
              {"intermediate_size", s.n_ff},
              {"num_hidden_layers", s.n_layer},
              {"num_attention_heads", s.n_head},
              {"num_key_value_heads", s.n_head_kv},
              {"vocab_size", s.n_vocab},
              {"max_position_embeddings", s.n_ctx},
              {"rms_norm_eps", static_cast<double>(s.rms_eps)},
              {"rope_theta", static_cast<double>(s.rope_theta)},
              {"tie_word_embeddings", s.tied},
              {"torch_dtype", "float32"}};
  if (s.arch == "gemma") {
    cfg["head_dim"] = s.head_dim;
    cfg["hidden_act"] = "gelu";
  }
  if (s.n_expert > 0) {
    cfg["num_local_experts"] = s.n_expert;
    cfg["num_experts_per_tok"] = s.n_expert_used;
  }
  if (s.arch == "granite" || s.arch == "granitemoe") {
    cfg["embedding_multiplier"] = s.embd_scale;
    cfg["residual_multiplier"] = s.residual_scale;
    cfg["attention_multiplier"] = s.attn_scale;
    cfg["logits_scaling"] = s.logit_scale;
  }
  if (s.arch == "smollm3") {
    json nr = json::array();
    for (int64_t i = 0; i < s.n_layer; ++i) nr.push_back((i + 1) % 4 != 0 ? 1 : 0);
    cfg["no_rope_layers"] = nr;
    cfg["no_rope_layer_interval"] = 4;
  }
  if (s.arch == "mistral3") {  // transformers 5's rope_parameters, as Ministral 3 ships them
    cfg["head_dim"] = s.head_dim;
    cfg.erase("rope_theta");
    cfg["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", s.rope_theta}, {"factor", s.rope_factor},
                              {"original_max_position_embeddings", s.rope_orig_ctx}, {"beta_fast", s.yarn_beta_fast},
                              {"beta_slow", s.yarn_beta_slow}, {"mscale_all_dim", s.yarn_log_mul},
                              {"llama_4_scaling_beta", s.attn_temp_scale}};
  }
  if (s.arch == "glm4" || s.arch == "glm4moe") {
    cfg["partial_rotary_factor"] = static_cast<double>(s.n_rot) / static_cast<double>(s.head_dim);
    cfg["attention_bias"] = true;
  }
  if (s.arch == "glm4moe") {  // GLM-4.5's config.json fields, with its NextN layer (num_nextn_predict_layers)
    cfg.erase("num_local_experts");
    cfg["n_routed_experts"] = s.n_expert;
    cfg["moe_intermediate_size"] = s.n_ff_exp;
    cfg["n_shared_experts"] = s.n_expert_shared;
    cfg["first_k_dense_replace"] = s.n_dense_lead;
    cfg["routed_scaling_factor"] = s.expert_weights_scale;
    cfg["norm_topk_prob"] = true;
    cfg["use_qk_norm"] = s.qk_norm;
    cfg["n_group"] = 1;
    cfg["topk_group"] = 1;
    cfg["num_nextn_predict_layers"] = 1;
  }
  if (s.arch == "deepseek2") {  // DeepSeek-V2-Lite's / V3's config.json fields
    cfg.erase("num_local_experts");
    cfg["num_key_value_heads"] = s.n_head;  // (MLA: the file gets one KV head whatever this says)
    cfg["n_routed_experts"] = s.n_expert;
    cfg["moe_intermediate_size"] = s.n_ff_exp;
    cfg["n_shared_experts"] = s.n_expert_shared;
    cfg["first_k_dense_replace"] = s.n_dense_lead;
    cfg["routed_scaling_factor"] = s.expert_weights_scale;
    cfg["norm_topk_prob"] = s.sigmoid_gating;
    cfg["scoring_func"] = s.sigmoid_gating ? "sigmoid" : "softmax";
    cfg["topk_method"] = s.sigmoid_gating ? "noaux_tc" : "greedy";
    if (s.n_expert_groups > 1) {
      cfg["n_group"] = s.n_expert_groups;
      cfg["topk_group"] = s.n_groups_used;
    }
    cfg["kv_lora_rank"] = s.mla_kv_rank;
    cfg["q_lora_rank"] = s.mla_q_rank > 0 ? json(s.mla_q_rank) : json(nullptr);
    cfg["qk_nope_head_dim"] = s.mla_nope;
    cfg["qk_rope_head_dim"] = s.n_rot;
    cfg["v_head_dim"] = s.mla_v;
    cfg["moe_layer_freq"] = 1;
    cfg["num_nextn_predict_layers"] = 1;
    if (!s.rope_scaling.empty())
      cfg["rope_scaling"] = {{"type", "yarn"}, {"factor", s.rope_factor}, {"original_max_position_embeddings", s.rope_orig_ctx},
                             {"mscale", s.yarn_log_mul / 0.1}, {"mscale_all_dim", s.yarn_log_mul / 0.1}};
  }
  if (s.arch == "minimax-m2") {  // MiniMax-M2's config.json fields
    cfg["head_dim"] = s.head_dim;
    cfg["rotary_dim"] = s.n_rot;
    cfg["scoring_func"] = "sigmoid";
    cfg["use_qk_norm"] = true;
    cfg["qk_norm_type"] = "per_layer";
  }
  if (s.arch == "seed_oss") {
    cfg["head_dim"] = s.head_dim;
    cfg["attention_bias"] = true;
    cfg["attention_out_bias"] = false;
  }
  if (s.arch == "lfm2") {  // LFM2-1.2B's config.json names: block_ff_dim adjusted to 2/3 (240 -> 160), norm_eps,
                           // theta, tie_embedding, layer_types
    for (const char* k : {"intermediate_size", "rms_norm_eps", "rope_theta", "tie_word_embeddings"}) cfg.erase(k);
    cfg["block_ff_dim"] = s.n_ff * 3 / 2;
    cfg["block_auto_adjust_ff_dim"] = true;
    cfg["block_ffn_dim_multiplier"] = 1.0;
    cfg["block_multiple_of"] = 32;
    cfg["norm_eps"] = static_cast<double>(s.rms_eps);
    cfg["theta"] = static_cast<double>(s.rope_theta);
    cfg["tie_embedding"] = s.tied;
    cfg["conv_L_cache"] = s.conv_l > 0 ? s.conv_l : 3;
    cfg["conv_bias"] = false;
    json lt = json::array();
    for (int64_t i = 0; i < s.n_layer; ++i)
      lt.push_back(std::count(s.attn_layers.begin(), s.attn_layers.end(), i) ? "full_attention" : "conv");
    cfg["layer_types"] = lt;
  }
  if (s.arch == "exaone4" && s.n_swa > 0) {  // the 32B's pattern, as its config.json spells it
    cfg["sliding_window"] = s.n_swa;
    cfg["sliding_window_pattern"] = "LLLG";
  }
  if (s.arch == "olmo2" && s.n_swa > 0) {  // OLMo 3
    cfg["architectures"] = {"Olmo3ForCausalLM"};
    cfg["sliding_window"] = s.n_swa;
    json lt = json::array();
    for (int64_t i = 0; i < s.n_layer; ++i) lt.push_back((i + 1) % 4 != 0 ? "sliding_attention" : "full_attention");
    cfg["layer_types"] = lt;
    cfg["rope_scaling"] = {{"rope_type", s.rope_scaling}, {"factor", s.rope_factor},
                           {"original_max_position_embeddings", s.rope_orig_ctx}};
  }
  return cfg;
}

// The dummy's tensors under their HF names: Gemma's norms as w (the GGUF holds 1 + w), the llama-RoPE
// families' q/k rows back in HF's order, granitemoe's gate and up experts stacked into input_linear.
HfTensors hf_tensors_of(const GgufFile& g, const ModelShape& s) {
  HfTensors t;
  for (const GgufTensorInfo& gt : g.tensors()) {
    EXPECT_EQ(gt.type, DType::F32) << gt.name;
    std::vector<float> v = f32_values_of(gt);
    if (gt.name.ends_with("attn_k_b.weight")) {  // [heads][kv_rank][nope] and v_b [heads][v][kv_rank] -> kv_b_proj
      const GgufTensorInfo* vb = g.find_tensor(gt.name.substr(0, gt.name.size() - 15) + "attn_v_b.weight");
      EXPECT_NE(vb, nullptr);
      const std::vector<float> vv = f32_values_of(*vb);
      const int64_t N = gt.ne[0], R = gt.ne[1], NH = gt.ne[2], V = vb->ne[1];
      std::vector<float> kvb(static_cast<size_t>(NH * (N + V) * R));
      for (int64_t h = 0; h < NH; ++h) {
        for (int64_t j = 0; j < N; ++j)
          for (int64_t r = 0; r < R; ++r) kvb[(h * (N + V) + j) * R + r] = v[(h * R + r) * N + j];
        for (int64_t i = 0; i < V; ++i)
          for (int64_t r = 0; r < R; ++r) kvb[(h * (N + V) + N + i) * R + r] = vv[(h * V + i) * R + r];
      }
      const std::string layer = gt.name.substr(4, gt.name.find('.', 4) - 4);
      t["model.layers." + layer + ".self_attn.kv_b_proj.weight"] = {{NH * (N + V), R}, kvb};
      continue;
    }
    if (gt.name.ends_with("attn_v_b.weight")) continue;
    const bool minimax = s.arch == "minimax-m2";
    if ((s.arch == "glm4moe" || s.arch == "deepseek2" || minimax) && gt.name.find("_exps.weight") != std::string::npos) {
      // one matrix per expert: mlp.experts.E.{gate,up,down}_proj, or MiniMax's block_sparse_moe.experts.E.w1 / w3 / w2
      const int64_t cols = gt.ne[0], rows = gt.ne[1], E = gt.ne[2];
      const std::string layer = gt.name.substr(4, gt.name.find('.', 4) - 4);
      const int part = gt.name.find("gate_exps") != std::string::npos ? 0 : gt.name.find("up_exps") != std::string::npos ? 1 : 2;
      static const char* const kHf[2][3] = {{"gate_proj", "up_proj", "down_proj"}, {"w1", "w3", "w2"}};
      for (int64_t e = 0; e < E; ++e)
        t[fmt::format("model.layers.{}.{}.experts.{}.{}.weight", layer, minimax ? "block_sparse_moe" : "mlp", e,
                      kHf[minimax][part])] = {
            {rows, cols}, std::vector<float>(v.begin() + e * rows * cols, v.begin() + (e + 1) * rows * cols)};
      continue;
    }
    if (gt.name.ends_with("exp_probs_b.bias")) {
      const std::string layer = gt.name.substr(4, gt.name.find('.', 4) - 4);
      t["model.layers." + layer + (minimax ? ".block_sparse_moe" : ".mlp.gate") +
        ".e_score_correction_bias"] = {{gt.ne[0]}, v};
      continue;
    }
    if (gt.name.ends_with("ffn_gate_exps.weight")) {  // [E, F, H] gate, then up: [E, 2F, H]
      const GgufTensorInfo* up = g.find_tensor(gt.name.substr(0, gt.name.size() - 20) + "ffn_up_exps.weight");
      EXPECT_NE(up, nullptr);
      const std::vector<float> u = f32_values_of(*up);
      const int64_t H = gt.ne[0], F = gt.ne[1], E = gt.ne[2];
      std::vector<float> io(static_cast<size_t>(E * 2 * F * H));
      for (int64_t e = 0; e < E; ++e) {
        std::copy_n(v.begin() + e * F * H, F * H, io.begin() + e * 2 * F * H);
        std::copy_n(u.begin() + e * F * H, F * H, io.begin() + e * 2 * F * H + F * H);
      }
      const std::string layer = gt.name.substr(4, gt.name.find('.', 4) - 4);
      t["model.layers." + layer + ".block_sparse_moe.input_linear.weight"] = {{E, 2 * F, H}, io};
      continue;
    }
    if (gt.name.ends_with("ffn_up_exps.weight")) continue;
    if (gt.name.ends_with("shortconv.conv.weight")) {  // lfm2: HF's Conv1d weight [H, 1, L]
      t[hf_name_of(gt.name, s.arch)] = {{gt.ne[1], 1, gt.ne[0]}, v};
      continue;
    }
    if (s.arch == "gemma" && gt.name.find("norm") != std::string::npos)
      for (float& x : v) x -= 1.0f;  // (exact: the weights lie near 1)
    const bool qk = gt.name.ends_with("attn_q.weight") || gt.name.ends_with("attn_k.weight");
    if (permuted(s.arch) && qk) {
      const int64_t cols = gt.ne[0], rows = gt.ne[1];
      std::vector<float> hf(v.size());
      for (int64_t r = 0; r < rows; ++r)
        std::copy_n(v.begin() + r * cols, cols, hf.begin() + llama_qk_permuted_source_row(r, s.head_dim) * cols);
      v = std::move(hf);
    }
    t[hf_name_of(gt.name, s.arch)] = {std::vector<int64_t>(gt.ne.rbegin(), gt.ne.rend()), v};
  }
  if (s.arch == "glm4moe" || s.arch == "deepseek2") {  // a NextN layer after the model's own (left out by the converter)
    const std::string nl = fmt::format("model.layers.{}.", s.n_layer);
    t[nl + "eh_proj.weight"] = {{s.n_embd, 2 * s.n_embd}, std::vector<float>(static_cast<size_t>(2 * s.n_embd * s.n_embd), 0.5f)};
    t[nl + "enorm.weight"] = {{s.n_embd}, std::vector<float>(static_cast<size_t>(s.n_embd), 1.0f)};
    t[nl + "mlp.experts.0.gate_proj.weight"] = {{s.n_ff_exp, s.n_embd},
                                                std::vector<float>(static_cast<size_t>(s.n_ff_exp * s.n_embd), 0.5f)};
    t[nl + "mlp.gate.e_score_correction_bias"] = {{s.n_expert}, std::vector<float>(static_cast<size_t>(s.n_expert), 0.0f)};
  }
  return t;
}

}  // namespace

class HfFamilyRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFamilyRoundTrip, DummyModelThroughHfFolderIsTheSameModel) {
  const DummyFile d = write_f32_dummy(GetParam(), 11);
  auto g = GgufFile::open(d.path);
  ASSERT_TRUE(g.ok()) << g.error();
  std::string out;
  const GgufFile f =
      convert_ok(write_hf_folder(config_of(d.shape), hf_tensors_of(*g, d.shape), "F32", true, GetParam()), &out);
  expect_same_tensors(f, *g);
  // every hyper-parameter the dummy writes, the same value (granite's scales, OLMo 3's window and YaRN),
  // the same layers' windows and RoPE, and the same logits (past OLMo 3's window of 8)
  EXPECT_GE(expect_same_arch_keys(f, *g, d.shape.arch), 10);
  auto m1 = Model::load(d.path);
  ASSERT_TRUE(m1.ok()) << m1.error();
  auto m2 = Model::load(out);
  ASSERT_TRUE(m2.ok()) << m2.error();
  ASSERT_EQ((*m2)->config().layer_attn.size(), (*m1)->config().layer_attn.size());
  for (size_t l = 0; l < (*m1)->config().layer_attn.size(); ++l) {
    EXPECT_EQ((*m2)->config().layer_attn[l].window, (*m1)->config().layer_attn[l].window) << l;
    EXPECT_EQ((*m2)->config().layer_attn[l].rope, (*m1)->config().layer_attn[l].rope) << l;
  }
  expect_same_logits(d.path, out);
}

INSTANTIATE_TEST_SUITE_P(Families, HfFamilyRoundTrip,
                         ::testing::Values("tiny-gemma", "tiny-granite", "tiny-smollm3", "tiny-olmo2", "tiny-olmo3",
                                           "tiny-exaone4", "tiny-exaone4-swa", "tiny-glm4", "tiny-granitemoe",
                                           "tiny-mistral3", "tiny-glm4moe", "tiny-deepseek2", "tiny-deepseek3",
                                           "tiny-minimax-m2", "tiny-seed-oss", "tiny-lfm2"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) ch = ch == '-' ? '_' : ch;
                           return n;
                         });

// What GGUF granite / smollm3 / olmo2 cannot compute is refused naming the field.
TEST(HfFamilies, FieldsTheFamilyCannotComputeAreRefused) {
  const DummyFile d = write_f32_dummy("tiny-smollm3", 11);
  auto g = GgufFile::open(d.path);
  ASSERT_TRUE(g.ok());
  const HfTensors t = hf_tensors_of(*g, d.shape);
  json smol = config_of(d.shape);
  smol["no_rope_layers"] = {1, 0, 1, 1};
  EXPECT_ERROR_HAS(convert_error(smol, t), "no_rope_layers[1]");
  smol = config_of(d.shape);
  smol.erase("no_rope_layers");
  smol["no_rope_layer_interval"] = 3;
  EXPECT_ERROR_HAS(convert_error(smol, t), "no_rope_layer_interval 3");
  smol = config_of(d.shape);
  smol["use_sliding_window"] = true;
  EXPECT_ERROR_HAS(convert_error(smol, t), "use_sliding_window");

  const DummyFile gd = write_f32_dummy("tiny-granite", 11);
  auto gg = GgufFile::open(gd.path);
  ASSERT_TRUE(gg.ok());
  json gran = config_of(gd.shape);
  gran["mlp_bias"] = true;
  EXPECT_ERROR_HAS(convert_error(gran, hf_tensors_of(*gg, gd.shape)), "mlp_bias");
  gran = config_of(gd.shape);
  gran["logits_scaling"] = -2;
  EXPECT_ERROR_HAS(convert_error(gran, hf_tensors_of(*gg, gd.shape)), "logits_scaling");

  const DummyFile od = write_f32_dummy("tiny-olmo3", 11);
  auto og = GgufFile::open(od.path);
  ASSERT_TRUE(og.ok());
  json olmo = config_of(od.shape);
  olmo["layer_types"] = {"sliding_attention", "chunked_attention", "sliding_attention", "full_attention"};
  EXPECT_ERROR_HAS(convert_error(olmo, hf_tensors_of(*og, od.shape)), "layer_types[1]");
  // an OLMo 2 folder still holding pre-norms is not an OLMo 2
  HfTensors extra = hf_tensors_of(*og, od.shape);
  extra["model.layers.0.input_layernorm.weight"] = {{od.shape.n_embd}, std::vector<float>(od.shape.n_embd, 1.0f)};
  EXPECT_ERROR_HAS(convert_error(config_of(od.shape), extra), "input_layernorm");

  const DummyFile ed = write_f32_dummy("tiny-exaone4-swa", 11);
  auto eg = GgufFile::open(ed.path);
  ASSERT_TRUE(eg.ok());
  json ex = config_of(ed.shape);
  ex["sliding_window_pattern"] = "LLXG";
  EXPECT_ERROR_HAS(convert_error(ex, hf_tensors_of(*eg, ed.shape)), "sliding_window_pattern");

  const DummyFile gd4 = write_f32_dummy("tiny-glm4", 11);
  auto g4 = GgufFile::open(gd4.path);
  ASSERT_TRUE(g4.ok());
  json glm = config_of(gd4.shape);
  glm["partial_rotary_factor"] = 0.1;  // 1.6 of 16 dimensions: 1 (odd)
  EXPECT_ERROR_HAS(convert_error(glm, hf_tensors_of(*g4, gd4.shape)), "partial_rotary_factor");
  glm = config_of(gd4.shape);
  glm["rope_scaling"] = {{"rope_type", "default"}, {"mrope_section", {8, 12, 12}}};
  EXPECT_ERROR_HAS(convert_error(glm, hf_tensors_of(*g4, gd4.shape)), "mrope_section");

  // GLM-4.5: grouped routing that restricts the choice; a dense-layer count that disagrees with the
  // tensors; a NextN layer config.json does not announce
  const DummyFile gm = write_f32_dummy("tiny-glm4moe", 11);
  auto gmf = GgufFile::open(gm.path);
  ASSERT_TRUE(gmf.ok());
  const HfTensors gt = hf_tensors_of(*gmf, gm.shape);
  json moe = config_of(gm.shape);
  moe["n_group"] = 4;
  moe["topk_group"] = 2;
  EXPECT_ERROR_HAS(convert_error(moe, gt), "n_group 4 with topk_group 2");
  moe["topk_group"] = 4;  // every group kept: the same choice
  EXPECT_EQ(convert_error(moe, gt), "<converted OK>");
  moe = config_of(gm.shape);
  moe["first_k_dense_replace"] = 0;
  EXPECT_ERROR_HAS(convert_error(moe, gt), "model.layers.0.mlp.");  // layer 0's dense FFN is unexpected
  moe = config_of(gm.shape);
  moe["num_nextn_predict_layers"] = 0;
  EXPECT_ERROR_HAS(convert_error(moe, gt), "model.layers.3.");

  // DeepSeek: what GGUF deepseek2 cannot express
  const DummyFile dd = write_f32_dummy("tiny-deepseek3", 11);
  auto ddf = GgufFile::open(dd.path);
  ASSERT_TRUE(ddf.ok());
  const HfTensors dt = hf_tensors_of(*ddf, dd.shape);
  json ds = config_of(dd.shape);
  ds["attention_bias"] = true;
  EXPECT_ERROR_HAS(convert_error(ds, dt), "attention_bias");
  ds = config_of(dd.shape);
  ds["moe_layer_freq"] = 2;
  EXPECT_ERROR_HAS(convert_error(ds, dt), "moe_layer_freq 2");
  ds = config_of(dd.shape);
  ds["scoring_func"] = "tanh";
  EXPECT_ERROR_HAS(convert_error(ds, dt), "scoring_func");
  ds = config_of(dd.shape);
  ds["v_head_dim"] = 32;  // kv_b_proj's rows disagree
  EXPECT_ERROR_HAS(convert_error(ds, dt), "kv_b_proj.weight");

  // MiniMax-M2: per-head q/k norms, no scoring function; Seed-OSS: an output bias
  const DummyFile md = write_f32_dummy("tiny-minimax-m2", 11);
  auto mdf = GgufFile::open(md.path);
  ASSERT_TRUE(mdf.ok());
  const HfTensors mt = hf_tensors_of(*mdf, md.shape);
  json mm = config_of(md.shape);
  mm["qk_norm_type"] = "per_head";
  EXPECT_ERROR_HAS(convert_error(mm, mt), "qk_norm_type");
  mm = config_of(md.shape);
  mm.erase("scoring_func");
  EXPECT_ERROR_HAS(convert_error(mm, mt), "scoring_func");
  const DummyFile sd = write_f32_dummy("tiny-seed-oss", 11);
  auto sdf = GgufFile::open(sd.path);
  ASSERT_TRUE(sdf.ok());
  json so = config_of(sd.shape);
  so["attention_out_bias"] = true;
  EXPECT_ERROR_HAS(convert_error(so, hf_tensors_of(*sdf, sd.shape)), "attention_out_bias");
}

// EXAONE 4.0's sliding_window_pattern as a count, and layer_types, give the same per-layer flags as "LLLG".
TEST(HfFamilies, Exaone4PatternSpellingsAgree) {
  const DummyFile d = write_f32_dummy("tiny-exaone4-swa", 11);
  auto g = GgufFile::open(d.path);
  ASSERT_TRUE(g.ok());
  const HfTensors t = hf_tensors_of(*g, d.shape);
  std::vector<std::optional<std::vector<int64_t>>> flags;
  for (int spelling = 0; spelling < 3; ++spelling) {
    json cfg = config_of(d.shape);
    if (spelling == 1) cfg["sliding_window_pattern"] = 4;
    if (spelling == 2) {
      cfg.erase("sliding_window_pattern");
      json lt = json::array();
      for (int64_t i = 0; i < d.shape.n_layer; ++i) lt.push_back((i + 1) % 4 ? "sliding_attention" : "full_attention");
      cfg["layer_types"] = lt;
    }
    const std::string out = temp_dir() + "/exaone4-" + std::to_string(spelling) + ".gguf";
    auto st = convert_hf_to_gguf(write_hf_folder(cfg, t, "F32", false, "ex4-" + std::to_string(spelling)), out,
                                 HfConvertOptions{});
    ASSERT_TRUE(st.ok()) << st.error();
    auto f = GgufFile::open(out);
    ASSERT_TRUE(f.ok());
    const GgufValue* v = f->find("exaone4.attention.sliding_window_pattern");
    ASSERT_NE(v, nullptr) << spelling;
    flags.push_back(v->as_int_array());
  }
  ASSERT_TRUE(flags[0].has_value());
  EXPECT_EQ(flags[0]->size(), 64u);
  EXPECT_EQ((*flags[0])[3], 0);
  EXPECT_EQ((*flags[0])[4], 1);
  EXPECT_EQ(flags[1], flags[0]);
  EXPECT_EQ(flags[2], flags[0]);
}

// Ministral 3 as Mistral3ForConditionalGeneration ships it: the text model under text_config
// (model_type ministral3) and model.language_model.*, a vision tower beside it -- the same file as
// Ministral3ForCausalLM's; without YaRN it is refused.
TEST(HfFamilies, Ministral3InsideMistral3ForConditionalGeneration) {
  const DummyFile d = write_f32_dummy("tiny-mistral3", 11);
  auto g = GgufFile::open(d.path);
  ASSERT_TRUE(g.ok());
  json text = config_of(d.shape);
  text.erase("architectures");
  text["model_type"] = "ministral3";
  const json cfg = {{"architectures", {"Mistral3ForConditionalGeneration"}},
                    {"text_config", text},
                    {"vision_config", {{"hidden_size", 16}, {"model_type", "pixtral"}}},
                    {"torch_dtype", "float32"}};
  HfTensors t;
  for (auto& [name, v] : hf_tensors_of(*g, d.shape))
    t[name.starts_with("model.") ? "model.language_model." + name.substr(6) : name] = v;
  t["model.vision_tower.transformer.layers.0.attention.q_proj.weight"] = {{4, 4}, std::vector<float>(16, 0.5f)};
  std::string out;
  const GgufFile f = convert_ok(write_hf_folder(cfg, t, "F32", false, "ministral3-vl"), &out);
  expect_same_tensors(f, *g);
  EXPECT_GE(expect_same_arch_keys(f, *g, "mistral3"), 10);
  EXPECT_EQ(f.get_number("mistral3.attention.temperature_scale"), g->get_number("mistral3.attention.temperature_scale"));
  expect_same_logits(d.path, out);
  json plain = config_of(d.shape);
  plain["rope_parameters"]["rope_type"] = "default";
  EXPECT_ERROR_HAS(convert_error(plain, hf_tensors_of(*g, d.shape)), "Ministral 3 needs a yarn");
}

// Granite's multipliers default as transformers' GraniteConfig (1.0) and are written for llama.cpp,
// which requires granite.logit_scale.
TEST(HfFamilies, GraniteMultipliersDefaultToOne) {
  const DummyFile d = write_f32_dummy("tiny-granite", 11);
  auto g = GgufFile::open(d.path);
  ASSERT_TRUE(g.ok());
  json cfg = config_of(d.shape);
  for (const char* k : {"embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling"}) cfg.erase(k);
  const std::string out = temp_dir() + "/granite-defaults.gguf";
  auto st = convert_hf_to_gguf(write_hf_folder(cfg, hf_tensors_of(*g, d.shape), "F32", false, "granite-defaults"), out,
                               HfConvertOptions{});
  ASSERT_TRUE(st.ok()) << st.error();
  auto f = GgufFile::open(out);
  ASSERT_TRUE(f.ok());
  for (const char* k : {"granite.embedding_scale", "granite.residual_scale", "granite.attention.scale", "granite.logit_scale"})
    EXPECT_EQ(f->get_number(k), 1.0) << k;
}

// LFM2: the older full_attn_idxs spelling gives the same file as layer_types; the head counts are
// written per layer (0: a convolution layer); what GGUF lfm2 cannot compute is refused naming the field.
TEST(HfFamilies, Lfm2LayerSpellingsAndRefusals) {
  const DummyFile d = write_f32_dummy("tiny-lfm2", 11);
  auto g = GgufFile::open(d.path);
  ASSERT_TRUE(g.ok());
  const HfTensors t = hf_tensors_of(*g, d.shape);
  json cfg = config_of(d.shape);
  cfg.erase("layer_types");
  cfg["full_attn_idxs"] = d.shape.attn_layers;
  std::string out;
  const GgufFile f = convert_ok(write_hf_folder(cfg, t, "F32", false, "lfm2-idxs"), &out);
  expect_same_tensors(f, *g);
  const GgufValue* kv = f.find("lfm2.attention.head_count_kv");
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->as_int_array(), g->find("lfm2.attention.head_count_kv")->as_int_array());
  EXPECT_EQ(kv->as_int_array(), (std::vector<int64_t>{0, 2, 0, 2, 0}));
  EXPECT_EQ(f.get_number("lfm2.shortconv.l_cache"), 3.0);
  EXPECT_EQ(f.get_number("lfm2.feed_forward_length"), 160.0);  // block_ff_dim 240, adjusted
  expect_same_logits(d.path, out);

  json bad = config_of(d.shape);
  bad["conv_bias"] = true;
  EXPECT_ERROR_HAS(convert_error(bad, t), "conv_bias");
  bad = config_of(d.shape);
  bad["layer_types"][1] = "sliding_attention";
  EXPECT_ERROR_HAS(convert_error(bad, t), "layer_types[1]");
  bad = config_of(d.shape);
  bad["layer_types"] = json::array({"conv", "conv", "conv", "conv", "conv"});
  EXPECT_ERROR_HAS(convert_error(bad, t), "no layer has attention");
  bad = config_of(d.shape);
  bad["block_auto_adjust_ff_dim"] = false;  // then the FFN is 240 wide: its tensors do not fit
  EXPECT_ERROR_HAS(convert_error(bad, t), "feed_forward.w1.weight': shape [160, 64] does not match");
}
