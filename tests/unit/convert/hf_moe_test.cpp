// HF folder -> GGUF for the mixtures of experts (Qwen3-MoE, Qwen2-MoE with its shared expert, OLMoE,
// Mixtral): per-expert matrices stacked into ffn_{gate,up,down}_exps in expert order, routers kept
// F32, the expert metadata keys llama.cpp's converter writes, and errors. Then a round trip: the
// `tokenmill dummy` models of each family (the files tests/llamacpp checks against llama.cpp) written
// out as HF folders (the HF names spelled out here, Mixtral's q/k rows un-permuted) convert back to
// the same tensors, bit for bit, and the same hyper-parameters, and run to the same logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "convert/dummy.h"
#include "convert/hf_model.h"
#include "core/fp16.h"
#include "formats/gguf.h"
#include "hf_folder.h"
#include "model/model.h"
#include "model/reference.h"

using namespace tmill;
using namespace tmill::test;
using nlohmann::json;

namespace {

std::string convert_error(const std::string& dir) {
  auto st = convert_hf_to_gguf(dir, temp_dir() + "/out.gguf", HfConvertOptions{});
  return st.ok() ? "<converted OK>" : st.error();
}

std::vector<float> values_of(const GgufTensorInfo& t) {
  std::vector<float> v(static_cast<size_t>(t.n_elements));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.type == DType::F32) {
      std::memcpy(&v[i], t.data + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      v[i] = t.type == DType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
    }
  }
  return v;
}

