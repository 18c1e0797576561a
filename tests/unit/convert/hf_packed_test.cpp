// GPTQ, AWQ and compressed-tensors checkpoints (config.json's quantization_config; convert/hf_packed.h)
// convert to the weights they describe. The folders are packed here the way AutoGPTQ's, AutoAWQ's and
// compressed-tensors' packers write them (each from its own description: GPTQ along the input with
// zero points minus one in the v1 format, AWQ's 0 2 4 6 1 3 5 7 nibble order, compressed-tensors'
// rows and zero points along the output), from random codes, scales and zero points; the reference
// is the same model with those weights written out in F32. 4-bit groups of whole blocks come out as
// Q4_0 (symmetric: the same values exactly) or Q4_1 (within the fp16 rounding of the offset);
// act-order, 2- and 8-bit come out dequantized, bit for bit the reference's F32. Misfit tensors are
// refused naming the tensor; the CLI serves such a folder as it is.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

#include "convert/hf_model.h"
#include "convert/model_source.h"
#include "core/fp16.h"
#include "formats/gguf.h"
#include "hf_folder.h"
#include "quant/quant.h"

using namespace tmill;
using namespace tmill::test;
using nlohmann::json;

namespace {

enum class Fmt { GptqV1, GptqV2, Awq, Ct };

struct PackSpec {
  Fmt fmt;
  int bits = 4;
  int64_t group = 32;  // 0: per row
  bool sym = true;
  bool act_order = false;
};

HfTensor raw_i32(std::vector<int64_t> shape, const std::vector<uint32_t>& words) {
  HfTensor t;
  t.shape = std::move(shape);
  t.raw_dtype = "I32";
  t.raw.resize(words.size() * 4);
  std::memcpy(t.raw.data(), words.data(), t.raw.size());
  return t;
}

HfTensor raw_f16(std::vector<int64_t> shape, const std::vector<float>& v) {
  HfTensor t;
  t.shape = std::move(shape);
  t.raw_dtype = "F16";
  t.raw = encode_floats(v, "F16");
  return t;
}

// Every attention / MLP matrix of `ref` replaced by its packed tensors; `ref` rewritten to the values
// they stand for (scale * (q - zero), computed in float as any dequantizer does).
HfTensors make_packed(HfTensors& ref, const PackSpec& p, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t P = 32 / p.bits;
  const uint32_t maxq = (1u << p.bits) - 1;
  HfTensors out = ref;
  for (auto& [name, t] : ref) {
    if (t.shape.size() != 2 || name.find("layers.") == std::string::npos || !name.ends_with("_proj.weight")) continue;
    const int64_t R = t.shape[0], C = t.shape[1];
    const int64_t gs = p.group > 0 ? p.group : C, G = (C + gs - 1) / gs;
    std::vector<int32_t> g_idx(static_cast<size_t>(C));
    std::vector<int64_t> order(static_cast<size_t>(C));
    std::iota(order.begin(), order.end(), 0);
    if (p.act_order) std::shuffle(order.begin(), order.end(), rng);  // GPTQ's columns in activation order
    for (int64_t i = 0; i < C; ++i) g_idx[static_cast<size_t>(order[static_cast<size_t>(i)])] = static_cast<int32_t>(i / gs);
    std::vector<uint32_t> q(static_cast<size_t>(R * C)), z(static_cast<size_t>(R * G));
    std::vector<float> s(static_cast<size_t>(R * G));
    for (auto& v : q) v = rng() & maxq;
    // (GPTQ v1 stores zero - 1 in `bits` bits: a zero of 0 would read back as 2^bits, as in every reader)
    for (auto& v : z) v = p.sym ? 1u << (p.bits - 1) : p.fmt == Fmt::GptqV1 ? 1 + rng() % maxq : rng() & maxq;
    for (auto& v : s) v = static_cast<float>(1 + rng() % 200) / 4096.0f;  // (fp16 holds them)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t k = 0; k < C; ++k) {
        const size_t gi = static_cast<size_t>(r * G + g_idx[static_cast<size_t>(k)]);
        t.values[static_cast<size_t>(r * C + k)] =
            s[gi] * static_cast<float>(static_cast<int32_t>(q[static_cast<size_t>(r * C + k)]) - static_cast<int32_t>(z[gi]));
      }
    const std::string base = name.substr(0, name.size() - 7);
    out.erase(name);
    auto at = [&](int64_t r, int64_t k) { return q[static_cast<size_t>(r * C + k)]; };
    auto zero = [&](int64_t r, int64_t g) { return z[static_cast<size_t>(r * G + g)]; };
    std::vector<float> s_gr(static_cast<size_t>(G * R));  // scales [G, R] (GPTQ, AWQ)
    for (int64_t g = 0; g < G; ++g)
      for (int64_t r = 0; r < R; ++r) s_gr[static_cast<size_t>(g * R + r)] = s[static_cast<size_t>(r * G + g)];
    if (p.fmt == Fmt::GptqV1 || p.fmt == Fmt::GptqV2) {
      std::vector<uint32_t> qw(static_cast<size_t>(C / P * R)), qz(static_cast<size_t>(G * R / P));
      for (int64_t kw = 0; kw < C / P; ++kw)  // AutoGPTQ: qweight[i] |= intweight[j] << (bits * (j - row))
        for (int64_t r = 0; r < R; ++r)
          for (int64_t i = 0; i < P; ++i) qw[static_cast<size_t>(kw * R + r)] |= at(r, kw * P + i) << (p.bits * i);
      for (int64_t g = 0; g < G; ++g)  // zeros - 1 in v1 (the format's quirk), as they are in v2
        for (int64_t r = 0; r < R; ++r)
          qz[static_cast<size_t>(g * (R / P) + r / P)] |=
              ((zero(r, g) - (p.fmt == Fmt::GptqV1 ? 1 : 0)) & ((1u << p.bits) - 1)) << (p.bits * (r % P));
      out[base + ".qweight"] = raw_i32({C / P, R}, qw);
      out[base + ".qzeros"] = raw_i32({G, R / P}, qz);
      out[base + ".scales"] = raw_f16({G, R}, s_gr);
      std::vector<uint32_t> gw(g_idx.begin(), g_idx.end());
      out[base + ".g_idx"] = raw_i32({C}, gw);
    } else if (p.fmt == Fmt::Awq) {
      constexpr int kOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // AutoAWQ's pack order: nibble i holds output kOrder[i]
      std::vector<uint32_t> qw(static_cast<size_t>(C * R / 8)), qz(static_cast<size_t>(G * R / 8));
      for (int64_t k = 0; k < C; ++k)
        for (int64_t rw = 0; rw < R / 8; ++rw)
          for (int i = 0; i < 8; ++i) qw[static_cast<size_t>(k * (R / 8) + rw)] |= at(rw * 8 + kOrder[i], k) << (4 * i);
      for (int64_t g = 0; g < G; ++g)
        for (int64_t rw = 0; rw < R / 8; ++rw)
          for (int i = 0; i < 8; ++i) qz[static_cast<size_t>(g * (R / 8) + rw)] |= zero(rw * 8 + kOrder[i], g) << (4 * i);
      out[base + ".qweight"] = raw_i32({C, R / 8}, qw);
      out[base + ".qzeros"] = raw_i32({G, R / 8}, qz);
      out[base + ".scales"] = raw_f16({G, R}, s_gr);
    } else {  // compressed-tensors: rows packed along the input, zero points along the output
      const int64_t W = (C + P - 1) / P;
      std::vector<uint32_t> qw(static_cast<size_t>(R * W)), qz(static_cast<size_t>((R + P - 1) / P * G));
      for (int64_t r = 0; r < R; ++r)
        for (int64_t k = 0; k < C; ++k) qw[static_cast<size_t>(r * W + k / P)] |= at(r, k) << (p.bits * (k % P));
      for (int64_t r = 0; r < R; ++r)
        for (int64_t g = 0; g < G; ++g) qz[static_cast<size_t>((r / P) * G + g)] |= zero(r, g) << (p.bits * (r % P));
      out[base + ".weight_packed"] = raw_i32({R, W}, qw);
      out[base + ".weight_scale"] = raw_f16({R, G}, s);
      HfTensor shape;
      shape.shape = {2};
      shape.raw_dtype = "I64";
      const int64_t dims[2] = {R, C};
      shape.raw.resize(16);
      std::memcpy(shape.raw.data(), dims, 16);
      out[base + ".weight_shape"] = shape;
      if (!p.sym) out[base + ".weight_zero_point"] = raw_i32({(R + P - 1) / P, G}, qz);
      if (p.act_order) {
        std::vector<uint32_t> gw(g_idx.begin(), g_idx.end());
        out[base + ".weight_g_idx"] = raw_i32({C}, gw);
      }
    }
  }
  return out;
}

