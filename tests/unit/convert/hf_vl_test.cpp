// Vision-language checkpoints (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Mistral Small 3.x's Mistral3) convert
// their language model: the
// folder in each layout transformers writes -- text fields at the top or under text_config, tensors
// as model.* or model.language_model.*, a vision tower beside them (visual.* / model.visual.*),
// Qwen2-VL's M-RoPE rope_scaling -- gives the tensors and hyper-parameters of the same weights saved as
// the plain text model (Qwen2ForCausalLM / Qwen3ForCausalLM): for text, M-RoPE's three position
// sections hold one position, which is plain RoPE.
#include <gtest/gtest.h>

#include <cstring>

#include "convert/hf_model.h"
#include "formats/gguf.h"
#include "hf_folder.h"

using namespace tmill;
using namespace tmill::test;
using nlohmann::json;

namespace {

json text_config(const std::string& arch) {
  json cfg = tiny_llama_config();
  cfg["architectures"] = {arch};
  cfg["rope_theta"] = 1000000.0;
  if (arch == "Qwen3ForCausalLM") cfg["head_dim"] = 4;
  return cfg;
}

void expect_same(const GgufFile& got, const GgufFile& want) {
  ASSERT_EQ(got.tensors().size(), want.tensors().size());
  for (const GgufTensorInfo& w : want.tensors()) {
    const GgufTensorInfo* g = got.find_tensor(w.name);
    ASSERT_NE(g, nullptr) << w.name;
    ASSERT_EQ(g->nbytes, w.nbytes) << w.name;
    EXPECT_EQ(std::memcmp(g->data, w.data, w.nbytes), 0) << w.name;
  }
  for (const auto& [key, v] : want.metadata()) {
    if (key == "general.name") continue;
    ASSERT_NE(got.find(key), nullptr) << key;
    EXPECT_EQ(got.get_number(key), want.get_number(key)) << key;
    EXPECT_EQ(got.get_string(key), want.get_string(key)) << key;
  }
}

}  // namespace