// The experts' matrices of one kind, concatenated in expert order: what the 3-D tensor must hold.
std::vector<float> stacked(const HfTensors& src, const std::string& prefix, const std::string& suffix, int64_t n) {
  std::vector<float> out;
  for (int64_t e = 0; e < n; ++e) {
    const auto& v = src.at(fmt::format("{}{}.{}", prefix, e, suffix)).values;
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

void expect_tensor(const GgufFile& f, const std::string& name, std::vector<int64_t> ne, DType type,
                   const std::vector<float>& values) {
  const GgufTensorInfo* t = f.find_tensor(name);
  ASSERT_NE(t, nullptr) << name;
  EXPECT_EQ(t->ne, ne) << name;
  EXPECT_EQ(t->type, type) << name;
  EXPECT_EQ(values_of(*t), values) << name;
}

json moe_config(const std::string& arch) {
  json cfg = tiny_llama_config();  // hidden 16, 4 heads of 4, 2 kv heads, FFN 24, 2 layers
  cfg["architectures"] = {arch};
  cfg[arch == "MixtralForCausalLM" ? "num_local_experts" : "num_experts"] = 4;
  cfg["num_experts_per_tok"] = 2;
  if (arch == "Qwen3MoeForCausalLM" || arch == "Qwen2MoeForCausalLM") cfg["moe_intermediate_size"] = 12;
  if (arch == "Qwen2MoeForCausalLM") cfg["shared_expert_intermediate_size"] = 20;
  if (arch == "OlmoeForCausalLM") cfg["num_key_value_heads"] = 4;
  return cfg;
}

}  // namespace

TEST(HfConvertMoe, Qwen3MoeStacksExpertsInOrder) {
  json cfg = moe_config("Qwen3MoeForCausalLM");
  cfg["head_dim"] = 8;
  auto src = hf_weights(cfg);
  const std::string dir = write_hf_folder(cfg, src, "BF16");
  auto f = convert(dir, "f32");
  EXPECT_EQ(f.get_string("general.architecture"), "qwen3moe");
  EXPECT_EQ(f.get_int("qwen3moe.expert_count"), 4);
  EXPECT_EQ(f.get_int("qwen3moe.expert_used_count"), 2);
  EXPECT_EQ(f.get_int("qwen3moe.expert_feed_forward_length"), 12);
  EXPECT_EQ(f.get_int("qwen3moe.feed_forward_length"), 24);  // intermediate_size, as the converter writes it
  EXPECT_EQ(f.find("qwen3moe.expert_shared_feed_forward_length"), nullptr);
  EXPECT_EQ(f.find("qwen3moe.expert_count")->type, GgufType::U32);
  for (int l = 0; l < 2; ++l) {
    const std::string p = fmt::format("model.layers.{}.mlp.", l), b = fmt::format("blk.{}.", l);
    expect_tensor(f, b + "ffn_gate_inp.weight", {16, 4}, DType::F32, src.at(p + "gate.weight").values);
    expect_tensor(f, b + "ffn_gate_exps.weight", {16, 12, 4}, DType::F32, stacked(src, p + "experts.", "gate_proj.weight", 4));
    expect_tensor(f, b + "ffn_up_exps.weight", {16, 12, 4}, DType::F32, stacked(src, p + "experts.", "up_proj.weight", 4));
    expect_tensor(f, b + "ffn_down_exps.weight", {12, 16, 4}, DType::F32, stacked(src, p + "experts.", "down_proj.weight", 4));
    expect_tensor(f, b + "attn_q_norm.weight", {8}, DType::F32, src.at(fmt::format("model.layers.{}.self_attn.q_norm.weight", l)).values);
    EXPECT_EQ(f.find_tensor(b + "ffn_gate.weight"), nullptr);
    EXPECT_EQ(f.find_tensor(b + "ffn_down.weight"), nullptr);
  }
  // no q/k permutation for the Qwen families
  expect_tensor(f, "blk.0.attn_q.weight", {16, 32}, DType::F32, src.at("model.layers.0.self_attn.q_proj.weight").values);
  EXPECT_EQ(f.tensors().size(), 3u + 2 * 12);  // embd, norm, output + 12 per layer

  // auto keeps BF16 for the experts; the router stays F32 (llama.cpp's converter forces it)
  auto g = convert(dir);
  EXPECT_EQ(g.get_int("general.file_type"), 32);
  expect_tensor(g, "blk.1.ffn_down_exps.weight", {12, 16, 4}, DType::BF16,
                stacked(src, "model.layers.1.mlp.experts.", "down_proj.weight", 4));
  expect_tensor(g, "blk.1.ffn_gate_inp.weight", {16, 4}, DType::F32, src.at("model.layers.1.mlp.gate.weight").values);
}

TEST(HfConvertMoe, Qwen2MoeSharedExpert) {
  json cfg = moe_config("Qwen2MoeForCausalLM");
  auto src = hf_weights(cfg);
  auto f = convert(write_hf_folder(cfg, src, "F32"), "f16");
  EXPECT_EQ(f.get_string("general.architecture"), "qwen2moe");
  EXPECT_EQ(f.get_int("qwen2moe.expert_feed_forward_length"), 12);
  EXPECT_EQ(f.get_int("qwen2moe.expert_shared_feed_forward_length"), 20);
  const std::string p = "model.layers.0.mlp.";
  expect_tensor(f, "blk.0.ffn_gate_shexp.weight", {16, 20}, DType::F16, src.at(p + "shared_expert.gate_proj.weight").values);
  expect_tensor(f, "blk.0.ffn_up_shexp.weight", {16, 20}, DType::F16, src.at(p + "shared_expert.up_proj.weight").values);
  expect_tensor(f, "blk.0.ffn_down_shexp.weight", {20, 16}, DType::F16, src.at(p + "shared_expert.down_proj.weight").values);
  // [1, hidden] in HF: {hidden, 1} in GGUF, F32 like the router
  expect_tensor(f, "blk.0.ffn_gate_inp_shexp.weight", {16, 1}, DType::F32, src.at(p + "shared_expert_gate.weight").values);
  expect_tensor(f, "blk.0.ffn_gate_inp.weight", {16, 4}, DType::F32, src.at(p + "gate.weight").values);
  expect_tensor(f, "blk.0.ffn_up_exps.weight", {16, 12, 4}, DType::F16, stacked(src, p + "experts.", "up_proj.weight", 4));
  expect_tensor(f, "blk.1.attn_k.bias", {8}, DType::F32, src.at("model.layers.1.self_attn.k_proj.bias").values);
  EXPECT_EQ(f.find_tensor("blk.0.attn_output.bias"), nullptr);  // q/k/v biases only, as qwen2
}

TEST(HfConvertMoe, OlmoeWholeProjectionNorms) {
  json cfg = moe_config("OlmoeForCausalLM");
  cfg["rms_norm_eps"] = 1e-6;
  auto src = hf_weights(cfg);
  auto f = convert(write_hf_folder(cfg, src, "F32"));
  EXPECT_EQ(f.get_string("general.architecture"), "olmoe");
  EXPECT_EQ(f.get_int("olmoe.expert_count"), 4);
  EXPECT_EQ(f.find("olmoe.expert_feed_forward_length"), nullptr);  // experts have feed_forward_length rows
  EXPECT_EQ(f.get_number("olmoe.attention.layer_norm_rms_epsilon"), static_cast<double>(1e-5f));  // OlmoeModel's
  expect_tensor(f, "blk.1.attn_q_norm.weight", {16}, DType::F32, src.at("model.layers.1.self_attn.q_norm.weight").values);
  expect_tensor(f, "blk.1.attn_k_norm.weight", {16}, DType::F32, src.at("model.layers.1.self_attn.k_norm.weight").values);
  expect_tensor(f, "blk.1.ffn_gate_exps.weight", {16, 24, 4}, DType::F32,
                stacked(src, "model.layers.1.mlp.experts.", "gate_proj.weight", 4));
  cfg["num_key_value_heads"] = 2;  // llama.cpp's olmoe norms are hidden_size wide: no GQA
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(cfg, hf_weights(cfg), "F32")), "num_key_value_heads == num_attention_heads");
}

