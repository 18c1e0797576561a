// Per-tensor type selection, after llama.cpp's llama_tensor_get_type / tensor_type_fallback.
#include "convert/quant_recipe.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <numeric>

#include <fmt/format.h>

namespace tmill {
namespace {

using FT = LlamaFileType;

const std::vector<QuantRecipe>& recipes() {
  static const std::vector<QuantRecipe> r = {
      {"F32", FT::ALL_F32, DType::F32},           {"F16", FT::MOSTLY_F16, DType::F16},
      {"BF16", FT::MOSTLY_BF16, DType::BF16},     {"Q4_0", FT::MOSTLY_Q4_0, DType::Q4_0},
      {"Q4_1", FT::MOSTLY_Q4_1, DType::Q4_1},     {"Q5_0", FT::MOSTLY_Q5_0, DType::Q5_0},
      {"Q5_1", FT::MOSTLY_Q5_1, DType::Q5_1},     {"Q8_0", FT::MOSTLY_Q8_0, DType::Q8_0},
      {"Q2_K", FT::MOSTLY_Q2_K, DType::Q2_K},     {"Q2_K_S", FT::MOSTLY_Q2_K_S, DType::Q2_K},
      {"Q3_K_S", FT::MOSTLY_Q3_K_S, DType::Q3_K}, {"Q3_K_M", FT::MOSTLY_Q3_K_M, DType::Q3_K},
      {"Q3_K_L", FT::MOSTLY_Q3_K_L, DType::Q3_K}, {"Q4_K_S", FT::MOSTLY_Q4_K_S, DType::Q4_K},
      {"Q4_K_M", FT::MOSTLY_Q4_K_M, DType::Q4_K}, {"Q5_K_S", FT::MOSTLY_Q5_K_S, DType::Q5_K},
      {"Q5_K_M", FT::MOSTLY_Q5_K_M, DType::Q5_K}, {"Q6_K", FT::MOSTLY_Q6_K, DType::Q6_K},
      {"IQ1_S", FT::MOSTLY_IQ1_S, DType::IQ1_S},     {"IQ1_M", FT::MOSTLY_IQ1_M, DType::IQ1_M},
      {"IQ2_XXS", FT::MOSTLY_IQ2_XXS, DType::IQ2_XXS}, {"IQ2_XS", FT::MOSTLY_IQ2_XS, DType::IQ2_XS},
      {"IQ2_S", FT::MOSTLY_IQ2_S, DType::IQ2_XS},    {"IQ2_M", FT::MOSTLY_IQ2_M, DType::IQ2_S},
      {"IQ3_XXS", FT::MOSTLY_IQ3_XXS, DType::IQ3_XXS}, {"IQ3_XS", FT::MOSTLY_IQ3_XS, DType::IQ3_S},
      {"IQ3_S", FT::MOSTLY_IQ3_S, DType::IQ3_S},     {"IQ3_M", FT::MOSTLY_IQ3_M, DType::IQ3_S},
      {"IQ4_NL", FT::MOSTLY_IQ4_NL, DType::IQ4_NL}, {"IQ4_XS", FT::MOSTLY_IQ4_XS, DType::IQ4_XS},
      {"MXFP4_MOE", FT::MOSTLY_MXFP4_MOE, DType::MXFP4},
  };
  return r;
}

std::string upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

enum class Cat { TokenEmbd, AttnQ, AttnV, AttnK, AttnQKV, AttnKVB, AttnOutput, FfnUp, FfnGate, FfnDown, Output, Other };

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

Cat category(const std::string& n) {
  if (n == "output.weight") return Cat::Output;
  if (n == "token_embd.weight" || n == "per_layer_token_embd.weight") return Cat::TokenEmbd;
  if (contains(n, "attn_qkv.weight")) return Cat::AttnQKV;
  if (contains(n, "attn_kv_b.weight")) return Cat::AttnKVB;
  if (contains(n, "attn_v.weight")) return Cat::AttnV;
  if (contains(n, "attn_k.weight")) return Cat::AttnK;
  if (contains(n, "attn_q.weight")) return Cat::AttnQ;
  if (contains(n, "attn_output.weight")) return Cat::AttnOutput;
  if (contains(n, "ffn_up")) return Cat::FfnUp;
  if (contains(n, "ffn_gate")) return Cat::FfnGate;
  if (contains(n, "ffn_down")) return Cat::FfnDown;
  return Cat::Other;
}

bool is_attn_v_like(Cat c) { return c == Cat::AttnV || c == Cat::AttnQKV || c == Cat::AttnKVB; }

// Layer number of "blk.N.<...>", or -1.
int layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  int v = -1;
  const char* b = name.data() + 4;
  auto [p, ec] = std::from_chars(b, name.data() + name.size(), v);
  return ec == std::errc() && p != b ? v : -1;
}

int n_dims(const std::vector<int64_t>& ne) {
  for (int i = static_cast<int>(ne.size()) - 1; i >= 1; --i)
    if (ne[static_cast<size_t>(i)] > 1) return i + 1;
  return 1;
}

bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

struct State {
  const QuantRecipe& recipe;
  const QuantModelShape& shape;
  const QuantPlanOptions& opt;
  bool tied = true;
  int n_attention_wv = 0, i_attention_wv = 0;
  int n_ffn = 0, i_ffn_down = 0, i_ffn_gate = 0, i_ffn_up = 0;

