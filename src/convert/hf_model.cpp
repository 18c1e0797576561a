#include "convert/hf_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "core/fp16.h"
#include "core/log.h"
#include "convert/hf_metadata.h"
#include "convert/hf_tensor_ops.h"

namespace tmill {
namespace {

// HF sub-module of a decoder layer -> GGUF tensor base name (gguf-py's tensor_mapping for these archs).
constexpr std::pair<const char*, const char*> kLayerNames[] = {
    {"input_layernorm", "attn_norm"},         {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},           {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},      {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},      {"post_attention_layernorm", "ffn_norm"},
    {"mlp.gate_proj", "ffn_gate"},            {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
    {"self_attn.qkv_proj", "attn_qkv"},       {"mlp.gate_up_proj", "ffn_up"},  // phi3, kept fused
    // mixtures of experts: the router (Qwen MoE, OLMoE; Mixtral), qwen2moe's shared expert and its gate
    {"mlp.gate", "ffn_gate_inp"},             {"block_sparse_moe.gate", "ffn_gate_inp"},
    {"mlp.shared_expert.gate_proj", "ffn_gate_shexp"}, {"mlp.shared_expert.up_proj", "ffn_up_shexp"},
    {"mlp.shared_expert.down_proj", "ffn_down_shexp"}, {"mlp.shared_expert_gate", "ffn_gate_inp_shexp"},
    {"mlp.router", "ffn_gate_inp"},  // gpt-oss (weight and bias)
};

// One expert's matrix (HF stores each expert apart) -> the 3-D GGUF tensor it is stacked into.
// Qwen MoE / OLMoE: mlp.experts.E.{gate,up,down}_proj; Mixtral: block_sparse_moe.experts.E.w1 (gate),
// w3 (up), w2 (down), as convert_hf_to_gguf.py merges them.
constexpr std::pair<const char*, const char*> kExpertNames[] = {
    {"gate_proj", "ffn_gate_exps"}, {"up_proj", "ffn_up_exps"}, {"down_proj", "ffn_down_exps"},
    {"w1", "ffn_gate_exps"},        {"w3", "ffn_up_exps"},      {"w2", "ffn_down_exps"},
};

// Expected HF shape (outermost first) of every tensor the config implies, keyed by GGUF name.
std::map<std::string, std::vector<int64_t>> expected_tensors(const HfConfig& c) {
  const int64_t H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), F = c.intermediate_size;
  std::map<std::string, std::vector<int64_t>> m;
  m["token_embd.weight"] = {c.vocab_size, H};
  m["output_norm.weight"] = {H};
  if (!c.tie_word_embeddings) m["output.weight"] = {c.vocab_size, H};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string b = fmt::format("blk.{}.", i);
    m[b + "attn_norm.weight"] = {H};
    if (c.fused_qkv_ffn) {  // phi3: q, k, v rows stacked; gate rows then up rows
      m[b + "attn_qkv.weight"] = {Q + 2 * KV, H};
      m[b + "ffn_up.weight"] = {2 * F, H};
    } else if (c.n_expert > 0) {  // experts stacked along the outermost axis (HF order: [n_expert, rows, cols])
      const int64_t E = c.n_expert, FE = c.expert_rows();
      m[b + "attn_q.weight"] = {Q, H};
      m[b + "attn_k.weight"] = {KV, H};
      m[b + "attn_v.weight"] = {KV, H};
      m[b + "ffn_gate_inp.weight"] = {E, H};
      m[b + "ffn_gate_exps.weight"] = {E, FE, H};
      m[b + "ffn_up_exps.weight"] = {E, FE, H};
      m[b + "ffn_down_exps.weight"] = {E, H, FE};
      if (c.gptoss()) {  // router and expert biases, the sinks (expert biases: from gate_up_proj_bias / down_proj_bias)
        m[b + "ffn_gate_inp.bias"] = {E};
        m[b + "ffn_gate_exps.bias"] = {E, FE};
        m[b + "ffn_up_exps.bias"] = {E, FE};
        m[b + "ffn_down_exps.bias"] = {E, H};
        m[b + "attn_sinks.weight"] = {c.num_attention_heads};
      }
      if (const int64_t S = c.shared_expert_intermediate_size; S > 0) {
        m[b + "ffn_gate_inp_shexp.weight"] = {1, H};
        m[b + "ffn_gate_shexp.weight"] = {S, H};
        m[b + "ffn_up_shexp.weight"] = {S, H};
        m[b + "ffn_down_shexp.weight"] = {H, S};
      }
    } else {
      m[b + "attn_q.weight"] = {Q, H};
      m[b + "attn_k.weight"] = {KV, H};
      m[b + "attn_v.weight"] = {KV, H};
      m[b + "ffn_gate.weight"] = {F, H};
      m[b + "ffn_up.weight"] = {F, H};
    }
    m[b + "attn_output.weight"] = {H, Q};
    m[b + (c.gptoss() ? "post_attention_norm.weight" : "ffn_norm.weight")] = {H};
    if (c.n_expert == 0) m[b + "ffn_down.weight"] = {H, F};
    if (c.attention_bias) {
      m[b + "attn_q.bias"] = {Q};
      m[b + "attn_k.bias"] = {KV};
      m[b + "attn_v.bias"] = {KV};
      if (c.gguf_arch != "qwen2" && c.gguf_arch != "qwen2moe") m[b + "attn_output.bias"] = {H};
    }
    if (c.mlp_bias) {
      m[b + "ffn_gate.bias"] = {F};
      m[b + "ffn_up.bias"] = {F};
      m[b + "ffn_down.bias"] = {H};
    }
    if (c.qk_norm) {  // per head; olmoe: over the whole q / k projection
      m[b + "attn_q_norm.weight"] = {c.qk_norm_full ? Q : c.head_dim};
      m[b + "attn_k_norm.weight"] = {c.qk_norm_full ? KV : c.head_dim};
    }
  }
  return m;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// One GGUF tensor converted from one HF tensor: rows of `cols` elements, optionally row-permuted.
Status convert_rows(const SafetensorsModel::Ref& src, DType out, int64_t permute_head_dim, uint8_t* dst,
                    size_t nbytes) {
  const SafetensorsTensor& t = *src.tensor;
  const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
  const int64_t cols = rows ? t.n_elements / rows : 0;
  const size_t out_esz = out == DType::F32 ? 4 : 2;
  if (nbytes != static_cast<size_t>(t.n_elements) * out_esz) return Error{"internal: tensor size mismatch"};
  const bool raw = float_dtype(t.dtype) == out;  // same type: copy bits (exact, NaN payloads kept)
  std::vector<float> tmp(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t sr = permute_head_dim ? llama_qk_permuted_source_row(r, permute_head_dim) : r;
    uint8_t* d = dst + static_cast<size_t>(r * cols) * out_esz;
    if (raw) {
      std::memcpy(d, t.data + static_cast<size_t>(sr * cols) * out_esz, static_cast<size_t>(cols) * out_esz);
      continue;
    }
    TM_TRY(src.file->read_f32(t, static_cast<uint64_t>(sr * cols), static_cast<uint64_t>(cols), tmp.data()));
    for (int64_t k = 0; k < cols; ++k) {
      if (out == DType::F32) {
        std::memcpy(d + k * 4, &tmp[k], 4);
      } else {
        const uint16_t h = out == DType::F16 ? fp32_to_fp16(tmp[k]) : fp32_to_bf16(tmp[k]);
        std::memcpy(d + k * 2, &h, 2);
      }
    }
  }
  return {};
}

}  // namespace

std::optional<HfFusedExpert> hf_fused_expert_tensor(const std::string& n) {
  const std::string prefix = "model.layers.";
  if (n.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  size_t p = prefix.size(), q = p;
  while (q < n.size() && n[q] >= '0' && n[q] <= '9') ++q;
  if (q == p || q - p > 6 || (n[p] == '0' && q - p > 1) || q >= n.size() || n[q] != '.') return std::nullopt;
  const int64_t layer = std::stoll(n.substr(p, q - p));
  std::string rest = n.substr(q + 1);
  bool found = false;
  for (const std::string mod : {"mlp.experts.", "block_sparse_moe.experts."}) {
    if (rest.compare(0, mod.size(), mod) == 0) {
      rest = rest.substr(mod.size());
      found = true;
      break;
    }
  }
  if (!found) return std::nullopt;
  using P = HfFusedExpertPart;
  static const std::pair<const char*, P> kParts[] = {
      {"gate_up_proj", P::GateUp},          {"gate_up_proj.weight", P::GateUp},
      {"down_proj", P::Down},               {"down_proj.weight", P::Down},
      {"gate_up_proj_bias", P::GateUpBias}, {"down_proj_bias", P::DownBias},
      {"gate_up_proj_blocks", P::GateUpBlocks}, {"gate_up_proj_scales", P::GateUpScales},
      {"down_proj_blocks", P::DownBlocks},  {"down_proj_scales", P::DownScales},
  };
  for (const auto& [name, part] : kParts)
    if (rest == name) return HfFusedExpert{layer, part};
  return std::nullopt;
}

Result<std::string> hf_tensor_to_gguf_name(const std::string& n) {
  if (n == "model.embed_tokens.weight") return std::string("token_embd.weight");
  if (n == "model.norm.weight") return std::string("output_norm.weight");
  if (n == "lm_head.weight") return std::string("output.weight");
  if (n.ends_with(".rotary_emb.inv_freq")) return std::string();  // recomputed at run time
  const std::string prefix = "model.layers.";
  if (n.compare(0, prefix.size(), prefix) == 0) {
    size_t p = prefix.size(), q = p;
    while (q < n.size() && n[q] >= '0' && n[q] <= '9') ++q;
    if (q > p && q - p < 7 && q < n.size() && n[q] == '.' && !(n[p] == '0' && q - p > 1)) {
      const std::string rest = n.substr(q + 1);
      if (rest == "self_attn.sinks") return fmt::format("blk.{}.attn_sinks.weight", n.substr(p, q - p));  // gpt-oss
      for (const std::string suffix : {".weight", ".bias"}) {
        if (!rest.ends_with(suffix)) continue;
        const std::string mod = rest.substr(0, rest.size() - suffix.size());
        for (const auto& [hf, gg] : kLayerNames)
          if (mod == hf) return fmt::format("blk.{}.{}{}", n.substr(p, q - p), gg, suffix);
      }
    }
  }
  return Error{fmt::format("cannot map tensor '{}' to a GGUF name", n)};
}

std::optional<std::pair<std::string, int64_t>> hf_expert_tensor(const std::string& n) {
  // model.layers.<L>.{mlp,block_sparse_moe}.experts.<E>.<matrix>.weight; numbers without leading zeros
  auto number = [&](size_t& p, int64_t& out) {
    size_t q = p;
    while (q < n.size() && n[q] >= '0' && n[q] <= '9') ++q;
    if (q == p || q - p > 6 || (n[p] == '0' && q - p > 1) || q >= n.size() || n[q] != '.') return false;
    out = std::stoll(n.substr(p, q - p));
    p = q + 1;
    return true;
  };
  const std::string prefix = "model.layers.";
  if (n.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  size_t p = prefix.size();
  int64_t layer = 0, expert = 0;
  if (!number(p, layer)) return std::nullopt;
  bool found = false;
  for (const std::string mod : {"mlp.experts.", "block_sparse_moe.experts."}) {
    if (n.compare(p, mod.size(), mod) == 0) {
      p += mod.size();
      found = true;
      break;
    }
  }
  if (!found || !number(p, expert)) return std::nullopt;
  for (const auto& [hf, gg] : kExpertNames)
    if (n.compare(p, std::string::npos, std::string(hf) + ".weight") == 0)
      return std::pair{fmt::format("blk.{}.{}.weight", layer, gg), expert};
  return std::nullopt;
}

int64_t llama_qk_permuted_source_row(int64_t out_row, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  const int64_t h = out_row / head_dim, w = out_row % head_dim;
  return h * head_dim + (w % 2) * half + w / 2;
}

std::optional<std::string> hf_quantized_weights(const SafetensorsModel& w) {
  auto ends = [](const std::string& s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  bool qweight = false, g_idx = false;
  for (const std::string& name : w.names()) {
    const SafetensorsTensor& t = *w.find(name)->tensor;
    if (t.dtype == StDType::F8_E4M3 || t.dtype == StDType::F8_E5M2)
      return fmt::format("FP8 (tensor '{}' is {})", name, st_dtype_name(t.dtype));
    if (ends(name, ".weight_scale") || ends(name, ".weight_scale_inv") || ends(name, ".input_scale"))
      return fmt::format("FP8 (tensor '{}')", name);
    if (ends(name, ".absmax") || ends(name, ".quant_map") || ends(name, ".SCB") || name.find(".quant_state.") != std::string::npos)
      return fmt::format("bitsandbytes (tensor '{}')", name);
    qweight = qweight || ends(name, ".qweight") || ends(name, ".qzeros");
    g_idx = g_idx || ends(name, ".g_idx");
  }
  if (qweight) return g_idx ? "GPTQ (qweight, qzeros and g_idx tensors)" : "AWQ (qweight and qzeros tensors)";
  return std::nullopt;
}

Result<HfModel> HfModel::open(const std::string& hf_dir) {
  HfModel m;
  m.dir = hf_dir;
  TM_ASSIGN_OR_RETURN(m.config, load_hf_config(hf_dir));
  TM_ASSIGN_OR_RETURN(m.weights, SafetensorsModel::open(hf_dir));
  if (auto format = hf_quantized_weights(m.weights))
    return Error{fmt::format("{}: the weights are quantized: {}; tokenmill does not load such weights. Use the "
                             "model's original (unquantized) weights, quantized at load with --quantization (q8_0, "
                             "q4_k_m, ...) or with `tokenmill quantize`, or a GGUF file",
                             hf_dir, *format)};
  return m;
}

Status add_hf_model_to_gguf(const HfModel& m, const HfConvertOptions& opts, GgufWriter& w) {
  const HfConfig& c = m.config;

  // Map, validate and type every tensor before touching the writer. An item is one GGUF tensor: one
  // HF tensor, or (experts) one HF matrix per expert stacked along the outermost axis.
  struct Item {
    std::string name;
    std::vector<SafetensorsModel::Ref> srcs;
    std::vector<int64_t> ne;  // GGUF order
    bool matrix;              // 2-D or 3-D: stored as the weight type (unless kept F32)
    bool keep_f32;            // the routers: F32 whatever the output type, as llama.cpp's converter
    int64_t permute_head_dim;
    std::optional<DType> fixed = std::nullopt;  // MXFP4 experts: kept in their type
    // fused expert tensors: writes the tensor in the type given (instead of srcs row by row)
    std::function<Status(uint8_t*, size_t, DType)> produce = nullptr;
  };
  std::vector<Item> items;
  std::map<std::string, size_t> stacked;  // GGUF name of an expert tensor -> its item
  std::set<std::string> fused;            // GGUF names made from fused expert tensors
  auto expected = expected_tensors(c);
  std::set<StDType> weight_dtypes;
  auto reversed = [](const std::vector<int64_t>& v) { return std::vector<int64_t>(v.rbegin(), v.rend()); };
  auto check_dtype = [](const SafetensorsModel::Ref& ref, const std::string& where) -> Status {
    if (!st_dtype_is_float(ref.tensor->dtype))
      return Error{fmt::format("{}: unsupported dtype {} (only F32, F16 and BF16 weights are supported)", where,
                               st_dtype_name(ref.tensor->dtype))};
    return {};
  };
  auto check_shape = [](const SafetensorsModel::Ref& ref, const std::vector<int64_t>& want,
                        const std::string& where) -> Status {
    if (ref.tensor->shape != want)
      return Error{fmt::format("{}: shape {} does not match config.json (expected {})", where,
                               shape_str(ref.tensor->shape), shape_str(want))};
    return {};
  };
  // A GGUF tensor made from a fused expert tensor: once, and not also from per-expert ones.
  auto claim = [&](const std::string& gg, const std::string& where) -> Status {
    if (stacked.count(gg) || fused.count(gg))
      return Error{fmt::format("{}: '{}' is given twice (per-expert and fused expert tensors)", where, gg)};
    if (!expected.erase(gg))
      return Error{fmt::format("{}: unexpected for {} with this config.json ({} layers, {} experts)", where, c.hf_arch,
                               c.num_hidden_layers, c.n_expert)};
    fused.insert(gg);
    return {};
  };
  // Fused expert tensors (transformers 5's gate_up_proj / down_proj; gpt-oss's, MXFP4 or not, and biases).
  auto add_fused = [&](const HfFusedExpert& f, const SafetensorsModel::Ref& ref, const std::string& hf,
                       const std::string& where) -> Status {
    using P = HfFusedExpertPart;
    const bool oss = c.gptoss();
    const int64_t E = c.n_expert, F = c.expert_rows(), H = c.hidden_size;
    const std::string b = fmt::format("blk.{}.", f.layer);
    const bool bias = f.part == P::GateUpBias || f.part == P::DownBias;
    const bool mx = f.part == P::GateUpBlocks || f.part == P::GateUpScales || f.part == P::DownBlocks ||
                    f.part == P::DownScales;
    if (c.n_expert == 0 || ((bias || mx) && !oss) || f.layer >= c.num_hidden_layers)
      return Error{fmt::format("{}: unexpected for {} with this config.json ({} layers, {} experts)", where, c.hf_arch,
                               c.num_hidden_layers, c.n_expert)};
    auto add_gather = [&](const std::string& gg, std::vector<int64_t> ne, bool keep_f32, Gather g) -> Status {
      TM_TRY(claim(gg, where));
      items.push_back({gg, {ref}, std::move(ne), true, keep_f32, 0, std::nullopt,
                       [g](uint8_t* dst, size_t n, DType out) { return gather(g, out, dst, n); }});
      return {};
    };
    switch (f.part) {
      case P::GateUp: {  // transformers 5: [E, 2F, H], gate rows first; gpt-oss: [E, H, 2F], gate columns even
        TM_TRY(check_shape(ref, oss ? std::vector<int64_t>{E, H, 2 * F} : std::vector<int64_t>{E, 2 * F, H}, where));
        TM_TRY(check_dtype(ref, where));
        weight_dtypes.insert(ref.tensor->dtype);
        for (int half = 0; half < 2; ++half) {
          const Gather g = oss ? Gather{ref, E, H, 2 * F, half, 2, F, H, true}
                               : Gather{ref, E, 2 * F, H, half * F, 1, F, H, false};
          TM_TRY(add_gather(b + (half ? "ffn_up_exps.weight" : "ffn_gate_exps.weight"), {H, F, E}, false, g));
        }
        return {};
      }
      case P::Down: {  // transformers 5: [E, H, F]; gpt-oss: [E, F, H]
        TM_TRY(check_shape(ref, oss ? std::vector<int64_t>{E, F, H} : std::vector<int64_t>{E, H, F}, where));
        TM_TRY(check_dtype(ref, where));
        weight_dtypes.insert(ref.tensor->dtype);
        const Gather g = oss ? Gather{ref, E, F, H, 0, 1, H, F, true} : Gather{ref, E, H, F, 0, 1, H, F, false};
        return add_gather(b + "ffn_down_exps.weight", {F, H, E}, false, g);
      }
      case P::GateUpBias: {  // [E, 2F], gate even: F32 [F, E] each
        TM_TRY(check_shape(ref, {E, 2 * F}, where));
        TM_TRY(check_dtype(ref, where));
        for (int half = 0; half < 2; ++half)
          TM_TRY(add_gather(b + (half ? "ffn_up_exps.bias" : "ffn_gate_exps.bias"), {F, E}, true,
                            Gather{ref, E, 1, 2 * F, half, 2, F, 1, true}));
        return {};
      }
      case P::DownBias:
        TM_TRY(check_shape(ref, {E, H}, where));
        TM_TRY(check_dtype(ref, where));
        return add_gather(b + "ffn_down_exps.bias", {H, E}, true, Gather{ref, E, H, 1, 0, 1, H, 1, false});
      case P::GateUpBlocks:
      case P::DownBlocks: {  // taken with their scales
        const std::string scales = hf.substr(0, hf.size() - 7) + "_scales";
        if (!m.weights.find(scales)) return Error{fmt::format("{}: MXFP4 blocks without their '{}'", where, scales)};
        return {};
      }
      case P::GateUpScales:
      case P::DownScales: {
        const bool gate_up = f.part == P::GateUpScales;
        const std::string bname = hf.substr(0, hf.size() - 7) + "_blocks";
        const auto blocks = m.weights.find(bname);
        if (!blocks) return Error{fmt::format("{}: MXFP4 scales without their '{}'", where, bname)};
        const int64_t R = gate_up ? 2 * F : H, cols = gate_up ? H : F;
        if (cols % 32 != 0)
          return Error{fmt::format("{}: MXFP4 rows of {} values are not whole blocks of 32", where, cols)};
        const int64_t G = cols / 32;
        const std::string bwhere = fmt::format("{}: tensor '{}'", blocks->file->path(), bname);
        for (auto [r, w] : {std::pair{&ref, &where}, std::pair{&*blocks, &bwhere}})
          if (r->tensor->dtype != StDType::U8)
            return Error{fmt::format("{}: MXFP4 {} must be U8, not {}", *w, r == &ref ? "scales" : "blocks",
                                     st_dtype_name(r->tensor->dtype))};
        TM_TRY(check_shape(ref, {E, R, G}, where));
        TM_TRY(check_shape(*blocks, {E, R, G, 16}, bwhere));
        const int64_t rows = gate_up ? F : H;
        for (int half = 0; half < (gate_up ? 2 : 1); ++half) {
          const std::string gg =
              b + (!gate_up ? "ffn_down_exps.weight" : half ? "ffn_up_exps.weight" : "ffn_gate_exps.weight");
          TM_TRY(claim(gg, where));
          const Mxfp4Rows mr{*blocks, ref, E, R, G, half, gate_up ? 2 : 1, rows};
          items.push_back({gg, {ref}, {cols, rows, E}, true, false, 0, DType::MXFP4,
                           [mr](uint8_t* dst, size_t n, DType) { return repack_mxfp4(mr, dst, n); }});
        }
        return {};
      }
    }
    return {};
  };
  for (const std::string& hf : m.weights.names()) {
    const auto ref = *m.weights.find(hf);
    const std::string where = fmt::format("{}: tensor '{}'", ref.file->path(), hf);
    if (auto f = hf_fused_expert_tensor(hf)) {
      TM_TRY(add_fused(*f, ref, hf, where));
      continue;
    }
    if (auto part = hf_expert_tensor(hf)) {
      if (fused.count(part->first))
        return Error{fmt::format("{}: '{}' is given twice (per-expert and fused expert tensors)", where, part->first)};
      auto e = expected.find(part->first);
      if (e == expected.end() || e->second.size() != 3)
        return Error{fmt::format("{}: unexpected for {} with this config.json ({} layers, {} experts)", where,
                                 c.hf_arch, c.num_hidden_layers, c.n_expert)};
      if (part->second >= e->second[0])
        return Error{fmt::format("{}: expert {} is out of range (config.json: {} experts)", where, part->second,
                                 e->second[0])};
      const std::vector<int64_t> one(e->second.begin() + 1, e->second.end());
      if (ref.tensor->shape != one)
        return Error{fmt::format("{}: shape {} does not match config.json (expected {})", where,
                                 shape_str(ref.tensor->shape), shape_str(one))};
      TM_TRY(check_dtype(ref, where));
      weight_dtypes.insert(ref.tensor->dtype);
      auto [it, fresh] = stacked.try_emplace(part->first, items.size());
      if (fresh)
        items.push_back({part->first, std::vector<SafetensorsModel::Ref>(static_cast<size_t>(e->second[0])),
                         reversed(e->second), true, false, 0});
      SafetensorsModel::Ref& slot = items[it->second].srcs[static_cast<size_t>(part->second)];
      if (slot.tensor) return Error{fmt::format("{}: expert {} of '{}' given twice", where, part->second, part->first)};
      slot = ref;
      continue;
    }
    TM_ASSIGN_OR_RETURN(std::string gg, hf_tensor_to_gguf_name(hf));
    if (gg.empty()) continue;
    if (c.gptoss() && gg.ends_with(".ffn_norm.weight"))  // GptOssModel's map: post_attention_layernorm
      gg = gg.substr(0, gg.size() - 16) + ".post_attention_norm.weight";
    if (gg == "output.weight" && c.tie_word_embeddings) {
      log_info("{}: skipped (tie_word_embeddings: the output projection is token_embd)", where);
      continue;
    }
    auto e = expected.find(gg);
    if (e == expected.end() || e->second.size() == 3)
      return Error{fmt::format("{}: unexpected for {} with this config.json ({} layers, attention_bias={}, "
                               "tie_word_embeddings={})",
                               where, c.hf_arch, c.num_hidden_layers, c.attention_bias, c.tie_word_embeddings)};
    if (ref.tensor->shape != e->second)
      return Error{fmt::format("{}: shape {} does not match config.json (expected {})", where,
                               shape_str(ref.tensor->shape), shape_str(e->second))};
    TM_TRY(check_dtype(ref, where));
    expected.erase(e);
    const bool matrix = ref.tensor->shape.size() == 2;
    const bool keep_f32 = gg.find(".ffn_gate_inp") != std::string::npos;  // ffn_gate_inp, ffn_gate_inp_shexp
    if (matrix && !keep_f32) weight_dtypes.insert(ref.tensor->dtype);
    int64_t perm = 0;
    if (c.permute_qk && (gg.find(".attn_q.") != std::string::npos || gg.find(".attn_k.") != std::string::npos))
      perm = c.head_dim;
    items.push_back({gg, {ref}, reversed(ref.tensor->shape), matrix, keep_f32, perm});
  }
  for (const auto& [name, index] : stacked) {
    const auto& srcs = items[index].srcs;
    for (size_t x = 0; x < srcs.size(); ++x)
      if (!srcs[x].tensor)
        return Error{fmt::format("{}: '{}' lacks expert {} ({} experts in config.json)", m.dir, name, x, srcs.size())};
    expected.erase(name);
  }
  if (!expected.empty()) {
    return Error{fmt::format("{}: missing tensor '{}' ({} missing in all)", m.dir, expected.begin()->first,
                             expected.size())};
  }

  // llama.cpp writes the MXFP4 experts first (GptOssModel.generate_extra_tensors), in its visiting order
  std::stable_partition(items.begin(), items.end(), [](const Item& it) { return it.fixed.has_value(); });
  const bool any_mxfp4 = !items.empty() && items.front().fixed.has_value();

  DType wtype;
  if (opts.outtype == "auto") {
    wtype = weight_dtypes.size() == 1 ? *float_dtype(*weight_dtypes.begin()) : DType::F32;
  } else if (opts.outtype == "f32" || opts.outtype == "F32") {
    wtype = DType::F32;
  } else if (opts.outtype == "f16" || opts.outtype == "F16") {
    wtype = DType::F16;
  } else if (opts.outtype == "bf16" || opts.outtype == "BF16") {
    wtype = DType::BF16;
  } else {
    return Error{fmt::format("unknown output type '{}' (use f32, f16, bf16 or auto)", opts.outtype)};
  }

  TM_TRY(write_hf_metadata(m, opts, wtype, any_mxfp4, w));
  const auto& rs = c.rope_scaling;

  // Tensors: generated ones first, then the HF tensors in llama.cpp's visiting order.
  if (rs.type == HfRopeScalingType::Llama3) {
    auto factors = std::make_shared<std::vector<float>>(llama3_rope_factors(c));
    TM_TRY(w.add_tensor("rope_freqs.weight", DType::F32, {static_cast<int64_t>(factors->size())},
                        [factors](uint8_t* dst, size_t n) -> Status {
                          std::memcpy(dst, factors->data(), n);
                          return {};
                        }));
  }
  if (rs.type == HfRopeScalingType::LongRope) {
    for (auto [name, v] : {std::pair{"rope_factors_long.weight", &rs.long_factor},
                           std::pair{"rope_factors_short.weight", &rs.short_factor}}) {
      auto factors = std::make_shared<std::vector<float>>(*v);
      TM_TRY(w.add_tensor(name, DType::F32, {static_cast<int64_t>(factors->size())},
                          [factors](uint8_t* dst, size_t n) -> Status {
                            std::memcpy(dst, factors->data(), n);
                            return {};
                          }));
    }
  }
  for (const Item& it : items) {
    const DType out = it.fixed ? *it.fixed : it.matrix && !it.keep_f32 ? wtype : DType::F32;
    if (it.produce) {
      TM_TRY(w.add_tensor(it.name, out, it.ne, [produce = it.produce, out](uint8_t* dst, size_t n) -> Status {
        return produce(dst, n, out);
      }));
      continue;
    }
    const auto srcs = it.srcs;
    const int64_t perm = it.permute_head_dim;
    TM_TRY(w.add_tensor(it.name, out, it.ne, [srcs, out, perm](uint8_t* dst, size_t n) -> Status {
      const size_t part = n / srcs.size();  // experts: one matrix after the other
      for (size_t x = 0; x < srcs.size(); ++x) TM_TRY(convert_rows(srcs[x], out, perm, dst + x * part, part));
      return {};
    }));
  }
  log_info("{}: {} tensors, weights as {}", m.dir, items.size(), dtype_name(wtype));
  return {};
}

Status convert_hf_to_gguf(const std::string& hf_dir, const std::string& out_path, const HfConvertOptions& opts) {
  TM_ASSIGN_OR_RETURN(HfModel m, HfModel::open(hf_dir));
  GgufWriter w;
  TM_TRY(add_hf_model_to_gguf(m, opts, w));
  return w.write(out_path);
}

}  // namespace tmill