TEST(HfConvertMoe, MixtralW1W3W2AndPermutedQk) {
  json cfg = moe_config("MixtralForCausalLM");
  auto src = hf_weights(cfg);
  auto f = convert(write_hf_folder(cfg, src, "F32"));
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.expert_count"), 4);
  EXPECT_EQ(f.get_int("llama.expert_used_count"), 2);
  EXPECT_EQ(f.find("llama.expert_feed_forward_length"), nullptr);
  const std::string p = "model.layers.1.block_sparse_moe.";
  expect_tensor(f, "blk.1.ffn_gate_inp.weight", {16, 4}, DType::F32, src.at(p + "gate.weight").values);
  expect_tensor(f, "blk.1.ffn_gate_exps.weight", {16, 24, 4}, DType::F32, stacked(src, p + "experts.", "w1.weight", 4));
  expect_tensor(f, "blk.1.ffn_up_exps.weight", {16, 24, 4}, DType::F32, stacked(src, p + "experts.", "w3.weight", 4));
  expect_tensor(f, "blk.1.ffn_down_exps.weight", {24, 16, 4}, DType::F32, stacked(src, p + "experts.", "w2.weight", 4));
  // q/k rows permuted as for llama: GGUF row 1 of a head of 4 is HF row 2
  const auto& k = src.at("model.layers.0.self_attn.k_proj.weight").values;
  auto kv = values_of(*f.find_tensor("blk.0.attn_k.weight"));
  for (int c = 0; c < 16; ++c) EXPECT_EQ(kv[1 * 16 + c], k[2 * 16 + c]);
}

TEST(HfConvertMoe, Errors) {
  json cfg = moe_config("Qwen3MoeForCausalLM");
  auto src = hf_weights(cfg);
  auto missing = src;
  missing.erase("model.layers.1.mlp.experts.3.up_proj.weight");
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(cfg, missing, "F32")), "'blk.1.ffn_up_exps.weight' lacks expert 3");
  auto extra = src;
  extra["model.layers.0.mlp.experts.4.up_proj.weight"] = src.at("model.layers.0.mlp.experts.0.up_proj.weight");
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(cfg, extra, "F32")), "expert 4 is out of range (config.json: 4 experts)");
  auto bad = src;
  bad["model.layers.0.mlp.experts.2.down_proj.weight"] = {{12, 16}, std::vector<float>(192, 0.0f)};
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(cfg, bad, "F32")), "shape [12, 16] does not match config.json (expected [16, 12])");
  // experts in a dense model's folder
  json dense = tiny_llama_config();
  auto dsrc = hf_weights(dense);
  dsrc["model.layers.0.mlp.experts.0.up_proj.weight"] = {{24, 16}, std::vector<float>(384, 0.0f)};
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(dense, dsrc, "F32")), "unexpected for LlamaForCausalLM");
  // hyper-parameters the GGUF families cannot express, or that are missing
  json c2 = cfg;
  c2["decoder_sparse_step"] = 2;
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(c2, src, "F32")), "layers without experts");
  c2 = cfg;
  c2["mlp_only_layers"] = {0};
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(c2, src, "F32")), "layers without experts");
  c2 = cfg;
  c2.erase("num_experts_per_tok");
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(c2, src, "F32")), "missing required field \"num_experts_per_tok\"");
  c2 = cfg;
  c2["num_experts_per_tok"] = 5;
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(c2, src, "F32")), "\"num_experts_per_tok\" = 5 is out of range");
  c2 = cfg;
  c2.erase("moe_intermediate_size");
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(c2, src, "F32")), "missing required field \"moe_intermediate_size\"");
}