json packed_config(json cfg, const PackSpec& p) {
  if (p.fmt == Fmt::GptqV1 || p.fmt == Fmt::GptqV2)
    cfg["quantization_config"] = {{"quant_method", "gptq"}, {"bits", p.bits}, {"group_size", p.group > 0 ? p.group : -1},
                                  {"desc_act", p.act_order}, {"sym", p.sym},
                                  {"checkpoint_format", p.fmt == Fmt::GptqV1 ? "gptq" : "gptq_v2"}};
  else if (p.fmt == Fmt::Awq)
    cfg["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}, {"group_size", p.group > 0 ? p.group : -1},
                                  {"version", "gemm"}, {"zero_point", !p.sym}};
  else
    cfg["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", "pack-quantized"},
        {"config_groups",
         {{"group_0",
           {{"targets", {"Linear"}},
            {"weights",
             {{"type", "int"}, {"num_bits", p.bits}, {"symmetric", p.sym},
              {"strategy", p.group > 0 ? "group" : "channel"}, {"group_size", p.group > 0 ? json(p.group) : json()},
              {"actorder", p.act_order ? json("group") : json()}}}}}}},
        {"ignore", {"lm_head"}}};
  return cfg;
}

// Dims of whole Q4 blocks: hidden 64, FFN 128, 4 heads of 16, 2 kv heads (rows of 32 for k / v).
json block_config() {
  json cfg = tiny_llama_config();
  cfg["hidden_size"] = 64;
  cfg["intermediate_size"] = 128;
  return cfg;
}

