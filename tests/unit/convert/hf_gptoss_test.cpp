// HF folder -> GGUF for gpt-oss (GptOssForCausalLM, llama.cpp's GptOssModel): the `tokenmill dummy`
// tiny-gpt-oss written out as a Hugging Face folder the way OpenAI's checkpoints are laid out
// (router mlp.router, self_attn.sinks, experts fused with gate and up columns interleaved, biases
// fused the same way) converts back to the same tensors, bit for bit, and the same hyper-parameters:
// dequantized ([E, hidden, 2 * rows], used as x @ W) and MXFP4 (*_blocks / *_scales uint8, written
// here from the MXFP4 dummy's blocks by the layout transformers' convert_moe_packed_tensors reads).
// The converted MXFP4 experts also decode, value for value, to what that HF decode gives, and the
// converted model loads and generates.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "convert/dummy.h"
#include "convert/hf_model.h"
#include "convert/model_source.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "hf_folder.h"
#include "round_trip.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/reference.h"
#include "quant/quant.h"

using namespace tmill;
using namespace tmill::test;
using nlohmann::json;

namespace {

std::string write_dummy(DType dtype, const std::string& name) {
  DummyOptions o;
  o.shape = *find_shape("tiny-gpt-oss");
  o.dtype = dtype;
  o.std = 0.1f;
  o.seed = 5;
  o.pure = false;
  const std::string path = temp_dir() + "/" + name + ".gguf";
  auto st = write_dummy_model(o, path);
  EXPECT_TRUE(st.ok()) << st.error();
  return path;
}

std::vector<float> f32_of(const GgufTensorInfo& t) {
  EXPECT_EQ(t.type, DType::F32) << t.name;
  std::vector<float> v(static_cast<size_t>(t.n_elements));
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

// gpt-oss-20b's config.json, shrunk to the dummy's shape.
json gptoss_config(const ModelShape& s, bool mxfp4) {
  json layer_types = json::array();
  for (int64_t l = 0; l < s.n_layer; ++l) layer_types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
  json cfg = {{"architectures", {"GptOssForCausalLM"}}, {"model_type", "gpt_oss"}, {"attention_bias", true},
              {"hidden_act", "silu"}, {"hidden_size", s.n_embd}, {"intermediate_size", s.n_ff_exp},
              {"num_hidden_layers", s.n_layer}, {"num_attention_heads", s.n_head},
              {"num_key_value_heads", s.n_head_kv}, {"vocab_size", s.n_vocab},
              {"max_position_embeddings", s.n_ctx}, {"initial_context_length", s.rope_orig_ctx},
              {"rms_norm_eps", static_cast<double>(s.rms_eps)}, {"rope_theta", static_cast<double>(s.rope_theta)},
              {"tie_word_embeddings", false}, {"num_local_experts", s.n_expert},
              {"experts_per_token", s.n_expert_used}, {"num_experts_per_tok", s.n_expert_used},
              {"sliding_window", s.n_swa}, {"layer_types", layer_types}, {"swiglu_limit", 7.0},
              {"rope_scaling", {{"rope_type", "yarn"}, {"factor", static_cast<double>(s.rope_factor)},
                                {"original_max_position_embeddings", s.rope_orig_ctx}, {"beta_fast", 32.0},
                                {"beta_slow", 1.0}, {"truncate", false}}},
              {"torch_dtype", "bfloat16"}};
  if (s.head_dim != s.n_embd / s.n_head) cfg["head_dim"] = s.head_dim;
  if (mxfp4)
    cfg["quantization_config"] = {{"quant_method", "mxfp4"},
                                  {"modules_to_not_convert",
                                   {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}}};
  return cfg;
}

// ggml block_mxfp4 (exponent, then byte j = element j | element j + 16 << 4) -> HF's 16 bytes
// (byte k = element 2k | element 2k + 1 << 4) and its exponent.
void mxfp4_block_to_hf(const uint8_t* blk, uint8_t* hf16, uint8_t* scale) {
  auto elem = [blk](int k) { return static_cast<uint8_t>(k < 16 ? blk[1 + k] & 0x0F : blk[1 + k - 16] >> 4); };
  *scale = blk[0];
  for (int k = 0; k < 16; ++k) hf16[k] = static_cast<uint8_t>(elem(2 * k) | (elem(2 * k + 1) << 4));
}

// The dummy as an HF gpt-oss folder. Every tensor but the experts' matrices from `g` (F32); the
// experts' matrices dequantized ([E, H, 2F] / [E, F, H], gate and up columns interleaved) from `g`,
// or, with `mx` (the same dummy with MXFP4 matrices), its MXFP4 blocks as *_blocks / *_scales.
HfTensors gptoss_hf_tensors(const ModelShape& s, const GgufFile& g, const GgufFile* mx) {
  const int64_t E = s.n_expert, F = s.n_ff_exp, H = s.n_embd;
  HfTensors t;
  auto vec = [&](const std::string& name) { return f32_of(*g.find_tensor(name)); };
  auto put = [&](const std::string& hf, const std::string& gg) {
    const GgufTensorInfo& gt = *g.find_tensor(gg);
    t[hf] = {std::vector<int64_t>(gt.ne.rbegin(), gt.ne.rend()), f32_of(gt)};
  };
  put("model.embed_tokens.weight", "token_embd.weight");
  put("model.norm.weight", "output_norm.weight");
  put("lm_head.weight", "output.weight");
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l), b = fmt::format("blk.{}.", l);
    put(p + "input_layernorm.weight", b + "attn_norm.weight");
    put(p + "post_attention_layernorm.weight", b + "post_attention_norm.weight");
    for (auto [hf, gg] : {std::pair{"q_proj", "attn_q"}, std::pair{"k_proj", "attn_k"}, std::pair{"v_proj", "attn_v"},
                          std::pair{"o_proj", "attn_output"}}) {
      put(p + "self_attn." + hf + ".weight", b + gg + ".weight");
      put(p + "self_attn." + hf + ".bias", b + gg + ".bias");
    }
    put(p + "self_attn.sinks", b + "attn_sinks.weight");
    put(p + "mlp.router.weight", b + "ffn_gate_inp.weight");
    put(p + "mlp.router.bias", b + "ffn_gate_inp.bias");
    const std::vector<float> gb = vec(b + "ffn_gate_exps.bias"), ub = vec(b + "ffn_up_exps.bias");
    HfTensor gub{{E, 2 * F}, std::vector<float>(static_cast<size_t>(E * 2 * F))};
    for (int64_t e = 0; e < E; ++e)
      for (int64_t r = 0; r < F; ++r) {
        gub.values[e * 2 * F + 2 * r] = gb[e * F + r];
        gub.values[e * 2 * F + 2 * r + 1] = ub[e * F + r];
      }
    t[p + "mlp.experts.gate_up_proj_bias"] = gub;
    put(p + "mlp.experts.down_proj_bias", b + "ffn_down_exps.bias");
    if (!mx) {  // x @ W: gate_up_proj[e][c][2r (+1)] = gate (up) row r, column c
      const std::vector<float> gw = vec(b + "ffn_gate_exps.weight"), uw = vec(b + "ffn_up_exps.weight");
      const std::vector<float> dw = vec(b + "ffn_down_exps.weight");
      HfTensor gu{{E, H, 2 * F}, std::vector<float>(static_cast<size_t>(E * H * 2 * F))};
      HfTensor dn{{E, F, H}, std::vector<float>(static_cast<size_t>(E * F * H))};
      for (int64_t e = 0; e < E; ++e) {
        for (int64_t r = 0; r < F; ++r)
          for (int64_t c = 0; c < H; ++c) {
            gu.values[(e * H + c) * 2 * F + 2 * r] = gw[(e * F + r) * H + c];
            gu.values[(e * H + c) * 2 * F + 2 * r + 1] = uw[(e * F + r) * H + c];
          }
        for (int64_t r = 0; r < H; ++r)
          for (int64_t c = 0; c < F; ++c) dn.values[(e * F + c) * H + r] = dw[(e * H + r) * F + c];
      }
      t[p + "mlp.experts.gate_up_proj"] = gu;
      t[p + "mlp.experts.down_proj"] = dn;
      continue;
    }
    // MXFP4: HF row 2r (2r + 1) of gate_up is the gate (up) row r; down's rows as they are
    auto blocks_of = [&](const std::string& gg) { return mx->find_tensor(gg)->data; };
    const uint8_t* gq = blocks_of(b + "ffn_gate_exps.weight");
    const uint8_t* uq = blocks_of(b + "ffn_up_exps.weight");
    const uint8_t* dq = blocks_of(b + "ffn_down_exps.weight");
    EXPECT_EQ(mx->find_tensor(b + "ffn_gate_exps.weight")->type, DType::MXFP4);
    const int64_t GH = H / 32, GF = F / 32;
    HfTensor gub_blocks{{E, 2 * F, GH, 16}, {}, "U8", std::vector<uint8_t>(static_cast<size_t>(E * 2 * F * GH * 16))};
    HfTensor gub_scales{{E, 2 * F, GH}, {}, "U8", std::vector<uint8_t>(static_cast<size_t>(E * 2 * F * GH))};
    HfTensor dn_blocks{{E, H, GF, 16}, {}, "U8", std::vector<uint8_t>(static_cast<size_t>(E * H * GF * 16))};
    HfTensor dn_scales{{E, H, GF}, {}, "U8", std::vector<uint8_t>(static_cast<size_t>(E * H * GF))};
    for (int64_t e = 0; e < E; ++e) {
      for (int64_t r = 0; r < F; ++r)
        for (int64_t k = 0; k < GH; ++k)
          for (int half = 0; half < 2; ++half) {
            const uint8_t* src = (half ? uq : gq) + ((e * F + r) * GH + k) * 17;
            const int64_t hr = (e * 2 * F + 2 * r + half) * GH + k;
            mxfp4_block_to_hf(src, &gub_blocks.raw[hr * 16], &gub_scales.raw[hr]);
          }
      for (int64_t r = 0; r < H; ++r)
        for (int64_t k = 0; k < GF; ++k) {
          const int64_t hr = (e * H + r) * GF + k;
          mxfp4_block_to_hf(dq + hr * 17, &dn_blocks.raw[hr * 16], &dn_scales.raw[hr]);
        }
    }
    t[p + "mlp.experts.gate_up_proj_blocks"] = gub_blocks;
    t[p + "mlp.experts.gate_up_proj_scales"] = gub_scales;
    t[p + "mlp.experts.down_proj_blocks"] = dn_blocks;
    t[p + "mlp.experts.down_proj_scales"] = dn_scales;
  }
  return t;
}

