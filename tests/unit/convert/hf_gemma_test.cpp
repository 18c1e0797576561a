// Gemma 2 and Gemma 3 Hugging Face folders (Gemma2ForCausalLM, Gemma3ForCausalLM, and the text model
// of Gemma3ForConditionalGeneration) convert as llama.cpp's Gemma2Model / Gemma3Model do: the dummy
// tiny-gemma2 / tiny-gemma3 GGUF written back as an HF folder (norm weights minus Gemma's 1, HF
// names, config.json with the family's fields) converts to the same tensors, the same hyper-parameters
// and the same logits; the multimodal layout (text_config, language_model.* tensors beside a vision
// tower) converts to the same file; transformers 5's rope_parameters per layer type read as the flat
// fields; layer_types other than the family's pattern become a per-layer sliding_window_pattern;
// fields GGUF gemma cannot compute are refused naming them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>

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

// GGUF name -> HF name of a Gemma text model (prefix: "model." or a multimodal checkpoint's).
std::string hf_name_of(const std::string& gg, const std::string& prefix) {
  if (gg == "token_embd.weight") return prefix + "embed_tokens.weight";
  if (gg == "output_norm.weight") return prefix + "norm.weight";
  static const std::map<std::string, std::string> sub = {
      {"attn_norm", "input_layernorm"},          {"post_attention_norm", "post_attention_layernorm"},
      {"ffn_norm", "pre_feedforward_layernorm"}, {"post_ffw_norm", "post_feedforward_layernorm"},
      {"attn_q", "self_attn.q_proj"},            {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},            {"attn_output", "self_attn.o_proj"},
      {"attn_q_norm", "self_attn.q_norm"},       {"attn_k_norm", "self_attn.k_norm"},
      {"ffn_gate", "mlp.gate_proj"},             {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"}};
  const size_t dot1 = gg.find('.'), dot2 = gg.find('.', dot1 + 1);
  const std::string layer = gg.substr(dot1 + 1, dot2 - dot1 - 1), kind = gg.substr(dot2 + 1, gg.rfind('.') - dot2 - 1);
  return prefix + "layers." + layer + "." + sub.at(kind) + ".weight";
}

json gemma_config(const ModelShape& s) {
  const bool g3 = s.arch == "gemma3";
  json cfg = {{"architectures", {g3 ? "Gemma3ForCausalLM" : "Gemma2ForCausalLM"}},
              {"hidden_size", s.n_embd},
              {"intermediate_size", s.n_ff},
              {"num_hidden_layers", s.n_layer},
              {"num_attention_heads", s.n_head},
              {"num_key_value_heads", s.n_head_kv},
              {"head_dim", s.head_dim},
              {"vocab_size", s.n_vocab},
              {"max_position_embeddings", s.n_ctx},
              {"rms_norm_eps", static_cast<double>(s.rms_eps)},
              {"rope_theta", static_cast<double>(s.rope_theta)},
              {"sliding_window", s.n_swa},
              {"query_pre_attn_scalar", s.head_dim},
              {"hidden_activation", "gelu_pytorch_tanh"},
              {"tie_word_embeddings", true},
              {"torch_dtype", "float32"}};
  if (g3) {
    cfg["rope_local_base_freq"] = s.rope_theta_swa;
    cfg["rope_scaling"] = {{"rope_type", s.rope_scaling}, {"factor", s.rope_factor}};
    cfg["sliding_window_pattern"] = 6;
    cfg["final_logit_softcapping"] = nullptr;
    cfg["attn_logit_softcapping"] = nullptr;
  } else {
    cfg["attn_logit_softcapping"] = s.attn_softcap;
    cfg["final_logit_softcapping"] = s.final_softcap;
  }
  return cfg;
}

// The dummy model's tensors under their HF names, norms stored as Gemma's w (the GGUF holds 1 + w).
HfTensors hf_tensors_of(const GgufFile& g, const std::string& prefix) {
  HfTensors t;
  for (const GgufTensorInfo& gt : g.tensors()) {
    EXPECT_EQ(gt.type, DType::F32) << gt.name;
    std::vector<float> v = f32_values_of(gt);
    if (gt.name.find("norm") != std::string::npos)
      for (float& x : v) x -= 1.0f;  // (exact: the weights lie near 1)
    t[hf_name_of(gt.name, prefix)] = {std::vector<int64_t>(gt.ne.rbegin(), gt.ne.rend()), v};
  }
  return t;
}

}  // namespace

class HfGemmaRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(HfGemmaRoundTrip, DummyModelThroughHfFolderIsTheSameModel) {
  const DummyFile d = write_f32_dummy(GetParam(), 9);
  auto g = GgufFile::open(d.path);
  ASSERT_TRUE(g.ok()) << g.error();
  std::string out;
  const GgufFile f = convert_ok(write_hf_folder(gemma_config(d.shape), hf_tensors_of(*g, "model."), "F32", true, "gemma"), &out);
  expect_same_tensors(f, *g);
  // every hyper-parameter the dummy writes, the same value (soft-caps, window, the sliding layers' base),
  // and the same logits, position after position (past the window of 8)
  EXPECT_GE(expect_same_arch_keys(f, *g, d.shape.arch), 12);
  expect_same_logits(d.path, out);
}

INSTANTIATE_TEST_SUITE_P(Families, HfGemmaRoundTrip, ::testing::Values("tiny-gemma2", "tiny-gemma3"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) ch = ch == '-' ? '_' : ch;
                           return n;
                         });