  int64_t n_gqa() const { return shape.n_head_kv > 0 ? shape.n_head / shape.n_head_kv : 0; }
  bool is(FT f) const { return recipe.ftype == f; }
  bool falcon() const { return shape.arch == "falcon"; }
  bool is_70b() const { return shape.arch == "llama" && shape.n_layer == 80 && shape.n_head != shape.n_head_kv; }

  // (layer, n_layer) of an FFN tensor: counted in order for dense models, parsed for MoE.
  Result<std::pair<int, int>> layer_info(int counter, const std::string& name) const {
    if (shape.n_expert > 1) {
      const int l = layer_of(name);
      if (l < 0 || l >= n_ffn) return Error{fmt::format("cannot tell the layer (of {}) of tensor {}", n_ffn, name)};
      return std::pair{l, n_ffn};
    }
    return std::pair{counter, n_ffn};
  }

  // llama_tensor_get_type_impl (llama.cpp de3ff81), every file type above.
  bool iq4() const { return is(FT::MOSTLY_IQ4_NL) || is(FT::MOSTLY_IQ4_XS); }
  // The 1-2 bit mixes, whose non-default tensors follow their own branch.
  bool iq2_mix() const {
    return is(FT::MOSTLY_IQ2_XXS) || is(FT::MOSTLY_IQ2_XS) || is(FT::MOSTLY_IQ1_S) || is(FT::MOSTLY_IQ2_S) ||
           is(FT::MOSTLY_IQ2_M) || is(FT::MOSTLY_IQ1_M);
  }
  bool iq2_s_or_m() const { return is(FT::MOSTLY_IQ2_S) || is(FT::MOSTLY_IQ2_M); }
  Result<DType> mixture_type(const QuantTensorDesc& t, Cat cat, DType nt) {
    if (is(FT::MOSTLY_MXFP4_MOE)) {
      // Expert tensors (3-D, more than one expert) MXFP4, every other matrix Q8_0, the output too.
      if (cat == Cat::Output || (tied && cat == Cat::TokenEmbd)) return opt.output_tensor_type.value_or(DType::Q8_0);
      return t.ne.size() > 2 && t.ne[2] > 1 ? DType::MXFP4 : DType::Q8_0;
    }
    if (cat == Cat::Output || (tied && cat == Cat::TokenEmbd)) {
      if (opt.output_tensor_type) return *opt.output_tensor_type;
      const int64_t nx = t.ne[0];
      if (falcon() || nx % dtype_info(nt).block_size != 0) return DType::Q8_0;
      if (iq2_mix() || is(FT::MOSTLY_IQ3_XXS)) return DType::Q5_K;
      return nt != DType::Q8_0 ? DType::Q6_K : nt;
    }
    if (cat == Cat::TokenEmbd) {
      if (opt.token_embedding_type) return *opt.token_embedding_type;
      if (is(FT::MOSTLY_IQ2_XXS) || is(FT::MOSTLY_IQ2_XS) || is(FT::MOSTLY_IQ1_S) || is(FT::MOSTLY_IQ1_M))
        return DType::Q2_K;
      if (iq2_s_or_m() || is(FT::MOSTLY_IQ3_XXS)) return DType::IQ3_S;
      return nt;
    }
    if (iq2_mix()) {
      if (is_attn_v_like(cat)) {
        nt = n_gqa() >= 4 || shape.n_expert >= 4 ? DType::Q4_K : iq2_s_or_m() ? DType::IQ3_S : DType::Q2_K;
        ++i_attention_wv;
      } else if (shape.n_expert == 8 && cat == Cat::AttnK) {
        nt = DType::Q4_K;
      } else if (cat == Cat::FfnDown) {
        if (i_ffn_down < n_ffn / 8) nt = iq2_s_or_m() ? DType::IQ3_S : DType::Q2_K;
        ++i_ffn_down;
      } else if (cat == Cat::AttnOutput) {
        if (shape.n_expert == 8) nt = DType::Q5_K;
        else if (is(FT::MOSTLY_IQ1_S) || is(FT::MOSTLY_IQ1_M)) nt = DType::IQ2_XXS;
        else if (iq2_s_or_m()) nt = DType::IQ3_S;
      }
      return nt;
    }
    if (is_attn_v_like(cat)) {
      if (is(FT::MOSTLY_Q2_K)) nt = n_gqa() >= 4 ? DType::Q4_K : DType::Q3_K;
      else if (is(FT::MOSTLY_Q2_K_S) && n_gqa() >= 4) nt = DType::Q4_K;
      else if (is(FT::MOSTLY_IQ3_XXS))
        nt = n_gqa() >= 4 ? DType::Q4_K : !opt.has_imatrix ? DType::IQ3_S : DType::IQ3_XXS;
      else if ((is(FT::MOSTLY_IQ3_XS) || is(FT::MOSTLY_IQ3_S)) && n_gqa() >= 4) nt = DType::Q4_K;
      else if (is(FT::MOSTLY_IQ3_M)) nt = DType::Q4_K;
      else if (is(FT::MOSTLY_Q3_K_M)) nt = i_attention_wv < 2 ? DType::Q5_K : DType::Q4_K;
      else if (is(FT::MOSTLY_Q3_K_L)) nt = DType::Q5_K;
      else if (iq4() && n_gqa() >= 4) nt = DType::Q5_K;
      else if ((is(FT::MOSTLY_Q4_K_M) || is(FT::MOSTLY_Q5_K_M)) && use_more_bits(i_attention_wv, n_attention_wv))
        nt = DType::Q6_K;
      else if (is(FT::MOSTLY_Q4_K_S) && i_attention_wv < 4) nt = DType::Q5_K;
      if (is_70b() && (nt == DType::Q3_K || nt == DType::Q4_K)) nt = DType::Q5_K;
      if (shape.n_expert == 8) nt = DType::Q8_0;
      ++i_attention_wv;
      return nt;
    }
    if (cat == Cat::AttnK) {
      if (shape.n_expert == 8) return DType::Q8_0;
      return is(FT::MOSTLY_IQ3_XS) ? DType::IQ3_XXS : is(FT::MOSTLY_IQ3_XXS) ? DType::IQ2_S : nt;
    }
    if (cat == Cat::AttnQ) return is(FT::MOSTLY_IQ3_XS) ? DType::IQ3_XXS : is(FT::MOSTLY_IQ3_XXS) ? DType::IQ2_S : nt;
    if (cat == Cat::FfnDown) {
      TM_ASSIGN_OR_RETURN(auto li, layer_info(i_ffn_down, t.name));
      const auto [il, nl] = li;
      if (is(FT::MOSTLY_Q2_K)) nt = DType::Q3_K;
      else if (is(FT::MOSTLY_Q2_K_S)) { if (il < nl / 8) nt = DType::Q4_K; }
      else if (is(FT::MOSTLY_IQ3_XXS) && !opt.has_imatrix) nt = il < nl / 8 ? DType::Q4_K : DType::Q3_K;
      else if (is(FT::MOSTLY_Q3_K_M))
        nt = il < nl / 16 ? DType::Q5_K : (!falcon() || use_more_bits(il, nl)) ? DType::Q4_K : DType::Q3_K;
      else if (is(FT::MOSTLY_IQ3_M) && (il < nl / 8 || (shape.n_expert == 8 && use_more_bits(il, nl))))
        nt = DType::Q4_K;
      else if (is(FT::MOSTLY_Q3_K_L)) nt = falcon() ? DType::Q4_K : DType::Q5_K;
      else if (is(FT::MOSTLY_Q4_K_M)) {
        if (falcon()) nt = il < nl / 16 ? DType::Q6_K : use_more_bits(il, nl) ? DType::Q5_K : DType::Q4_K;
        else if (use_more_bits(il, nl)) nt = DType::Q6_K;
      } else if (il < nl / 8 && iq4() && !opt.has_imatrix) nt = DType::Q5_K;
      else if (is(FT::MOSTLY_Q5_K_M) && use_more_bits(il, nl)) nt = DType::Q6_K;
      else if (is(FT::MOSTLY_Q4_K_S) && !falcon() && il < nl / 8) nt = DType::Q5_K;
      else if ((is(FT::MOSTLY_Q4_0) || is(FT::MOSTLY_Q5_0)) && opt.has_imatrix && il < nl / 8)
        nt = is(FT::MOSTLY_Q4_0) ? DType::Q4_1 : DType::Q5_1;
      ++i_ffn_down;
      return nt;
    }
    if (cat == Cat::AttnOutput) {
      if (!falcon()) {
        if (shape.n_expert == 8) {
          if (is(FT::MOSTLY_Q2_K) || is(FT::MOSTLY_Q3_K_S) || is(FT::MOSTLY_Q3_K_M) || is(FT::MOSTLY_Q4_K_S) ||
              is(FT::MOSTLY_Q4_K_M) || iq4() || is(FT::MOSTLY_IQ3_XS) || is(FT::MOSTLY_IQ3_XXS) ||
              is(FT::MOSTLY_IQ3_S) || is(FT::MOSTLY_IQ3_M))
            nt = DType::Q5_K;
        } else {
          if (is(FT::MOSTLY_Q2_K)) nt = DType::Q3_K;
          else if (is(FT::MOSTLY_IQ3_XXS)) nt = DType::IQ3_S;
          else if (is(FT::MOSTLY_Q3_K_M)) nt = DType::Q4_K;
          else if (is(FT::MOSTLY_Q3_K_L)) nt = DType::Q5_K;
          else if (is(FT::MOSTLY_IQ3_M)) nt = DType::Q4_K;
        }
      } else if (is(FT::MOSTLY_Q3_K_L)) {
        nt = DType::Q4_K;
      }
      return nt;
    }
    if (cat == Cat::FfnGate || cat == Cat::FfnUp) {
      int& counter = cat == Cat::FfnGate ? i_ffn_gate : i_ffn_up;
      TM_ASSIGN_OR_RETURN(auto li, layer_info(counter, t.name));
      const auto [il, nl] = li;
      if (is(FT::MOSTLY_IQ3_XS) && il >= nl / 8 && il < 7 * nl / 8) nt = DType::IQ3_XXS;
      ++counter;
    }
    return nt;
  }
};

// Types whose block does not divide the row fall back to a type that does (llama.cpp's table, then
// F16 as the last resort).
DType fallback(DType target, int64_t ncols, std::string* note) {
  const int64_t bs = dtype_info(target).block_size;
  if (ncols % bs == 0) return target;
  DType fb;
  switch (target) {
    case DType::Q2_K: case DType::Q3_K: fb = DType::Q4_0; break;
    case DType::Q4_K: fb = DType::Q5_0; break;
    case DType::Q5_K: fb = DType::Q5_1; break;
    case DType::Q6_K: fb = DType::Q8_0; break;
    case DType::IQ1_S: case DType::IQ1_M: case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S:
    case DType::IQ3_XXS: case DType::IQ3_S: case DType::IQ4_XS: fb = DType::IQ4_NL; break;
    default: fb = DType::F16; break;
  }
  if (ncols % dtype_info(fb).block_size != 0) fb = DType::F16;
  *note = fmt::format("ncols {} not divisible by {} for {}: fell back to {}", ncols, bs, dtype_name(target), dtype_name(fb));
  return fb;
}

}  // namespace

