// FP8 checkpoints (config.json quantization_config: quant_method "fp8" with weight_block_size, or
// "compressed-tensors" with 8-bit float weights), and compressed-tensors' INT8 ones (int-quantized,
// scales per row or tensor), convert to their dequantized weights: a folder of
// F8_E4M3 matrices with scales per tensor, per row and per block gives, bit for bit, the GGUF of the
// same model whose F32 weights are those products; its scale tensors are consumed, activation scales
// skipped; FP8 without its scale, a scale of the wrong shape, or FP8 outside the matrices are refused.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "convert/hf_model.h"
#include "core/fp16.h"
#include "formats/gguf.h"
#include "hf_folder.h"

using namespace tmill;
using namespace tmill::test;
using nlohmann::json;

namespace {

enum class ScaleKind { Tensor, Row, Block };

// The FP8 folder's tensors: every attention / MLP matrix of `ref` replaced by random E4M3 codes and a
// scale of `kind` (blocks of b0 x b1: `_scale_inv`), with `ref` rewritten to the dequantized values
// (code x scale in float, as the converter computes them) and an input_scale beside each.
HfTensors make_fp8(HfTensors& ref, ScaleKind kind, int64_t b0, int64_t b1, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> sd(0.01f, 0.2f);
  HfTensors out = ref;
  for (auto& [name, t] : ref) {
    if (t.shape.size() != 2 || name.find("layers.") == std::string::npos || !name.ends_with("_proj.weight")) continue;
    const int64_t rows = t.shape[0], cols = t.shape[1];
    std::vector<uint8_t> codes(static_cast<size_t>(rows * cols));
    for (auto& c : codes) {
      do c = static_cast<uint8_t>(rng()); while ((c & 0x7f) == 0x7f);  // (not NaN)
    }
    std::vector<int64_t> sshape;
    std::vector<float> scale;
    const int64_t br = (rows + b0 - 1) / b0, bc = (cols + b1 - 1) / b1;
    if (kind == ScaleKind::Tensor) sshape = {1};
    else if (kind == ScaleKind::Row) sshape = {rows, 1};
    else sshape = {br, bc};
    size_t n = 1;
    for (int64_t d : sshape) n *= static_cast<size_t>(d);
    for (size_t i = 0; i < n; ++i) scale.push_back(sd(rng));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float s = kind == ScaleKind::Tensor ? scale[0]
                        : kind == ScaleKind::Row  ? scale[static_cast<size_t>(r)]
                                                  : scale[static_cast<size_t>((r / b0) * bc + c / b1)];
        t.values[static_cast<size_t>(r * cols + c)] = fp8_e4m3_to_fp32(codes[static_cast<size_t>(r * cols + c)]) * s;
      }
    HfTensor q;
    q.shape = t.shape;
    q.raw_dtype = "F8_E4M3";
    q.raw = codes;
    out[name] = q;
    out[name + (kind == ScaleKind::Block ? "_scale_inv" : "_scale")] = HfTensor{sshape, scale};
    out[name.substr(0, name.size() - 7) + ".input_scale"] = HfTensor{{1}, {0.5f}};
  }
  return out;
}

json fp8_config(ScaleKind kind, int64_t b0, int64_t b1) {
  json cfg = tiny_llama_config();
  if (kind == ScaleKind::Block) {
    cfg["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {b0, b1}}};
  } else {
    cfg["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", "float-quantized"},
        {"config_groups",
         {{"group_0",
           {{"targets", {"Linear"}},
            {"weights", {{"type", "float"}, {"num_bits", 8}, {"strategy", kind == ScaleKind::Row ? "channel" : "tensor"}}}}}}}};
  }
  return cfg;
}

std::string convert_error(const std::string& dir) {
  auto st = convert_hf_to_gguf(dir, temp_dir() + "/out.gguf", HfConvertOptions{"auto", "", nullptr});
  return st.ok() ? "<converted OK>" : st.error();
}

}  // namespace