TEST(HfConvertMoe, ExpertTensorNames) {
  using P = std::pair<std::string, int64_t>;
  EXPECT_EQ(hf_expert_tensor("model.layers.3.mlp.experts.7.up_proj.weight"), P("blk.3.ffn_up_exps.weight", 7));
  EXPECT_EQ(hf_expert_tensor("model.layers.0.mlp.experts.127.down_proj.weight"), P("blk.0.ffn_down_exps.weight", 127));
  EXPECT_EQ(hf_expert_tensor("model.layers.31.block_sparse_moe.experts.0.w1.weight"), P("blk.31.ffn_gate_exps.weight", 0));
  EXPECT_EQ(hf_expert_tensor("model.layers.1.block_sparse_moe.experts.5.w3.weight"), P("blk.1.ffn_up_exps.weight", 5));
  EXPECT_EQ(hf_expert_tensor("model.layers.1.block_sparse_moe.experts.5.w2.weight"), P("blk.1.ffn_down_exps.weight", 5));
  EXPECT_FALSE(hf_expert_tensor("model.layers.1.mlp.experts.05.up_proj.weight").has_value());
  EXPECT_FALSE(hf_expert_tensor("model.layers.1.mlp.experts.x.up_proj.weight").has_value());
  EXPECT_FALSE(hf_expert_tensor("model.layers.1.mlp.experts.1.up_proj.bias").has_value());
  EXPECT_FALSE(hf_expert_tensor("model.layers.1.mlp.experts.gate_up_proj").has_value());
  EXPECT_FALSE(hf_expert_tensor("model.layers.1.mlp.shared_expert.up_proj.weight").has_value());
  EXPECT_EQ(*hf_tensor_to_gguf_name("model.layers.2.mlp.gate.weight"), "blk.2.ffn_gate_inp.weight");
  EXPECT_EQ(*hf_tensor_to_gguf_name("model.layers.2.block_sparse_moe.gate.weight"), "blk.2.ffn_gate_inp.weight");
  EXPECT_EQ(*hf_tensor_to_gguf_name("model.layers.2.mlp.shared_expert_gate.weight"), "blk.2.ffn_gate_inp_shexp.weight");
  EXPECT_EQ(*hf_tensor_to_gguf_name("model.layers.2.mlp.shared_expert.down_proj.weight"), "blk.2.ffn_down_shexp.weight");
}

