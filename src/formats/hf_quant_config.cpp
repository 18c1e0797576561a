// quantization_config of a Hugging Face config.json: the pre-quantized formats the converter reads
// and the refusals naming the others (hf_config_reader.h).
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "formats/hf_config.h"
#include "formats/hf_config_reader.h"

namespace tmill {
namespace detail {
namespace {

using json = nlohmann::json;
using Reader = HfConfigReader;

// The integer formats packed in int32 words (GPTQ, AWQ, compressed-tensors' pack-quantized): true
// and `c` filled when quantization_config is one tokenmill converts; an error naming the field for a
// variant it does not (3-bit GPTQ, AWQ's GEMV layouts, Marlin-repacked checkpoints, ...); false for
// other methods.
Result<bool> parse_packed(const Reader& r, const json& q, const std::string& method, HfConfig* c) {
  auto int_field = [&](std::initializer_list<const char*> keys, std::optional<int64_t> def) -> Result<int64_t> {
    for (const char* k : keys)
      if (q.contains(k) && !q[k].is_null()) {
        if (!q[k].is_number_integer()) return r.err(fmt::format("quantization_config.{} must be an integer, got {}", k, q[k].dump()));
        return q[k].get<int64_t>();
      }
    if (def) return *def;
    return r.err(fmt::format("quantization_config lacks \"{}\"", *keys.begin()));
  };
  auto lower_string = [&](const json& o, const char* k, const std::string& def) {
    std::string v = o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : def;
    for (char& ch : v) ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
    return v;
  };
  auto group_of = [&](int64_t g) -> Result<int64_t> {
    if (g == -1 || g == 0) return int64_t{0};
    if (g < 0) return r.err(fmt::format("quantization_config.group_size {} (expected -1 or a positive size)", g));
    return g;
  };
  if (method == "gptq") {
    TM_ASSIGN_OR_RETURN(const int64_t bits, int_field({"bits"}, std::nullopt));
    if (bits != 2 && bits != 4 && bits != 8)
      return r.err(fmt::format("GPTQ with bits {}: tokenmill converts 2-, 4- and 8-bit GPTQ weights", bits));
    const std::string format = lower_string(q, "checkpoint_format", "gptq");
    if (format != "gptq" && format != "gptq_v2")
      return r.err(fmt::format("GPTQ checkpoint_format \"{}\": tokenmill reads the \"gptq\" and \"gptq_v2\" layouts "
                               "(not weights repacked for one runtime's kernels)", format));
    TM_ASSIGN_OR_RETURN(const int64_t g, int_field({"group_size"}, int64_t{-1}));
    TM_ASSIGN_OR_RETURN(c->packed_group, group_of(g));
    c->packed = HfConfig::Packed::Gptq;
    c->packed_bits = static_cast<int>(bits);
    c->gptq_zero_minus_one = format == "gptq";
    return true;
  }
  if (method == "awq") {
    TM_ASSIGN_OR_RETURN(const int64_t bits, int_field({"bits", "w_bit"}, int64_t{4}));
    if (bits != 4) return r.err(fmt::format("AWQ with bits {}: tokenmill converts 4-bit AWQ weights", bits));
    const std::string version = lower_string(q, "version", "gemm");
    if (version != "gemm")
      return r.err(fmt::format("AWQ version \"{}\": tokenmill reads AutoAWQ's \"gemm\" layout (the one vLLM loads)",
                               version));
    TM_ASSIGN_OR_RETURN(const int64_t g, int_field({"group_size", "q_group_size"}, int64_t{128}));
    TM_ASSIGN_OR_RETURN(c->packed_group, group_of(g));
    c->packed = HfConfig::Packed::Awq;
    c->packed_bits = 4;
    return true;
  }
  if (method != "compressed_tensors") return false;
  const std::string top_format = lower_string(q, "format", "");
  const json groups = q.contains("config_groups") ? q["config_groups"] : json();
  if (!groups.is_object() || groups.empty()) return false;
  std::optional<std::pair<int64_t, int64_t>> args;  // (bits, group) shared by every group
  for (const auto& [name, grp] : groups.items()) {
    const std::string format = grp.is_object() ? lower_string(grp, "format", top_format) : top_format;
    const json w = grp.is_object() && grp.contains("weights") ? grp["weights"] : json();
    if (format != "pack-quantized" || !w.is_object()) return false;
    if (lower_string(w, "type", "int") != "int")
      return r.err(fmt::format("compressed-tensors group \"{}\": pack-quantized weights of type {} (tokenmill reads int)",
                               name, w["type"].dump()));
    const int64_t bits = w.contains("num_bits") && w["num_bits"].is_number_integer() ? w["num_bits"].get<int64_t>() : 0;
    if (bits != 4 && bits != 8)
      return r.err(fmt::format("compressed-tensors group \"{}\": {}-bit packed weights (tokenmill reads 4 and 8 bits)",
                               name, bits));
    const std::string strategy = lower_string(w, "strategy", "group");
    int64_t group = 0;
    if (strategy == "group") {
      if (!w.contains("group_size") || !w["group_size"].is_number_integer() || w["group_size"].get<int64_t>() <= 0)
        return r.err(fmt::format("compressed-tensors group \"{}\": strategy group without a positive group_size", name));
      group = w["group_size"].get<int64_t>();
    } else if (strategy != "channel") {
      return r.err(fmt::format("compressed-tensors group \"{}\": strategy \"{}\" (tokenmill reads group and channel)",
                               name, strategy));
    }
    if (args && *args != std::pair{bits, group})
      return r.err("compressed-tensors with config groups of different bits or group sizes (tokenmill reads one)");
    args = std::pair{bits, group};
  }
  c->packed = HfConfig::Packed::CompressedTensors;
  c->packed_bits = static_cast<int>(args->first);
  c->packed_group = args->second;
  return true;
}

}  // namespace

// Weights quantized by another tool that the converter does not read: the refusal names the format
// and what to do instead.
Status parse_quantization_config(const Reader& r, const json& q, const std::string& hf_arch, HfConfig* c) {
  if (!q.is_object()) return {};
  std::string method = q.contains("quant_method") && q["quant_method"].is_string() ? q["quant_method"].get<std::string>() : "";
  if (method.empty() && (q.value("load_in_4bit", false) || q.value("load_in_8bit", false))) method = "bitsandbytes";
  if (method.empty()) return {};
  std::string lower;
  for (char ch : method) lower += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch == '-' ? '_' : ch);
  if (lower == "mxfp4" && hf_arch == "GptOssForCausalLM") {  // OpenAI's own format: kept as GGUF MXFP4
    c->mxfp4 = true;
    return {};
  }
  // FP8 weights with their scales: dequantized at conversion (hf_tensor_plan.cpp)
  auto block_of = [&](const json& b) {
    if (b.is_array() && b.size() == 2 && b[0].is_number_integer() && b[1].is_number_integer() && b[0].get<int64_t>() > 0 &&
        b[1].get<int64_t>() > 0) {
      c->fp8_block[0] = b[0].get<int64_t>();
      c->fp8_block[1] = b[1].get<int64_t>();
    }
  };
  if (lower == "fp8") {
    c->fp8 = true;
    if (q.contains("weight_block_size")) block_of(q["weight_block_size"]);
    return {};
  }
  if (lower == "compressed_tensors" && q.contains("config_groups") && q["config_groups"].is_object() &&
      !q["config_groups"].empty()) {
    bool float8 = true, int8 = true;
    const std::string top_format = q.contains("format") && q["format"].is_string() ? q["format"].get<std::string>() : "";
    for (const auto& [name, g] : q["config_groups"].items()) {  // (any JSON: types checked, nothing thrown)
      const json w = g.is_object() && g.contains("weights") ? g["weights"] : json();
      const bool is_float = w.is_object() && w.contains("type") && w["type"].is_string() && w["type"] == "float";
      const bool is_int = w.is_object() && w.contains("type") && w["type"].is_string() && w["type"] == "int";
      const bool eight = w.is_object() && w.contains("num_bits") && w["num_bits"].is_number_integer() && w["num_bits"] == 8;
      float8 = float8 && is_float && eight;
      if (float8 && w.contains("block_structure")) block_of(w["block_structure"]);
      // INT8 (W8A8 / W8A16 "int-quantized"): one byte per weight and a scale per row or tensor
      const std::string format = g.is_object() && g.contains("format") && g["format"].is_string()
                                     ? g["format"].get<std::string>() : top_format;
      const std::string strategy = w.is_object() && w.contains("strategy") && w["strategy"].is_string()
                                       ? w["strategy"].get<std::string>() : "";
      int8 = int8 && is_int && eight && (format == "int-quantized" || format == "naive-quantized");
      if (int8 && strategy != "channel" && strategy != "tensor")
        return r.err(fmt::format("compressed-tensors group \"{}\": int8 weights with strategy \"{}\" (tokenmill reads "
                                 "channel and tensor scales)", name, strategy));
      if (int8 && w.contains("symmetric") && w["symmetric"] == false)
        return r.err(fmt::format("compressed-tensors group \"{}\": asymmetric int8 weights (tokenmill reads symmetric "
                                 "ones)", name));
    }
    if (float8 || int8) {  // dequantized at conversion, each matrix times its scale
      (float8 ? c->fp8 : c->int8) = true;
      return {};
    }
  }
  TM_ASSIGN_OR_RETURN(const bool packed, parse_packed(r, q, lower, c));
  if (packed) return {};
  const std::string format = hf_quant_format_name(lower);
  return r.err(fmt::format("the weights are quantized with {} (quantization_config.quant_method \"{}\"); tokenmill "
                           "does not load {} weights. Use the model's original (unquantized) weights, quantized at "
                           "load with --quantization (q8_0, q4_k_m, ...) or with `tokenmill quantize`, or a GGUF file",
                           format, method, format));
}

}  // namespace detail

std::string hf_quant_format_name(const std::string& method) {
  if (method == "awq" || method == "awq_marlin") return "AWQ";
  if (method == "gptq" || method == "gptq_marlin" || method == "marlin" || method == "gptq_marlin_24") return "GPTQ";
  if (method == "bitsandbytes") return "bitsandbytes";
  if (method == "fp8" || method == "fbgemm_fp8" || method == "ptpc_fp8") return "FP8";
  if (method == "mxfp4") return "MXFP4";
  if (method == "compressed_tensors") return "compressed-tensors (FP8 / INT8 / INT4)";
  if (method == "modelopt" || method == "modelopt_fp4") return "ModelOpt (FP8 / FP4)";
  return "'" + method + "'";
}

}  // namespace tmill