std::vector<float> values_of(const GgufTensorInfo& t) {
  std::vector<float> v(static_cast<size_t>(t.n_elements));
  dequantize_row(t.type, t.data, v.data(), t.n_elements);
  return v;
}

std::string convert_error(const std::string& dir) {
  auto st = convert_hf_to_gguf(dir, temp_dir() + "/out.gguf", HfConvertOptions{"auto", "", nullptr});
  return st.ok() ? "<converted OK>" : st.error();
}

// Converts the packed folder and the reference (F32) and compares tensor by tensor: the packed
// matrices as `want_type` (within `tol` of the reference; 0: bit for bit), the rest identical.
void expect_converts(const json& cfg, const PackSpec& p, DType want_type, float tol, const std::string& outtype = "f32") {
  HfTensors ref = hf_weights(cfg);
  const HfTensors packed = make_packed(ref, p, 11 + static_cast<uint32_t>(p.fmt) * 7 + static_cast<uint32_t>(p.bits));
  auto want = convert(write_hf_folder(cfg, ref, "F32", false, "ref"), "f32");
  auto got = convert(write_hf_folder(packed_config(cfg, p), packed, "F32", true, "packed"), outtype);
  ASSERT_EQ(got.tensors().size(), want.tensors().size());  // (every packed part consumed)
  int matrices = 0;
  for (const auto& t : want.tensors()) {
    const GgufTensorInfo* u = got.find_tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    ASSERT_EQ(u->ne, t.ne) << t.name;
    const bool packed_matrix = t.ne.size() >= 2 && t.name.find("blk.") == 0 && t.name.find("ffn_gate_inp") == std::string::npos;
    if (!packed_matrix) {
      ASSERT_EQ(u->nbytes, t.nbytes) << t.name;
      EXPECT_EQ(std::memcmp(t.data, u->data, t.nbytes), 0) << t.name;
      continue;
    }
    ++matrices;
    EXPECT_EQ(u->type, want_type) << t.name;
    const std::vector<float> a = values_of(t), b = values_of(*u);
    float worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    if (tol == 0) EXPECT_EQ(a, b) << t.name;  // (q / k rows permuted with their groups)
    else EXPECT_LE(worst, tol) << t.name;
  }
  EXPECT_GT(matrices, 0);
}

}  // namespace