std::string gptoss_hf_folder(const ModelShape& s, const GgufFile& g, const GgufFile* mx, const std::string& folder) {
  return write_hf_folder(gptoss_config(s, mx != nullptr), gptoss_hf_tensors(s, g, mx), "F32", /*sharded=*/true, folder);
}

// transformers' convert_moe_packed_tensors: FP4 E2M1 value of each nibble (low nibble first) times
// 2^(scale - 127); one HF row of G blocks.
std::vector<float> hf_mxfp4_row(const uint8_t* blocks, const uint8_t* scales, int64_t G) {
  static const float kFp4[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                 -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  std::vector<float> out;
  for (int64_t g = 0; g < G; ++g)
    for (int k = 0; k < 16; ++k) {
      const uint8_t byte = blocks[g * 16 + k];
      out.push_back(std::ldexp(kFp4[byte & 0x0F], scales[g] - 127));
      out.push_back(std::ldexp(kFp4[byte >> 4], scales[g] - 127));
    }
  return out;
}

GgufFile open_gguf(const std::string& path) {
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f.ok()) << f.error();
  return std::move(f).value();
}

// The dummy's hyper-parameters (as llama.cpp reads them), the same in the converted file.
void expect_same_keys(const GgufFile& got, const GgufFile& want) {
  int n = 0;
  for (const auto& [key, v] : want.metadata()) {
    if (key.rfind("gpt-oss.", 0) != 0) continue;
    ++n;
    const GgufValue* mine = got.find(key);
    ASSERT_NE(mine, nullptr) << key;
    EXPECT_EQ(mine->type, v.type) << key;
    EXPECT_EQ(got.get_number(key), want.get_number(key)) << key;
  }
  EXPECT_GE(n, 15);
}