TEST(HfFp8, CheckpointsConvertToTheirDequantizedWeights) {
  for (const ScaleKind kind : {ScaleKind::Tensor, ScaleKind::Row, ScaleKind::Block}) {
    SCOPED_TRACE(static_cast<int>(kind));
    const int64_t b0 = 8, b1 = 12;  // (16 x 16 and 16 x 24 matrices: partial blocks too)
    HfTensors ref = hf_weights(tiny_llama_config());
    const HfTensors fp8 = make_fp8(ref, kind, b0, b1, 7 + static_cast<uint32_t>(kind));
    auto want = convert(write_hf_folder(tiny_llama_config(), ref, "F32", false, "ref"), "f32");
    auto got = convert(write_hf_folder(fp8_config(kind, b0, b1), fp8, "F32", kind == ScaleKind::Row, "fp8"), "f32");
    ASSERT_EQ(got.tensors().size(), want.tensors().size());  // scales consumed, input scales skipped
    for (const auto& t : want.tensors()) {
      const GgufTensorInfo* u = got.find_tensor(t.name);
      ASSERT_NE(u, nullptr) << t.name;
      ASSERT_EQ(u->nbytes, t.nbytes) << t.name;
      EXPECT_EQ(std::memcmp(t.data, u->data, t.nbytes), 0) << t.name;  // (q/k rows permuted with their scales)
    }
    // auto: FP8 matrices come out BF16, like the checkpoint's other weights would be
    auto bf = convert(write_hf_folder(fp8_config(kind, b0, b1), fp8, "BF16", false, "fp8-bf16"));
    EXPECT_EQ(bf.find_tensor("blk.0.attn_q.weight")->type, DType::BF16);
    EXPECT_EQ(bf.find_tensor("blk.1.ffn_down.weight")->type, DType::BF16);
  }
}

TEST(HfFp8, MisfitsAreRefusedNamingTheTensor) {
  HfTensors ref = hf_weights(tiny_llama_config());
  const HfTensors fp8 = make_fp8(ref, ScaleKind::Block, 8, 12, 3);
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  {  // no scale
    HfTensors t = fp8;
    t.erase(q + "_scale_inv");
    EXPECT_ERROR_HAS(convert_error(write_hf_folder(fp8_config(ScaleKind::Block, 8, 12), t, "F32", false, "a")),
                     "without their scale");
  }
  {  // a scale of another shape
    HfTensors t = fp8;
    t[q + "_scale_inv"] = HfTensor{{3, 3}, std::vector<float>(9, 1.0f)};
    EXPECT_ERROR_HAS(convert_error(write_hf_folder(fp8_config(ScaleKind::Block, 8, 12), t, "F32", false, "b")),
                     "fits neither the tensor");
  }
  {  // FP8 that is no matrix (a norm)
    HfTensors t = fp8;
    t["model.norm.weight"] = HfTensor{{16}, {}, "F8_E4M3", std::vector<uint8_t>(16, 0x38)};
    EXPECT_ERROR_HAS(convert_error(write_hf_folder(fp8_config(ScaleKind::Block, 8, 12), t, "F32", false, "c")),
                     "an F8_E4M3 tensor that is no matrix");
  }
  {  // FP8 tensors without an FP8 quantization_config
    EXPECT_ERROR_HAS(convert_error(write_hf_folder(tiny_llama_config(), fp8, "F32", false, "d")), "FP8");
  }
}

// The E4M3 and E5M2 decoders against hand values (torch.float8_e4m3fn / float8_e5m2).
TEST(HfFp8, Fp8DecodesAsTorch) {
  EXPECT_EQ(fp8_e4m3_to_fp32(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0xfe), -448.0f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0x01), 0.001953125f);  // the smallest subnormal, 2^-9
  EXPECT_EQ(fp8_e4m3_to_fp32(0x07), 7.0f * 0.001953125f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0x08), 0.015625f);  // the smallest normal, 2^-6
  EXPECT_EQ(fp8_e4m3_to_fp32(0x80), -0.0f);
  EXPECT_TRUE(std::signbit(fp8_e4m3_to_fp32(0x80)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_fp32(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_fp32(0xff)));
  EXPECT_EQ(fp8_e4m3_to_fp32(0x4c), 6.0f);  // 0.1001.100: 2^2 * 1.5
  EXPECT_EQ(fp8_e5m2_to_fp32(0x3c), 1.0f);
  EXPECT_EQ(fp8_e5m2_to_fp32(0x7b), 57344.0f);
  EXPECT_TRUE(std::isinf(fp8_e5m2_to_fp32(0x7c)));
}