namespace {

// HF name of a dummy GGUF tensor of `arch` (expert tensors: the name with "{}" for the expert).
std::string hf_name_of(const std::string& gguf, bool mixtral) {
  static const std::map<std::string, std::string> sub = {
      {"attn_norm", "input_layernorm"}, {"ffn_norm", "post_attention_layernorm"}, {"attn_q", "self_attn.q_proj"},
      {"attn_k", "self_attn.k_proj"}, {"attn_v", "self_attn.v_proj"}, {"attn_output", "self_attn.o_proj"},
      {"attn_q_norm", "self_attn.q_norm"}, {"attn_k_norm", "self_attn.k_norm"},
      {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"}, {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
      {"ffn_down_shexp", "mlp.shared_expert.down_proj"}, {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"}};
  if (gguf == "token_embd.weight") return "model.embed_tokens.weight";
  if (gguf == "output_norm.weight") return "model.norm.weight";
  if (gguf == "output.weight") return "lm_head.weight";
  const size_t d1 = gguf.find('.', 4), d2 = gguf.rfind('.');
  const std::string layer = gguf.substr(4, d1 - 4), kind = gguf.substr(d1 + 1, d2 - d1 - 1), suffix = gguf.substr(d2);
  const std::string p = "model.layers." + layer + ".";
  const std::string moe = mixtral ? "block_sparse_moe." : "mlp.";
  if (kind == "ffn_gate_inp") return p + moe + "gate" + suffix;
  if (kind == "ffn_gate_exps") return p + moe + "experts.{}." + (mixtral ? "w1" : "gate_proj") + suffix;
  if (kind == "ffn_up_exps") return p + moe + "experts.{}." + (mixtral ? "w3" : "up_proj") + suffix;
  if (kind == "ffn_down_exps") return p + moe + "experts.{}." + (mixtral ? "w2" : "down_proj") + suffix;
  return p + sub.at(kind) + suffix;
}

// The dummy model of `shape` as a Hugging Face folder: config.json and the tensors under their HF
// names, experts apart, llama q/k rows back in HF's rotate-half order.
std::string dummy_as_hf_folder(const ModelShape& s, const GgufFile& g) {
  const bool mixtral = s.arch == "llama";
  const std::map<std::string, std::string> hf_arch = {{"qwen3moe", "Qwen3MoeForCausalLM"},
                                                      {"qwen2moe", "Qwen2MoeForCausalLM"},
                                                      {"olmoe", "OlmoeForCausalLM"},
                                                      {"llama", "MixtralForCausalLM"}};
  json cfg = {{"architectures", {hf_arch.at(s.arch)}}, {"hidden_size", s.n_embd}, {"intermediate_size", s.n_ff},
              {"num_hidden_layers", s.n_layer}, {"num_attention_heads", s.n_head},
              {"num_key_value_heads", s.n_head_kv}, {"vocab_size", s.n_vocab}, {"max_position_embeddings", s.n_ctx},
              {"rms_norm_eps", static_cast<double>(s.rms_eps)}, {"rope_theta", static_cast<double>(s.rope_theta)},
              {"tie_word_embeddings", s.tied}, {"num_experts_per_tok", s.n_expert_used}};
  cfg[mixtral ? "num_local_experts" : "num_experts"] = s.n_expert;
  if (s.head_dim != s.n_embd / s.n_head) cfg["head_dim"] = s.head_dim;
  if (s.arch == "qwen3moe" || s.arch == "qwen2moe") cfg["moe_intermediate_size"] = s.n_ff_exp > 0 ? s.n_ff_exp : s.n_ff;
  if (s.arch == "qwen2moe") cfg["shared_expert_intermediate_size"] = s.n_ff_shexp > 0 ? s.n_ff_shexp : s.n_ff;
  HfTensors t;
  for (const GgufTensorInfo& gt : g.tensors()) {
    EXPECT_EQ(gt.type, DType::F32) << gt.name;
    const std::vector<float> v = values_of(gt);
    std::vector<int64_t> shape(gt.ne.rbegin(), gt.ne.rend());
    const std::string name = hf_name_of(gt.name, mixtral);
    if (shape.size() == 3) {  // one matrix per expert
      const size_t per = v.size() / static_cast<size_t>(shape[0]);
      for (int64_t e = 0; e < shape[0]; ++e)
        t[fmt::format(fmt::runtime(name), e)] = {{shape[1], shape[2]},
                                                 std::vector<float>(v.begin() + e * per, v.begin() + (e + 1) * per)};
      continue;
    }
    if (gt.name.find("ffn_gate_inp_shexp") != std::string::npos) shape = {1, s.n_embd};  // nn.Linear(hidden, 1)
    HfTensor h{shape, v};
    const bool qk = gt.name.find(".attn_q.") != std::string::npos || gt.name.find(".attn_k.") != std::string::npos;
    if (mixtral && qk) {  // GGUF row h*hd + 2j (+1) holds HF row h*hd + j (+ hd/2)
      const int64_t hd = s.head_dim, cols = shape[1];
      for (int64_t r = 0; r < shape[0]; ++r) {
        const int64_t head = r / hd, w = r % hd, hf_row = head * hd + (w % 2) * (hd / 2) + w / 2;
        std::copy(v.begin() + r * cols, v.begin() + (r + 1) * cols, h.values.begin() + hf_row * cols);
      }
    }
    t[name] = std::move(h);
  }
  return write_hf_folder(cfg, t, "F32", /*sharded=*/true);
}

}  // namespace

class HfMoeRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(HfMoeRoundTrip, DummyModelThroughHfFolderIsTheSameModel) {
  DummyOptions o;
  o.shape = *find_shape(GetParam());
  o.dtype = DType::F32;
  o.std = 0.1f;
  o.seed = 5;
  const std::string dummy = temp_dir() + "/dummy.gguf";
  ASSERT_TRUE(write_dummy_model(o, dummy).ok());
  auto g = GgufFile::open(dummy);
  ASSERT_TRUE(g.ok()) << g.error();
  const std::string out = temp_dir() + "/converted.gguf";
  auto st = convert_hf_to_gguf(dummy_as_hf_folder(o.shape, *g), out, HfConvertOptions{});
  ASSERT_TRUE(st.ok()) << st.error();
  auto opened = GgufFile::open(out);
  ASSERT_TRUE(opened.ok()) << opened.error();
  const GgufFile& f = *opened;

  // every tensor: same name, type and bytes (qwen2moe's shared-expert gate: {n_embd, 1} from HF's [1, n_embd])
  EXPECT_EQ(f.tensors().size(), g->tensors().size());
  for (const GgufTensorInfo& want : g->tensors()) {
    const GgufTensorInfo* got = f.find_tensor(want.name);
    ASSERT_NE(got, nullptr) << want.name;
    EXPECT_EQ(got->type, want.type) << want.name;
    EXPECT_EQ(got->n_elements, want.n_elements) << want.name;
    if (want.name.find("ffn_gate_inp_shexp") == std::string::npos) {
      EXPECT_EQ(got->ne, want.ne) << want.name;
    }
    ASSERT_EQ(got->nbytes, want.nbytes) << want.name;
    EXPECT_EQ(std::memcmp(got->data, want.data, want.nbytes), 0) << want.name;
  }
  // every hyper-parameter the dummy writes (as the interop tests' llama.cpp reads it), the same value
  const std::string a = o.shape.arch + ".";
  int n_keys = 0;
  for (const auto& [key, v] : g->metadata()) {
    if (key.rfind(a, 0) != 0) continue;
    ++n_keys;
    const GgufValue* mine = f.find(key);
    ASSERT_NE(mine, nullptr) << key;
    EXPECT_EQ(mine->type, v.type) << key;
    EXPECT_EQ(f.get_number(key), g->get_number(key)) << key;
  }
  EXPECT_GE(n_keys, 12);

  // and the same logits, position after position
  auto m1 = Model::load(dummy);
  ASSERT_TRUE(m1.ok()) << m1.error();
  auto m2 = Model::load(out);
  ASSERT_TRUE(m2.ok()) << m2.error();
  EXPECT_TRUE((*m2)->config().is_moe());
  ReferenceForward r1(*m1, 16), r2(*m2, 16);
  int32_t tok = 1;
  for (int pos = 0; pos < 6; ++pos) {
    const std::vector<float> a1 = r1.forward(tok, pos);
    const std::vector<float>& a2 = r2.forward(tok, pos);
    ASSERT_EQ(a1, a2) << "position " << pos;
    tok = static_cast<int32_t>(std::max_element(a1.begin(), a1.end()) - a1.begin());
  }
}

INSTANTIATE_TEST_SUITE_P(Families, HfMoeRoundTrip,
                         ::testing::Values("tiny-qwen3moe", "tiny-qwen2moe", "tiny-olmoe", "tiny-mixtral"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) ch = ch == '-' ? '_' : ch;
                           return n;
                         });

// transformers 5 saves the experts fused: mlp.experts.gate_up_proj [E, 2F, H] (each expert's gate rows
// then its up rows, torch.cat((gate, up), dim=1) of the per-expert matrices) and mlp.experts.down_proj
// [E, H, F]; Mixtral's block_sparse_moe becomes mlp (router mlp.gate). The same weights in the old
// per-expert layout convert to the same file, byte for byte.
namespace {

// The per-expert folder's weights in transformers 5's fused layout.
HfTensors fuse_experts(const json& cfg, const HfTensors& src, bool weight_suffix) {
  const bool mixtral = cfg["architectures"][0] == "MixtralForCausalLM";
  const int64_t E = cfg.value("num_local_experts", cfg.value("num_experts", int64_t{0}));
  HfTensors out;
  for (const auto& [name, t] : src) {
    if (name.find(".experts.") != std::string::npos) continue;
    std::string n = name;
    if (mixtral) {
      const size_t p = n.find("block_sparse_moe.");
      if (p != std::string::npos) n.replace(p, 17, "mlp.");
    }
    out[n] = t;
  }
  for (int64_t l = 0; l < cfg["num_hidden_layers"].get<int64_t>(); ++l) {
    const std::string p = fmt::format("model.layers.{}.{}experts.", l, mixtral ? "block_sparse_moe." : "mlp.");
    const std::string gate = mixtral ? "w1" : "gate_proj", up = mixtral ? "w3" : "up_proj", down = mixtral ? "w2" : "down_proj";
    HfTensor gu, dn;
    for (int64_t e = 0; e < E; ++e) {
      const HfTensor& g = src.at(fmt::format("{}{}.{}.weight", p, e, gate));
      const HfTensor& u = src.at(fmt::format("{}{}.{}.weight", p, e, up));
      const HfTensor& d = src.at(fmt::format("{}{}.{}.weight", p, e, down));
      gu.values.insert(gu.values.end(), g.values.begin(), g.values.end());
      gu.values.insert(gu.values.end(), u.values.begin(), u.values.end());
      dn.values.insert(dn.values.end(), d.values.begin(), d.values.end());
      gu.shape = {E, 2 * g.shape[0], g.shape[1]};
      dn.shape = {E, d.shape[0], d.shape[1]};
    }
    const std::string q = fmt::format("model.layers.{}.mlp.experts.", l), sfx = weight_suffix ? ".weight" : "";
    out[q + "gate_up_proj" + sfx] = gu;
    out[q + "down_proj" + sfx] = dn;
  }
  return out;
}

void expect_same_file(const std::string& a_path, const std::string& b_path) {
  auto a = GgufFile::open(a_path);
  auto b = GgufFile::open(b_path);
  ASSERT_TRUE(a.ok()) << a.error();
  ASSERT_TRUE(b.ok()) << b.error();
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  for (const GgufTensorInfo& want : a->tensors()) {
    const GgufTensorInfo* got = b->find_tensor(want.name);
    ASSERT_NE(got, nullptr) << want.name;
    EXPECT_EQ(got->type, want.type) << want.name;
    EXPECT_EQ(got->ne, want.ne) << want.name;
    ASSERT_EQ(got->nbytes, want.nbytes) << want.name;
    EXPECT_EQ(std::memcmp(got->data, want.data, want.nbytes), 0) << want.name;
  }
  for (const auto& [key, v] : a->metadata()) {
    if (key == "general.name") continue;
    const GgufValue* mine = b->find(key);
    ASSERT_NE(mine, nullptr) << key;
    EXPECT_EQ(mine->type, v.type) << key;
  }
  EXPECT_EQ(a->metadata().size(), b->metadata().size());
}

std::string convert_to(const std::string& dir, const std::string& out, const std::string& outtype) {
  HfConvertOptions o;
  o.outtype = outtype;
  o.name = "same";
  auto st = convert_hf_to_gguf(dir, out, o);
  return st.ok() ? "" : st.error();
}

}  // namespace

class HfFusedExperts : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFusedExperts, SameFileAsPerExpertLayout) {
  const json cfg = moe_config(GetParam());
  const HfTensors src = hf_weights(cfg);
  const std::string old_dir = write_hf_folder(cfg, src, "BF16", false, "per-expert");
  const bool mixtral = GetParam() == "MixtralForCausalLM";
  // BF16 kept (bits copied) and BF16 -> F16 (converted); ".weight" suffixes as llama.cpp also accepts
  for (const std::string outtype : {"auto", "f16"}) {
    for (bool suffix : {false, true}) {
      const std::string new_dir = write_hf_folder(cfg, fuse_experts(cfg, src, suffix), "BF16", true, "fused");
      const std::string a = temp_dir() + "/per-expert.gguf", b = temp_dir() + "/fused.gguf";
      ASSERT_EQ(convert_to(old_dir, a, outtype), "");
      ASSERT_EQ(convert_to(new_dir, b, outtype), "");
      SCOPED_TRACE(outtype + (suffix ? " .weight" : ""));
      expect_same_file(a, b);
      if (mixtral) {  // the renamed router is the router
        auto f = GgufFile::open(b);
        ASSERT_TRUE(f.ok());
        expect_tensor(*f, "blk.1.ffn_gate_inp.weight", {16, 4}, DType::F32,
                      src.at("model.layers.1.block_sparse_moe.gate.weight").values);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, HfFusedExperts,
                         ::testing::Values("Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM", "OlmoeForCausalLM",
                                           "MixtralForCausalLM"));

TEST(HfConvertMoe, FusedExpertErrors) {
  const json cfg = moe_config("Qwen3MoeForCausalLM");
  const HfTensors src = hf_weights(cfg);
  const HfTensors fused = fuse_experts(cfg, src, false);
  // both layouts for one layer
  HfTensors both = fused;
  both["model.layers.0.mlp.experts.1.up_proj.weight"] = src.at("model.layers.0.mlp.experts.1.up_proj.weight");
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(cfg, both, "F32")), "is given twice (per-expert and fused");
  // down_proj transposed ([E, F, H] instead of [E, H, F])
  HfTensors bad = fused;
  bad["model.layers.1.mlp.experts.down_proj"].shape = {4, 12, 16};
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(cfg, bad, "F32")), "shape [4, 12, 16] does not match config.json (expected [4, 16, 12])");
  // gpt-oss's biases and MXFP4 tensors are gpt-oss's only
  HfTensors biased = fused;
  biased["model.layers.0.mlp.experts.gate_up_proj_bias"] = {{4, 24}, std::vector<float>(96, 0.0f)};
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(cfg, biased, "F32")), "unexpected for Qwen3MoeForCausalLM");
  // fused experts in a dense model, or beyond the layers
  json dense = tiny_llama_config();
  HfTensors d = hf_weights(dense);
  d["model.layers.0.mlp.experts.down_proj"] = {{4, 16, 24}, std::vector<float>(4 * 16 * 24, 0.0f)};
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(dense, d, "F32")), "unexpected for LlamaForCausalLM");
  HfTensors beyond = fused;
  beyond["model.layers.2.mlp.experts.down_proj"] = fused.at("model.layers.1.mlp.experts.down_proj");
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(cfg, beyond, "F32")), "unexpected for Qwen3MoeForCausalLM");
  // a layer without its down_proj
  HfTensors missing = fused;
  missing.erase("model.layers.1.mlp.experts.down_proj");
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(cfg, missing, "F32")), "missing tensor 'blk.1.ffn_down_exps.weight'");
}