// 4-bit, groups of whole blocks: symmetric -> Q4_0 with the very values; zero points -> Q4_1.
TEST(HfPacked, FourBitGroupsBecomeQ4Blocks) {
  // Q4_1's offset m = -scale * zero is rounded to fp16: |m| <= 15 * 200 / 4096 < 1, half an ulp <= 2^-12
  const float q41_tol = std::ldexp(1.0f, -12) * 1.01f;
  for (const Fmt f : {Fmt::GptqV1, Fmt::GptqV2, Fmt::Ct}) {
    SCOPED_TRACE(static_cast<int>(f));
    expect_converts(block_config(), {f, 4, 32, true}, DType::Q4_0, 0);
    expect_converts(block_config(), {f, 4, 64, false}, DType::Q4_1, q41_tol);
  }
  expect_converts(block_config(), {Fmt::Awq, 4, 32, false}, DType::Q4_1, q41_tol);
  expect_converts(block_config(), {Fmt::Awq, 4, 0, true}, DType::Q4_0, 0);  // (one group per row)
}

// Act-order (a block across groups), 8 and 2 bits, groups of 8: dequantized, bit for bit in F32.
TEST(HfPacked, OtherLayoutsAreDequantized) {
  expect_converts(block_config(), {Fmt::GptqV1, 4, 32, true, true}, DType::F32, 0);
  expect_converts(block_config(), {Fmt::Ct, 4, 32, false, true}, DType::F32, 0);
  expect_converts(block_config(), {Fmt::GptqV1, 8, 0, false}, DType::F32, 0);
  expect_converts(block_config(), {Fmt::GptqV2, 2, 16, false}, DType::F32, 0);
  expect_converts(block_config(), {Fmt::Ct, 8, 32, true}, DType::F32, 0);
  expect_converts(tiny_llama_config(), {Fmt::GptqV1, 4, 8, false}, DType::F32, 0);  // (rows of 16 or 24)
  expect_converts(tiny_llama_config(), {Fmt::Awq, 4, 8, false}, DType::F32, 0);
  expect_converts(tiny_llama_config(), {Fmt::Ct, 4, 0, true}, DType::F32, 0);
  // auto: dequantized as the checkpoint's other weights' type
  HfTensors ref = hf_weights(block_config());
  const PackSpec p{Fmt::GptqV1, 8, 0, false};
  auto bf = convert(write_hf_folder(packed_config(block_config(), p), make_packed(ref, p, 3), "BF16", false, "bf"));
  EXPECT_EQ(bf.find_tensor("blk.0.attn_q.weight")->type, DType::BF16);
}