// compressed-tensors "int-quantized" (W8A8 / W8A16 releases): I8 codes times a scale per row (or one
// per tensor) -- the GGUF of the same model with those products as F32 weights, bit for bit; their
// activation scales skipped; asymmetric or grouped int8, and I8 matrices without such a config, refused.
TEST(HfInt8, CheckpointsConvertToTheirDequantizedWeights) {
  for (const bool per_row : {true, false}) {
    SCOPED_TRACE(per_row);
    std::mt19937 rng(per_row ? 5 : 6);
    std::uniform_real_distribution<float> sd(0.001f, 0.05f);
    HfTensors ref = hf_weights(tiny_llama_config());
    HfTensors q = ref;
    for (auto& [name, t] : ref) {
      if (t.shape.size() != 2 || name.find("layers.") == std::string::npos || !name.ends_with("_proj.weight")) continue;
      const int64_t rows = t.shape[0], cols = t.shape[1];
      std::vector<uint8_t> codes(static_cast<size_t>(rows * cols));
      for (auto& c : codes) c = static_cast<uint8_t>(rng());  // -128 .. 127, -128 included
      std::vector<float> scale(per_row ? static_cast<size_t>(rows) : 1);
      for (float& x : scale) x = sd(rng);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          t.values[static_cast<size_t>(r * cols + c)] =
              static_cast<float>(static_cast<int8_t>(codes[static_cast<size_t>(r * cols + c)])) *
              scale[per_row ? static_cast<size_t>(r) : 0];
      q[name] = HfTensor{t.shape, {}, "I8", codes};
      q[name + "_scale"] = HfTensor{per_row ? std::vector<int64_t>{rows, 1} : std::vector<int64_t>{1}, scale};
      q[name.substr(0, name.size() - 7) + ".input_scale"] = HfTensor{{1}, {0.5f}};
    }
    json cfg = tiny_llama_config();
    cfg["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", "int-quantized"},
        {"config_groups",
         {{"group_0",
           {{"targets", {"Linear"}},
            {"weights", {{"type", "int"}, {"num_bits", 8}, {"symmetric", true}, {"strategy", per_row ? "channel" : "tensor"}}},
            {"input_activations", {{"type", "int"}, {"num_bits", 8}, {"dynamic", true}, {"strategy", "token"}}}}}}}};
    auto want = convert(write_hf_folder(tiny_llama_config(), ref, "F32", false, "ref"), "f32");
    auto got = convert(write_hf_folder(cfg, q, "F32", false, "int8"), "f32");
    ASSERT_EQ(got.tensors().size(), want.tensors().size());
    for (const auto& t : want.tensors()) {
      const GgufTensorInfo* u = got.find_tensor(t.name);
      ASSERT_NE(u, nullptr) << t.name;
      ASSERT_EQ(u->nbytes, t.nbytes) << t.name;
      EXPECT_EQ(std::memcmp(t.data, u->data, t.nbytes), 0) << t.name;
    }
    if (per_row) {  // refusals
      json asym = cfg;
      asym["quantization_config"]["config_groups"]["group_0"]["weights"]["symmetric"] = false;
      EXPECT_ERROR_HAS(convert_error(write_hf_folder(asym, q, "F32", false, "asym")), "asymmetric int8 weights");
      json grouped = cfg;
      grouped["quantization_config"]["config_groups"]["group_0"]["weights"]["strategy"] = "group";
      EXPECT_ERROR_HAS(convert_error(write_hf_folder(grouped, q, "F32", false, "grouped")), "strategy \"group\"");
      EXPECT_ERROR_HAS(convert_error(write_hf_folder(tiny_llama_config(), q, "F32", false, "unsaid")),
                       "the weights are quantized: INT8");
    }
  }
}