std::string convert_to(const std::string& dir, const std::string& name, const std::string& outtype = "auto") {
  const std::string out = temp_dir() + "/" + name + ".gguf";
  HfConvertOptions o;
  o.outtype = outtype;
  auto st = convert_hf_to_gguf(dir, out, o);
  EXPECT_TRUE(st.ok()) << st.error();
  return out;
}

}  // namespace

TEST(HfConvertGptOss, DequantizedCheckpointRoundTrip) {
  const ModelShape s = *find_shape("tiny-gpt-oss");
  const std::string dummy = write_dummy(DType::F32, "dummy");
  const GgufFile g = open_gguf(dummy);
  const std::string out = convert_to(gptoss_hf_folder(s, g, nullptr, "hf-bf16-layout"), "converted");
  const GgufFile f = open_gguf(out);
  EXPECT_EQ(f.get_string("general.architecture"), "gpt-oss");
  EXPECT_EQ(f.get_int("general.file_type"), 0);
  expect_same_tensors(f, g);
  expect_same_keys(f, g);
  // rope_scaling's beta_fast / beta_slow, as llama.cpp's converter copies them
  EXPECT_EQ(f.get_number("gpt-oss.rope.scaling.yarn_beta_fast"), 32.0);
  EXPECT_EQ(f.get_number("gpt-oss.rope.scaling.yarn_beta_slow"), 1.0);
  EXPECT_EQ(f.find("gpt-oss.rope.scaling.yarn_attn_factor"), nullptr);

  // and the same logits, position after position
  auto m1 = Model::load(dummy);
  auto m2 = Model::load(out);
  ASSERT_TRUE(m1.ok()) << m1.error();
  ASSERT_TRUE(m2.ok()) << m2.error();
  ReferenceForward r1(*m1, 16), r2(*m2, 16);
  int32_t tok = 1;
  for (int pos = 0; pos < 12; ++pos) {  // past the window of 8
    const std::vector<float> a = r1.forward(tok, pos);
    ASSERT_EQ(a, r2.forward(tok, pos)) << "position " << pos;
    tok = static_cast<int32_t>(std::max_element(a.begin(), a.end()) - a.begin());
  }

  // --outtype bf16: the experts (and every other matrix) rounded to BF16 from the fused layout; the
  // router and the biases stay F32
  const GgufFile h = open_gguf(convert_to(gptoss_hf_folder(s, g, nullptr, "hf-bf16-layout"), "bf16", "bf16"));
  EXPECT_EQ(h.get_int("general.file_type"), 32);
  for (const std::string name : {"blk.1.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight", "blk.0.ffn_down_exps.weight",
                                 "blk.0.attn_q.weight"}) {
    const GgufTensorInfo& got = *h.find_tensor(name);
    ASSERT_EQ(got.type, DType::BF16) << name;
    const std::vector<float> want = f32_of(*g.find_tensor(name));
    for (size_t i = 0; i < want.size(); ++i) {
      uint16_t v;
      std::memcpy(&v, got.data + 2 * i, 2);
      ASSERT_EQ(v, fp32_to_bf16(want[i])) << name << " element " << i;
    }
  }
  for (const std::string name : {"blk.0.ffn_gate_inp.weight", "blk.0.ffn_up_exps.bias", "blk.1.attn_sinks.weight"})
    EXPECT_EQ(h.find_tensor(name)->type, DType::F32) << name;
}