Result<QuantRecipe> recipe_from_name(std::string_view name) {
  std::string u = upper(name);
  if (u == "Q3_K") u = "Q3_K_M";
  if (u == "Q4_K") u = "Q4_K_M";
  if (u == "Q5_K") u = "Q5_K_M";
  if (u == "MXFP4") u = "MXFP4_MOE";
  for (const QuantRecipe& r : recipes())
    if (r.name == u) return r;
  int num = -1;
  auto [p, ec] = std::from_chars(u.data(), u.data() + u.size(), num);
  if (ec == std::errc() && p == u.data() + u.size())
    for (const QuantRecipe& r : recipes())
      if (static_cast<int>(r.ftype) == num) return r;
  std::string names;
  for (const QuantRecipe& r : recipes()) names += (names.empty() ? "" : ", ") + r.name;
  return Error{fmt::format("unknown quantization type '{}' (supported: {}; aliases Q3_K, Q4_K, Q5_K, MXFP4)", name, names)};
}

std::vector<QuantRecipe> all_recipes() { return recipes(); }

bool tensor_requires_imatrix(const std::string& name, DType target, LlamaFileType ftype) {
  const Cat c = category(name);
  if (c == Cat::TokenEmbd || c == Cat::Output) return false;
  switch (target) {
    case DType::IQ1_S: case DType::IQ1_M: case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S:
    case DType::IQ3_XXS: return true;
    case DType::Q2_K: return ftype == FT::MOSTLY_Q2_K_S;
    default: return false;
  }
}