// A mixture of experts: each expert's packed matrices stacked, Q4_0 when all fit.
TEST(HfPacked, ExpertsStackAsOneType) {
  json cfg = block_config();
  cfg["architectures"] = {"Qwen3MoeForCausalLM"};
  cfg["num_experts"] = 4;
  cfg["num_experts_per_tok"] = 2;
  cfg["moe_intermediate_size"] = 32;
  expect_converts(cfg, {Fmt::GptqV1, 4, 32, true}, DType::Q4_0, 0);
  expect_converts(cfg, {Fmt::Awq, 4, 32, true, false}, DType::Q4_0, 0);
  // one expert's matrix in act-order: the stacked tensor is dequantized, all experts alike
  HfTensors ref = hf_weights(cfg);
  HfTensors packed = make_packed(ref, {Fmt::GptqV1, 4, 32, true}, 5);
  const std::string x = "model.layers.0.mlp.experts.2.up_proj.g_idx";
  std::vector<uint32_t> g(64);
  for (int k = 0; k < 64; ++k) g[static_cast<size_t>(k)] = static_cast<uint32_t>(k % 2);  // (blocks span both groups)
  packed[x] = raw_i32({64}, g);
  auto f = convert(write_hf_folder(packed_config(cfg, {Fmt::GptqV1, 4, 32, true}), packed, "F32", false, "moe-mixed"), "f16");
  EXPECT_EQ(f.find_tensor("blk.0.ffn_up_exps.weight")->type, DType::F16);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_gate_exps.weight")->type, DType::Q4_0);
}

TEST(HfPacked, MisfitsAreRefusedNamingTheTensor) {
  HfTensors ref = hf_weights(block_config());
  const PackSpec p{Fmt::GptqV1, 4, 32, true};
  const HfTensors packed = make_packed(ref, p, 9);
  const json cfg = packed_config(block_config(), p);
  const std::string q = "model.layers.0.self_attn.q_proj";
  struct Case {
    std::function<void(HfTensors&)> edit;
    std::string phrase;
  };
  for (const Case& c : std::vector<Case>{
           {[&](HfTensors& t) { t.erase(q + ".scales"); }, "packed weights without their scales"},
           {[&](HfTensors& t) { t.erase(q + ".qzeros"); }, "GPTQ weights without their"},
           {[&](HfTensors& t) { t.erase(q + ".qweight"); }, "without its packed weight ('" + std::string(q) + ".qweight')"},
           {[&](HfTensors& t) { t[q + ".qweight"].shape = {64, 8}; }, "qweight of shape [64, 8], expected [8, 64]"},
           {[&](HfTensors& t) { t[q + ".scales"] = raw_f16({3, 64}, std::vector<float>(192, 1)); }, "scales of shape [3, 64]"},
           {[&](HfTensors& t) { t[q + ".g_idx"] = raw_i32({64}, std::vector<uint32_t>(64, 7)); }, "column 0 is in group 7, of 2 groups"},
           {[&](HfTensors& t) { t[q + ".qweight"].raw_dtype = "F32"; }, "qweight must be I32, not F32"},
           {[&](HfTensors& t) { t["model.layers.0.input_layernorm.qweight"] = raw_i32({8, 64}, std::vector<uint32_t>(512)); },
            "which is no matrix"}}) {
    SCOPED_TRACE(c.phrase);
    HfTensors t = packed;
    c.edit(t);
    EXPECT_ERROR_HAS(convert_error(write_hf_folder(cfg, t, "F32", false, "misfit")), c.phrase);
  }
  // the packed tensors without config.json saying so: refused as before, naming the format
  EXPECT_ERROR_HAS(convert_error(write_hf_folder(block_config(), packed, "F32", false, "unsaid")),
                   "the weights are quantized: GPTQ");
}

// Older AutoGPTQ / AutoAWQ folders keep their settings in quantize_config.json / quant_config.json
// (config.json has no quantization_config): read from there, as vLLM does.
TEST(HfPacked, SettingsFromQuantizeConfigJson) {
  for (const Fmt f : {Fmt::GptqV1, Fmt::Awq}) {
    SCOPED_TRACE(static_cast<int>(f));
    const PackSpec p{f, 4, 32, true};
    HfTensors ref = hf_weights(block_config());
    const HfTensors packed = make_packed(ref, p, 13);
    const std::string dir = write_hf_folder(block_config(), packed, "F32", false, "legacy");
    json q = packed_config(block_config(), p)["quantization_config"];
    if (f == Fmt::Awq) {  // AutoAWQ's own spelling, without quant_method
      q = {{"zero_point", true}, {"q_group_size", 32}, {"w_bit", 4}, {"version", "GEMM"}};
    } else {
      q.erase("quant_method");
    }
    write_text(dir + (f == Fmt::Awq ? "/quant_config.json" : "/quantize_config.json"), q.dump());
    auto got = convert(dir);
    EXPECT_EQ(got.find_tensor("blk.0.attn_q.weight")->type, DType::Q4_0);
    auto want = convert(write_hf_folder(block_config(), ref, "F32", false, "ref"), "f32");
    const GgufTensorInfo* a = want.find_tensor("blk.1.ffn_down.weight");
    const GgufTensorInfo* b = got.find_tensor("blk.1.ffn_down.weight");
    EXPECT_EQ(values_of(*a), values_of(*b));
  }
}