TEST(HfConvertGptOss, Mxfp4CheckpointRoundTrip) {
  const ModelShape s = *find_shape("tiny-gpt-oss");
  const GgufFile g = open_gguf(write_dummy(DType::F32, "dummy"));
  const GgufFile mx = open_gguf(write_dummy(DType::MXFP4, "dummy-mxfp4"));
  const std::string dir = gptoss_hf_folder(s, g, &mx, "hf-mxfp4");
  const std::string out = convert_to(dir, "converted");
  const GgufFile f = open_gguf(out);
  EXPECT_EQ(f.get_int("general.file_type"), 38);  // MOSTLY_MXFP4_MOE, as llama.cpp's converter says
  // the expert matrices: the MXFP4 dummy's blocks, bit for bit; everything else the F32 dummy's
  expect_same_tensors(f, g, &mx, [](const std::string& n) { return n.find("_exps.weight") != std::string::npos; });
  expect_same_keys(f, g);
  // llama.cpp writes the repacked MXFP4 tensors first
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(f.tensors()[i].type, DType::MXFP4) << f.tensors()[i].name;

  // the converted experts decode to the HF blocks' values (transformers' decode), row for row
  auto hf = SafetensorsModel::open(dir);
  ASSERT_TRUE(hf.ok()) << hf.error();
  const int64_t E = s.n_expert, F = s.n_ff_exp, H = s.n_embd;
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = fmt::format("model.layers.{}.mlp.experts.", l);
    auto data = [&](const std::string& n) { return hf->find(p + n)->tensor->data; };
    for (auto [kind, R, cols] : {std::tuple{"gate", 2 * F, H}, std::tuple{"up", 2 * F, H}, std::tuple{"down", H, F}}) {
      const std::string gg = fmt::format("blk.{}.ffn_{}_exps.weight", l, kind);
      const GgufTensorInfo& t = *f.find_tensor(gg);
      const std::string hfname = std::string(kind) == "down" ? "down_proj" : "gate_up_proj";
      const uint8_t* blocks = data(hfname + "_blocks");
      const uint8_t* scales = data(hfname + "_scales");
      const int64_t rows = std::string(kind) == "down" ? H : F, G = cols / 32;
      std::vector<float> got(static_cast<size_t>(cols));
      for (int64_t e = 0; e < E; ++e)
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t hr = e * R + (std::string(kind) == "down" ? r : 2 * r + (std::string(kind) == "up"));
          dequantize_row(DType::MXFP4, t.data + (e * rows + r) * G * 17, got.data(), cols);
          ASSERT_EQ(got, hf_mxfp4_row(blocks + hr * G * 16, scales + hr * G, G)) << gg << " expert " << e << " row " << r;
        }
    }
  }

  // it loads and generates: the batched forward (MXFP4 kernels) follows the reference
  auto m = Model::load(out);
  ASSERT_TRUE(m.ok()) << m.error();
  const ModelConfig& c = (*m)->config();
  EXPECT_EQ((*m)->weights().layers[1].gate_exps[0].type, DType::MXFP4);
  ThreadPool pool(2);
  Forward fwd(*m, &pool);
  auto kv = KvStorage::create(KvLayout{c.n_layer, c.n_head_kv, c.head_dim, 4, 16, DType::F32});
  ASSERT_TRUE(kv.ok());
  ReferenceForward ref(*m, 64);
  SeqSlice seq;
  for (int b = 0; b < 8; ++b) seq.block_table.push_back(b);
  std::vector<float> logits;
  int32_t tok = 1;
  for (int p = 0; p < 12; ++p) {
    const auto& want = ref.forward(tok, p);
    ForwardBatch batch;
    batch.tokens = {tok};
    seq.n_tokens = 1;
    seq.pos_begin = p;
    batch.seqs = {seq};
    fwd.run(batch, *kv, logits);
    double num = 0, den = 0;
    for (int64_t v = 0; v < c.n_vocab; ++v) {
      ASSERT_TRUE(std::isfinite(logits[v]));
      num = std::max<double>(num, std::abs(logits[v] - want[v]));
      den = std::max<double>(den, std::abs(want[v]));
    }
    ASSERT_LT(num / den, 3e-2) << "pos " << p;  // activations quantized to 8 bits for the 4-bit products
    tok = static_cast<int32_t>(std::max_element(want.begin(), want.end()) - want.begin());
  }

  // --outtype f16: the other matrices F16, the experts still MXFP4, the file type still MXFP4_MOE
  const GgufFile h = open_gguf(convert_to(dir, "f16", "f16"));
  EXPECT_EQ(h.get_int("general.file_type"), 38);
  EXPECT_EQ(h.find_tensor("blk.0.ffn_up_exps.weight")->type, DType::MXFP4);
  EXPECT_EQ(h.find_tensor("blk.0.attn_k.weight")->type, DType::F16);
  // the size estimate before loading counts the MXFP4 blocks and scales as they are
  for (const auto& [dtype, file] : {std::pair{"auto", &f}, std::pair{"f16", &h}}) {
    ModelLoadOptions o;
    o.dtype = dtype;
    auto est = estimate_model_bytes(dir, o);
    ASSERT_TRUE(est.ok()) << est.error();
    double bytes = 0;
    for (const auto& t : file->tensors()) bytes += static_cast<double>(t.nbytes);
    // (within 5%, as ModelSource's: the 2-D tensors kept F32, router and expert biases, count at
    // the weight type; with the uint8 blocks counted as weights of that type it was 1.3-1.6x here)
    EXPECT_NEAR(static_cast<double>(*est), bytes, 0.05 * bytes) << dtype;
  }
}