TEST(HfConvertMoe, FusedExpertTensorNames) {
  using P = HfFusedExpertPart;
  EXPECT_EQ(hf_fused_expert_tensor("model.layers.3.mlp.experts.gate_up_proj"), (HfFusedExpert{3, P::GateUp}));
  EXPECT_EQ(hf_fused_expert_tensor("model.layers.3.mlp.experts.gate_up_proj.weight"), (HfFusedExpert{3, P::GateUp}));
  EXPECT_EQ(hf_fused_expert_tensor("model.layers.12.mlp.experts.down_proj"), (HfFusedExpert{12, P::Down}));
  EXPECT_EQ(hf_fused_expert_tensor("model.layers.0.mlp.experts.down_proj_bias"), (HfFusedExpert{0, P::DownBias}));
  EXPECT_EQ(hf_fused_expert_tensor("model.layers.0.mlp.experts.gate_up_proj_blocks"), (HfFusedExpert{0, P::GateUpBlocks}));
  EXPECT_EQ(hf_fused_expert_tensor("model.layers.0.mlp.experts.down_proj_scales"), (HfFusedExpert{0, P::DownScales}));
  EXPECT_EQ(hf_fused_expert_tensor("model.layers.5.block_sparse_moe.experts.down_proj"), (HfFusedExpert{5, P::Down}));
  EXPECT_FALSE(hf_fused_expert_tensor("model.layers.0.mlp.experts.0.down_proj.weight").has_value());
  EXPECT_FALSE(hf_fused_expert_tensor("model.layers.01.mlp.experts.down_proj").has_value());
  EXPECT_FALSE(hf_fused_expert_tensor("model.layers.0.mlp.shared_expert.down_proj").has_value());
  EXPECT_FALSE(hf_fused_expert_tensor("model.layers.0.mlp.experts.down_proj.bias").has_value());
}