// Gemma3ForConditionalGeneration: the text model under text_config and language_model.* (old and
// transformers 4.52's model.language_model.*), a vision tower beside it: the same file as the text model.
TEST(HfGemma, MultimodalCheckpointConvertsItsTextModel) {
  const DummyFile d = write_f32_dummy("tiny-gemma3", 9);
  auto g = GgufFile::open(d.path);
  ASSERT_TRUE(g.ok()) << g.error();
  for (const std::string prefix : {"language_model.model.", "model.language_model."}) {
    SCOPED_TRACE(prefix);
    json text = gemma_config(d.shape);
    text.erase("architectures");
    text["model_type"] = "gemma3_text";
    const json cfg = {{"architectures", {"Gemma3ForConditionalGeneration"}},
                      {"text_config", text},
                      {"vision_config", {{"hidden_size", 16}, {"model_type", "siglip_vision_model"}}},
                      {"torch_dtype", "float32"}};
    HfTensors t = hf_tensors_of(*g, prefix);
    const std::string vision = prefix == "language_model.model." ? "" : "model.";
    t[vision + "vision_tower.vision_model.embeddings.patch_embedding.weight"] = {{4, 3}, std::vector<float>(12, 0.5f)};
    t[vision + "multi_modal_projector.mm_input_projection_weight"] = {{3, 4}, std::vector<float>(12, 0.25f)};
    const GgufFile f = convert_ok(write_hf_folder(cfg, t, "F32", false, "gemma3-mm"));
    expect_same_tensors(f, *g);
    EXPECT_EQ(f.get_string("general.architecture"), "gemma3");
    EXPECT_EQ(f.get_number("gemma3.attention.sliding_window"), 8);
  }
}

TEST(HfGemma, ConfigVariants) {
  const DummyFile d = write_f32_dummy("tiny-gemma3", 9);
  auto g = GgufFile::open(d.path);
  ASSERT_TRUE(g.ok()) << g.error();
  const HfTensors t = hf_tensors_of(*g, "model.");
  {  // transformers 5: rope_parameters per layer type
    json cfg = gemma_config(d.shape);
    cfg.erase("rope_theta");
    cfg.erase("rope_scaling");
    cfg.erase("rope_local_base_freq");
    cfg["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 1000000.0}}},
                              {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
    expect_same_tensors(convert_ok(write_hf_folder(cfg, t, "F32", false, "rp")), *g);
    const GgufFile f = convert_ok(write_hf_folder(cfg, t, "F32", false, "rp"));
    EXPECT_EQ(f.get_number("gemma3.rope.scaling.factor"), 2.0);
    EXPECT_EQ(f.get_number("gemma3.rope.freq_base"), 1000000.0);
    EXPECT_EQ(f.get_number("gemma3.rope.freq_base_swa"), 10000.0);
  }
  {  // layer_types other than five-in-six: one flag per layer, which the model reads
    json cfg = gemma_config(d.shape);
    cfg["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention",
                          "sliding_attention", "full_attention", "sliding_attention"};
    std::string path;
    const GgufFile f = convert_ok(write_hf_folder(cfg, t, "F32", false, "lt"), &path);
    const GgufValue* p = f.find("gemma3.attention.sliding_window_pattern");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(*p->as_int_array(), (std::vector<int64_t>{1, 0, 1, 0, 1, 0, 1}));
    auto m = Model::load(path);
    ASSERT_TRUE(m.ok()) << m.error();
    EXPECT_EQ((*m)->config().layer_attn[0].window, 8);
    EXPECT_EQ((*m)->config().layer_attn[1].window, 0);
    // the family's own pattern written as layer_types: no key (the default)
    cfg["layer_types"] = {"sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
                          "sliding_attention", "full_attention", "sliding_attention"};
    EXPECT_EQ(convert_ok(write_hf_folder(cfg, t, "F32", false, "lt2")).find("gemma3.attention.sliding_window_pattern"),
              nullptr);
  }
  // what GGUF gemma does not compute is refused, naming it
  json cfg = gemma_config(d.shape);
  cfg["query_pre_attn_scalar"] = 24;
  EXPECT_ERROR_HAS(convert_error(cfg, t), "query_pre_attn_scalar 24 is not the 32 GGUF gemma3 scales queries by");
  cfg = gemma_config(d.shape);
  cfg["attn_logit_softcapping"] = 50.0;
  EXPECT_ERROR_HAS(convert_error(cfg, t), "attn_logit_softcapping on Gemma 3");
  cfg = gemma_config(d.shape);
  cfg["layer_types"] = {"sliding_attention"};
  EXPECT_ERROR_HAS(convert_error(cfg, t), "\"layer_types\" must list the 7 layers");
  HfTensors missing = t;
  missing.erase("model.layers.1.post_feedforward_layernorm.weight");
  EXPECT_ERROR_HAS(convert_error(gemma_config(d.shape), missing), "missing tensor 'blk.1.post_ffw_norm.weight'");
}