TEST(HfConvertGptOss, Errors) {
  const ModelShape s = *find_shape("tiny-gpt-oss");
  const GgufFile g = open_gguf(write_dummy(DType::F32, "dummy"));
  const GgufFile mx = open_gguf(write_dummy(DType::MXFP4, "dummy-mxfp4"));
  const std::string dir = gptoss_hf_folder(s, g, &mx, "hf-mxfp4");
  auto error_of = [&](const std::string& d) {
    auto st = convert_hf_to_gguf(d, temp_dir() + "/err.gguf", HfConvertOptions{});
    return st.ok() ? std::string("<converted OK>") : st.error();
  };
  auto with_config = [&](const std::function<void(json&)>& edit) {
    json cfg = gptoss_config(s, true);
    edit(cfg);
    write_text(dir + "/config.json", cfg.dump());
    return error_of(dir);
  };
  EXPECT_ERROR_HAS(with_config([](json& c) { c["layer_types"][0] = "full_attention"; }),
                   "layer_types[0] is \"full_attention\", expected \"sliding_attention\"");
  EXPECT_ERROR_HAS(with_config([](json& c) { c.erase("sliding_window"); }), "missing required field \"sliding_window\"");
  EXPECT_ERROR_HAS(with_config([](json& c) { c["tie_word_embeddings"] = true; }), "needs its own output matrix");
  EXPECT_ERROR_HAS(with_config([](json& c) { c["quantization_config"]["quant_method"] = "bitsandbytes"; }), "quantized with bitsandbytes");
  EXPECT_ERROR_HAS(with_config([](json& c) { c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}}; }),
                   "gpt-oss supports yarn rope_scaling only");
  EXPECT_EQ(with_config([](json&) {}), "<converted OK>");

  // MXFP4 is OpenAI's format for gpt-oss; for another family it stays refused
  json qwen = tiny_llama_config();
  qwen["quantization_config"] = {{"quant_method", "mxfp4"}};
  EXPECT_ERROR_HAS(error_of(write_hf_folder(qwen, hf_weights(qwen), "F32", false, "llama-mxfp4")), "quantized with MXFP4");

  // tensors: MXFP4 blocks without scales, scales of the wrong dtype, MXFP4 and dequantized experts
  // for one layer, misshapen blocks
  const HfTensors t = gptoss_hf_tensors(s, g, &mx);
  const json cfg = gptoss_config(s, true);
  const std::string p = "model.layers.1.mlp.experts.";
  auto tensor_error = [&](const std::function<void(HfTensors&)>& edit) {
    HfTensors u = t;
    edit(u);
    return error_of(write_hf_folder(cfg, u, "F32", false, "hf-edited"));
  };
  EXPECT_ERROR_HAS(tensor_error([&](HfTensors& u) { u.erase(p + "down_proj_scales"); }),
                   "MXFP4 blocks without their 'model.layers.1.mlp.experts.down_proj_scales'");
  EXPECT_ERROR_HAS(tensor_error([&](HfTensors& u) { u.erase(p + "gate_up_proj_blocks"); }),
                   "MXFP4 scales without their 'model.layers.1.mlp.experts.gate_up_proj_blocks'");
  EXPECT_ERROR_HAS(tensor_error([&](HfTensors& u) {
                     auto& sc = u[p + "down_proj_scales"];
                     sc.values.assign(sc.raw.begin(), sc.raw.end());
                     sc.raw_dtype.clear();
                     sc.raw.clear();
                   }),
                   "MXFP4 scales must be U8, not F32");
  EXPECT_ERROR_HAS(tensor_error([&](HfTensors& u) {
                     const auto d = gptoss_hf_tensors(s, g, nullptr);
                     u[p + "down_proj"] = d.at(p + "down_proj");
                   }),
                   "'blk.1.ffn_down_exps.weight' is given twice");
  EXPECT_ERROR_HAS(tensor_error([&](HfTensors& u) { u[p + "gate_up_proj_blocks"].shape = {8, 64, 4, 16}; }),
                   "does not match config.json (expected [8, 128, 2, 16])");
  EXPECT_ERROR_HAS(tensor_error([&](HfTensors& u) { u.erase(p + "gate_up_proj_bias"); }),
                   "missing tensor 'blk.1.ffn_gate_exps.bias'");
}