// The CLI loads a GPTQ folder as it is (also with vLLM's --quantization gptq), as `convert` writes it.
TEST(HfPacked, GenerateFromAGptqFolder) {
  const json cfg = {{"architectures", {"Qwen3ForCausalLM"}}, {"hidden_size", 32}, {"intermediate_size", 64},
                    {"num_hidden_layers", 1}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                    {"head_dim", 8}, {"vocab_size", 151936}, {"max_position_embeddings", 4096},
                    {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000}, {"tie_word_embeddings", true},
                    {"torch_dtype", "float16"}};
  const PackSpec p{Fmt::GptqV1, 4, 32, true};
  HfTensors ref = hf_weights(cfg);
  const std::string dir = write_hf_folder(packed_config(cfg, p), make_packed(ref, p, 21), "F16", false, "gptq-qwen3");
  const std::string src = source_path("tests/data/tokenizers/hf/qwen3");
  auto cp = run_command("gzip -dc '" + src + "/tokenizer.json.gz' > '" + dir + "/tokenizer.json' && cp '" + src +
                        "/tokenizer_config.json' '" + dir + "/'");
  ASSERT_EQ(cp.exit_code, 0) << cp.err;
  const std::string bin = "'" + tokenmill_binary() + "'";
  auto greedy = [&](const std::string& model_args) {
    auto r = run_command(bin + " generate " + model_args +
                         " --prompt 'The capital of France is' --temperature 0 --max-tokens 8 --ignore-eos --json "
                         "--max-model-len 128 --kv-cache-memory 16MiB");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto j = json::parse(r.out, nullptr, false);
    return j.is_discarded() ? json() : j["tokens"];
  };
  const json tokens = greedy("--model '" + dir + "'");
  ASSERT_EQ(tokens.size(), 8u);
  EXPECT_EQ(greedy("--model '" + dir + "' --quantization gptq"), tokens);
  auto conv = run_command(bin + " convert '" + dir + "' -o '" + dir + "/x.gguf'");
  ASSERT_EQ(conv.exit_code, 0) << conv.err;
  auto f = GgufFile::open(dir + "/x.gguf");
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->find_tensor("blk.0.ffn_down.weight")->type, DType::Q4_0);
  EXPECT_EQ(f->find_tensor("token_embd.weight")->type, DType::F16);
  uint64_t data_bytes = 0;  // memory planning sizes the folder as converted (Q4_0), not as its safetensors
  for (const GgufTensorInfo& t : f->tensors()) data_bytes += t.nbytes;
  auto estimate = estimate_model_bytes(dir, ModelLoadOptions{});
  ASSERT_TRUE(estimate.ok()) << estimate.error();
  EXPECT_EQ(*estimate, data_bytes);
  EXPECT_EQ(greedy("--model '" + dir + "/x.gguf'"), tokens);
  // --quantization re-quantizes the Q4_0 matrices like any other weights
  const json q8 = greedy("--model '" + dir + "' --quantization q8_0");
  EXPECT_EQ(q8.size(), 8u);
  EXPECT_EQ(greedy("--model '" + dir + "/x.gguf' --quantization q8_0"), q8);
  auto awq = run_command(bin + " generate --model '" + dir + "' --quantization awq --prompt x --max-tokens 1");
  EXPECT_EQ(awq.exit_code, 1);
  EXPECT_ERROR_HAS(awq.err, "is no AWQ checkpoint");
}