bool tensor_allows_quantization(const QuantTensorDesc& t) {
  if (n_dims(t.ne) < 2) return false;
  const std::string& n = t.name;
  if (n.size() < 6 || n.compare(n.size() - 6, 6, "weight") != 0) return false;
  static const char* const kNever[] = {
      "_norm.weight", "ffn_gate_inp.weight", "altup", "laurel", "per_layer_model_proj", "ssm_conv1d",
      "shortconv.conv.weight", "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
      "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
      "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
      "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
      "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd", ".patch_embd", ".patch_merger",
      ".rel_pos"};
  for (const char* part : kNever)
    if (contains(n, part)) return false;
  return n != "position_embd.weight" && n != "token_types.weight";
}

Result<std::vector<QuantTensorPlan>> plan_tensor_types(const QuantRecipe& recipe, const QuantModelShape& shape,
                                                  const std::vector<QuantTensorDesc>& tensors, const QuantPlanOptions& opt) {
  State st{recipe, shape, opt};
  for (const QuantTensorDesc& t : tensors) {
    const Cat c = category(t.name);
    if (is_attn_v_like(c)) ++st.n_attention_wv;
    if (c == Cat::Output) st.tied = false;
  }
  st.n_ffn = static_cast<int>(shape.n_layer);
  if (st.n_ffn <= 0)  // no block_count: count the FFN-down matrices instead
    st.n_ffn = static_cast<int>(std::count_if(tensors.begin(), tensors.end(),
                                              [](const QuantTensorDesc& t) { return category(t.name) == Cat::FfnDown; }));

  // llama.cpp walks tensors sorted by layer number, then name; the counters depend on that order.
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int la = layer_of(tensors[a].name), lb = layer_of(tensors[b].name);
    return la != lb ? la < lb : tensors[a].name < tensors[b].name;
  });

  const bool quantized_default = dtype_info(recipe.default_type).quantized;
  std::vector<QuantTensorPlan> plans(tensors.size());
  for (size_t idx : order) {
    const QuantTensorDesc& t = tensors[idx];
    QuantTensorPlan& p = plans[idx];
    p.target = t.type;
    p.quantize = tensor_allows_quantization(t) && !(opt.leave_output_tensor && t.name == "output.weight");
    if (!p.quantize) continue;
    const Cat c = category(t.name);
    DType nt = recipe.default_type;
    if (opt.token_embedding_type && c == Cat::TokenEmbd) nt = *opt.token_embedding_type;
    else if (opt.output_tensor_type && c == Cat::Output) nt = *opt.output_tensor_type;
    else if (quantized_default && !opt.pure) {
      TM_ASSIGN_OR_RETURN(nt, st.mixture_type(t, c, nt));
    }
    p.target = fallback(nt, t.ne[0], &p.note);
    if (!opt.has_imatrix && tensor_requires_imatrix(t.name, p.target, recipe.ftype))
      return Error{fmt::format("{} needs an importance matrix (--imatrix): tensor {} would be {}, which llama.cpp "
                               "does not quantize without one (the result would be garbage); {}",
                               recipe.name, t.name, dtype_name(p.target), kImatrixHowTo)};
  }
  return plans;
}

}  // namespace tmill