TEST(HfVisionLanguage, LanguageModelConvertsAsTheTextModel) {
  struct Case {
    const char* vl_arch;
    const char* text_arch;
    bool nested;           // text fields under text_config (newer transformers)
    const char* prefix;    // where the language model's tensors are
    const char* visual;    // the vision tower's prefix
    const char* lm_head = "lm_head.weight";
  };
  for (const Case& c : {Case{"Qwen2VLForConditionalGeneration", "Qwen2ForCausalLM", false, "model.", "visual."},
                        Case{"Qwen2_5_VLForConditionalGeneration", "Qwen2ForCausalLM", false, "model.", "visual."},
                        Case{"Qwen2_5_VLForConditionalGeneration", "Qwen2ForCausalLM", true, "model.language_model.",
                             "model.visual."},
                        Case{"Qwen3VLForConditionalGeneration", "Qwen3ForCausalLM", true, "model.language_model.",
                             "model.visual."},
                        Case{"Mistral3ForConditionalGeneration", "MistralForCausalLM", true, "language_model.model.",
                             "vision_tower.", "language_model.lm_head.weight"},
                        Case{"Mistral3ForConditionalGeneration", "MistralForCausalLM", true, "model.language_model.",
                             "model.vision_tower."}}) {
    SCOPED_TRACE(std::string(c.vl_arch) + (c.nested ? " nested" : ""));
    const json text = text_config(c.text_arch);
    const HfTensors weights = hf_weights(text);
    auto want = convert(write_hf_folder(text, weights, "F32", false, "text"));
    json vl;
    const std::string ta = c.text_arch;
    const json mrope = ta == "Qwen3ForCausalLM"     ? json{{"rope_type", "default"}, {"mrope_section", {1, 1, 0}},
                                                            {"mrope_interleaved", true}}
                       : ta == "MistralForCausalLM" ? json(nullptr)
                                                    : json{{"type", "mrope"}, {"mrope_section", {1, 1, 0}}};
    if (c.nested) {
      json t = text;
      t.erase("architectures");
      t["rope_scaling"] = mrope;
      if (ta == "MistralForCausalLM") t["model_type"] = "mistral";
      vl = {{"architectures", {c.vl_arch}}, {"text_config", t}, {"vision_config", {{"depth", 1}}},
            {"torch_dtype", "float32"}, {"image_token_id", 9}};
    } else {
      vl = text;
      vl["architectures"] = {c.vl_arch};
      vl["rope_scaling"] = mrope;
      vl["vision_config"] = {{"depth", 1}};
    }
    HfTensors t;
    for (const auto& [name, v] : weights)
      t[name.starts_with("model.") ? c.prefix + name.substr(6) : name == "lm_head.weight" ? c.lm_head : name] = v;
    t[std::string(c.visual) + "blocks.0.attn.qkv.weight"] = {{6, 2}, std::vector<float>(12, 0.5f)};
    t[std::string(c.visual) + "merger.mlp.0.weight"] = {{2, 2}, std::vector<float>(4, 0.25f)};
    auto got = convert(write_hf_folder(vl, t, "F32", true, "vl"));
    expect_same(got, want);
  }
  // a multimodal FP8 checkpoint: the language model's scales are read with their matrices as a text
  // model's are
  {
    json text = text_config("Qwen2ForCausalLM");
    text["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {8, 8}}};
    HfTensors weights = hf_weights(text_config("Qwen2ForCausalLM"));
    for (const char* m : {"q_proj", "o_proj"}) {
      const std::string name = std::string("model.layers.0.self_attn.") + m + ".weight";
      HfTensor q;
      q.shape = weights[name].shape;
      q.raw_dtype = "F8_E4M3";
      q.raw = std::vector<uint8_t>(static_cast<size_t>(q.shape[0] * q.shape[1]), 0x38);  // 1.0
      weights[name] = q;
      weights[name + "_scale"] = HfTensor{{1}, {0.5f}};
      weights[name.substr(0, name.size() - 7) + ".input_scale"] = HfTensor{{1}, {0.25f}};
    }
    auto want = convert(write_hf_folder(text, weights, "F32", false, "fp8-text"));
    json t = text;
    t.erase("architectures");
    const json vl = {{"architectures", {"Qwen2_5_VLForConditionalGeneration"}}, {"text_config", t}};
    HfTensors renamed;
    for (const auto& [name, v] : weights)
      renamed[name.starts_with("model.") ? "model.language_model." + name.substr(6) : name] = v;
    renamed["model.visual.blocks.0.attn.qkv.weight"] = {{6, 2}, std::vector<float>(12, 0.5f)};
    expect_same(convert(write_hf_folder(vl, renamed, "F32", false, "fp8-vl")), want);
  }
  // a text model of another type (Mistral 4's, an MoE) is refused naming it (Ministral 3's converts:
  // hf_families_test.cpp)
  json ministral = {{"architectures", {"Mistral3ForConditionalGeneration"}},
                    {"text_config", {{"model_type", "mistral4"}, {"hidden_size", 16}}}};
  auto bad = convert_hf_to_gguf(write_hf_folder(ministral, hf_weights(text_config("MistralForCausalLM")), "F32", false,
                                                "ministral"),
                                temp_dir() + "/m.gguf", HfConvertOptions{});
  ASSERT_FALSE(bad.ok());
  EXPECT_ERROR_HAS(bad.error(), "Mistral3ForConditionalGeneration with a text model of type mistral4");
  // a vision tower without the multimodal architecture is no text model's tensor: refused
  const json text = text_config("Qwen2ForCausalLM");
  HfTensors t = hf_weights(text);
  t["visual.blocks.0.attn.qkv.weight"] = {{6, 2}, std::vector<float>(12, 0.5f)};
  auto st = convert_hf_to_gguf(write_hf_folder(text, t, "F32", false, "stray"), temp_dir() + "/x.gguf", HfConvertOptions{});
  ASSERT_FALSE(st.ok());
  EXPECT_ERROR_HAS(st.error(), "cannot map tensor 'visual.blocks.0.attn.qkv.weight'");
}
