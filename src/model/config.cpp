#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include <fmt/format.h>

namespace tmill {
namespace {
std::map<std::string, ArchSpec>& registry() {
  static std::map<std::string, ArchSpec> r;
  return r;
}
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
void register_builtin_archs();

Result<int64_t> req_int(const GgufFile& f, const std::string& key, int64_t min, int64_t max) {
  const GgufValue* v = f.find(key);
  if (!v) return Error{fmt::format("missing metadata key '{}'", key)};
  auto i = v->as_int();
  if (!i) return Error{fmt::format("metadata key '{}' must be an integer", key)};
  if (*i < min || *i > max) return Error{fmt::format("metadata key '{}' = {} is out of range [{}, {}]", key, *i, min, max)};
  return *i;
}

Result<int64_t> opt_int(const GgufFile& f, const std::string& key, int64_t def, int64_t min, int64_t max) {
  if (!f.find(key)) return def;
  return req_int(f, key, min, max);
}

Result<float> opt_float(const GgufFile& f, const std::string& key, float def) {
  const GgufValue* v = f.find(key);
  if (!v) return def;
  auto d = v->as_number();
  if (!d || v->type == GgufType::BOOL) return Error{fmt::format("metadata key '{}' must be a number", key)};
  return static_cast<float>(*d);
}
// Mamba-2's ssm.* keys (ArchSpec::ssm), as llama.cpp reads them; the shapes its graph assumes.
Status read_ssm_config(const GgufFile& f, const std::string& a, ModelConfig& c) {
  TM_ASSIGN_OR_RETURN(c.ssm_d_conv, req_int(f, a + "ssm.conv_kernel", 1, 64));
  TM_ASSIGN_OR_RETURN(c.ssm_d_inner, req_int(f, a + "ssm.inner_size", 1, 1 << 20));
  TM_ASSIGN_OR_RETURN(c.ssm_d_state, req_int(f, a + "ssm.state_size", 1, 4096));
  TM_ASSIGN_OR_RETURN(c.ssm_n_head, req_int(f, a + "ssm.time_step_rank", 1, 1 << 16));
  TM_ASSIGN_OR_RETURN(c.ssm_n_group, req_int(f, a + "ssm.group_count", 1, 1 << 16));
  if (c.ssm_d_inner % c.ssm_n_head != 0)
    return Error{fmt::format("{}ssm.inner_size {} is not a multiple of ssm.time_step_rank {} (the heads)", a,
                             c.ssm_d_inner, c.ssm_n_head)};
  if (c.ssm_n_head % c.ssm_n_group != 0)
    return Error{fmt::format("{}ssm.time_step_rank {} (the heads) is not a multiple of ssm.group_count {}", a,
                             c.ssm_n_head, c.ssm_n_group)};
  if (c.arch.gated_delta_net && c.ssm_head_dim() != c.ssm_d_state)  // (llama.cpp's delta net: S_k == S_v)
    return Error{fmt::format("{}ssm.inner_size {} over {} value heads is not ssm.state_size {} (the key heads' size)",
                             a, c.ssm_d_inner, c.ssm_n_head, c.ssm_d_state)};
  return {};
}

Status read_mamba1_config(const GgufFile& f, const std::string& a, ModelConfig& c);

// mamba and mamba2 (ArchSpec::attention_free): every layer one mixer, no attention, no FFN (llama.cpp's
// converter writes head_count 0 and feed_forward_length 0). The attention fields get placeholders nothing
// reads -- one head of two dimensions -- as no layer has K/V (n_kv_layers 0); the mixers' keys as
// llama.cpp reads them (Mamba-1: time_step_rank is dt's rank, its heads are its channels).
Status read_attention_free(const GgufFile& f, const std::string& a, ModelConfig& c) {
  c.n_head = c.n_head_kv = 1;
  c.n_ff = 1;
  c.ssm_layer.assign(static_cast<size_t>(c.n_layer), 1);
  c.no_ffn.assign(static_cast<size_t>(c.n_layer), 1);
  c.ffn_only.assign(static_cast<size_t>(c.n_layer), 0);
  c.cache_slot.resize(static_cast<size_t>(c.n_layer));
  for (int64_t l = 0; l < c.n_layer; ++l) c.cache_slot[static_cast<size_t>(l)] = static_cast<int32_t>(l);
  return c.arch.mamba1 ? read_mamba1_config(f, a, c) : read_ssm_config(f, a, c);
}

// Mamba-1's ssm.* keys (ArchSpec::mamba1: mamba, jamba), as llama.cpp reads them: time_step_rank is dt's
// rank; the heads are the d_inner channels, one dimension each, and there are no groups.
Status read_mamba1_config(const GgufFile& f, const std::string& a, ModelConfig& c) {
  TM_ASSIGN_OR_RETURN(c.ssm_d_conv, req_int(f, a + "ssm.conv_kernel", 1, 64));
  TM_ASSIGN_OR_RETURN(c.ssm_d_inner, req_int(f, a + "ssm.inner_size", 1, 1 << 20));
  TM_ASSIGN_OR_RETURN(c.ssm_d_state, req_int(f, a + "ssm.state_size", 1, 4096));
  TM_ASSIGN_OR_RETURN(c.ssm_dt_rank, req_int(f, a + "ssm.time_step_rank", 1, 1 << 16));
  if (c.ssm_d_inner != 2 * c.n_embd)  // (llama.cpp: "only an expansion factor of 2 is supported")
    return Error{fmt::format("{}ssm.inner_size {} is not 2 x embedding_length {} (Mamba-1's expansion)", a,
                             c.ssm_d_inner, c.n_embd)};
  c.ssm_n_head = c.ssm_d_inner;
  c.ssm_n_group = 0;
  if (const GgufValue* v = f.find(a + "ssm.dt_b_c_rms")) {
    const std::optional<bool> on = v->as_bool();
    if (!on) return Error{fmt::format("metadata key '{}ssm.dt_b_c_rms' must be a bool", a)};
    c.ssm_dt_b_c_rms = *on;
  }
  return {};
}

// The gated delta net's layers (ArchSpec::gated_delta_net), as llama.cpp marks them:
// attention.recurrent_layers (a bool or number per layer), else every full_attention_interval-th layer
// (default 4) is attention and the others recurrent.
Status read_recurrent_layers(const GgufFile& f, const std::string& a, ModelConfig& c) {
  c.ssm_layer.assign(static_cast<size_t>(c.n_layer), 0);
  if (const GgufValue* v = f.find(a + "attention.recurrent_layers")) {
    const auto arr = v->as_int_array();  // (bools or numbers)
    if (!arr || arr->size() < static_cast<size_t>(c.n_layer))
      return Error{fmt::format("{}attention.recurrent_layers must hold a value per layer ({} layers)", a, c.n_layer)};
    for (int64_t l = 0; l < c.n_layer; ++l) c.ssm_layer[static_cast<size_t>(l)] = (*arr)[static_cast<size_t>(l)] != 0;
  } else {
    TM_ASSIGN_OR_RETURN(const int64_t interval, opt_int(f, a + "full_attention_interval", 4, 1, 4096));
    for (int64_t l = 0; l < c.n_layer; ++l) c.ssm_layer[static_cast<size_t>(l)] = (l + 1) % interval != 0;
  }
  if (c.n_ssm_layers() == c.n_layer) return Error{fmt::format("{}: no layer has attention", c.arch.name)};
  return {};
}

// nemotron_h's layers (ArchSpec::single_block_layers): feed_forward_length per layer; a layer with an
// FFN entry has no mixer (its head_count_kv entry must be 0), one without has no FFN. Sets n_ff to the
// FFN layers' width (they must agree).
Status read_single_block_layers(const GgufFile& f, const std::string& a, ModelConfig& c) {
  const std::string key = a + "feed_forward_length";
  const GgufValue* v = f.find(key);
  const auto ff = v ? v->as_int_array() : std::nullopt;
  if (!ff || ff->size() < static_cast<size_t>(c.n_layer))
    return Error{fmt::format("{} must hold a width per layer ({} layers; 0: no FFN)", key, c.n_layer)};
  c.no_ffn.assign(static_cast<size_t>(c.n_layer), 0);
  c.ffn_only.assign(static_cast<size_t>(c.n_layer), 0);
  c.n_ff = 0;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const int64_t n = (*ff)[static_cast<size_t>(l)];
    if (n < 0 || n > (1 << 22)) return Error{fmt::format("{}[{}] = {} is out of range", key, l, n)};
    if (n == 0) {
      c.no_ffn[static_cast<size_t>(l)] = 1;
      continue;
    }
    if (!c.is_ssm(l))
      return Error{fmt::format("{}: layer {} has both attention and an FFN ({} rows)", c.arch.name, l, n)};
    if (c.n_ff != 0 && n != c.n_ff)
      return Error{fmt::format("{}: per-layer FFN widths ({} at layer {}, {} before) are not supported", key, n, l, c.n_ff)};
    c.n_ff = n;
    c.ssm_layer[static_cast<size_t>(l)] = 0;  // (head_count_kv 0 marked it a mixer)
    c.ffn_only[static_cast<size_t>(l)] = 1;
  }
  if (c.n_ff == 0) c.n_ff = 1;  // (no FFN layer at all: pure Mamba-2 stacks)
  if (c.n_ssm_layers() == 0) c.ssm_layer.clear();
  return {};
}

// attention.head_count_kv: one number, or (lfm2: ArchSpec::shortconv) one per layer, 0 marking a
// convolution layer; llama.cpp also reads per-layer counts for other families (OpenELM's vary), which
// tokenmill does not compute. Sets the layers' cache slots (ModelConfig::cache_slot).
Status read_head_count_kv(const GgufFile& f, const std::string& a, ModelConfig& c) {
  const std::string key = a + "attention.head_count_kv";
  const GgufValue* v = f.find(key);
  if (v && v->type == GgufType::ARRAY) {
    auto per_layer = v->as_int_array();
    if (!per_layer || per_layer->size() < static_cast<size_t>(c.n_layer))
      return Error{fmt::format("{} must hold a count per layer ({} layers)", key, c.n_layer)};
    c.n_head_kv = 0;
    c.conv_layer.assign(static_cast<size_t>(c.n_layer), 0);
    c.ssm_layer.assign(static_cast<size_t>(c.n_layer), 0);
    for (int64_t l = 0; l < c.n_layer; ++l) {
      const int64_t n = (*per_layer)[static_cast<size_t>(l)];
      if (n < 0 || n > 4096) return Error{fmt::format("{}[{}] = {} is out of range", key, l, n)};
      if (n == 0 && c.arch.shortconv) {
        c.conv_layer[static_cast<size_t>(l)] = 1;
        continue;
      }
      if (n == 0 && c.arch.ssm) {  // a mixer (nemotron_h: or, by feed_forward_length, an FFN)
        c.ssm_layer[static_cast<size_t>(l)] = 1;
        continue;
      }
      if (n == 0 && c.arch.variable_layers) {  // deci: no attention (ffn_only), or linear attention
        if (!c.has_mixer(l)) continue;
        c.linear_attn.resize(static_cast<size_t>(c.n_layer), 0);
        c.linear_attn[static_cast<size_t>(l)] = 1;
        continue;
      }
      if (n > 0 && c.arch.layer_geometry) {  // gemma4: the full layers' count, the sliding layers' count
        c.layer_shape.resize(static_cast<size_t>(c.n_layer), ModelConfig::LayerShape{0, 0, 0, 0});
        c.layer_shape[static_cast<size_t>(l)].n_head_kv = n;
        c.n_head_kv = std::max(c.n_head_kv, n);
        continue;
      }
      if (n == 0 || (c.n_head_kv != 0 && n != c.n_head_kv))
        return Error{fmt::format("{}: per-layer KV head counts ({} at layer {}) are not supported for '{}'", key, n, l,
                                 c.arch.name)};
      c.n_head_kv = n;
    }
    if (c.n_head_kv == 0 && !c.arch.variable_layers) return Error{fmt::format("{}: no layer has attention", key)};
    if (c.n_head_kv == 0) c.n_head_kv = 1;  // (deci without attention layers: a placeholder, no K/V is cached)
    if (c.n_conv_layers() == 0) c.conv_layer.clear();
    if (c.n_ssm_layers() == 0) c.ssm_layer.clear();
  } else {
    if (c.arch.shortconv || (c.arch.ssm && !c.arch.gated_delta_net && !c.arch.parallel_ssm))
      return Error{fmt::format("{} must hold a count per layer (0: a convolution or mixer layer)", key)};
    TM_ASSIGN_OR_RETURN(c.n_head_kv, opt_int(f, key, c.n_head, 1, 4096));
    if (c.arch.gated_delta_net) TM_TRY(read_recurrent_layers(f, a, c));
    if (c.arch.parallel_ssm) c.ssm_layer.assign(static_cast<size_t>(c.n_layer), 1);  // (and attention on each)
  }
  c.cache_slot.assign(static_cast<size_t>(c.n_layer), 0);
  if (c.arch.single_block_layers) TM_TRY(read_single_block_layers(f, a, c));
  int32_t kv = 0, conv = 0, ssm = 0;
  for (int64_t l = 0; l < c.n_layer; ++l)
    c.cache_slot[static_cast<size_t>(l)] =
        !c.has_mixer(l) || c.is_linear_attn(l) ? -1 : c.is_conv(l) ? conv++ : c.is_ssm(l) && !c.arch.parallel_ssm ? ssm++ : kv++;  // (falcon-h1: l for both)
  if (c.arch.shortconv) {  // the kernel's length: this token and shortconv_l - 1 before it
    TM_ASSIGN_OR_RETURN(c.shortconv_l, req_int(f, a + "shortconv.l_cache", 2, 64));
  }
  if (c.arch.ssm) TM_TRY(c.arch.mamba1 ? read_mamba1_config(f, a, c) : read_ssm_config(f, a, c));
  return {};
}

// attention.head_count as one count per layer (ArchSpec::variable_layers): into ModelConfig::layer_shape,
// n_head the largest; 0 marks a layer without attention (ModelConfig::ffn_only).
Status read_layer_heads(const GgufValue& v, const std::string& a, ModelConfig& c) {
  const auto heads = v.as_int_array();
  if (!heads || heads->size() != static_cast<size_t>(c.n_layer))
    return Error{fmt::format("{}attention.head_count must hold one count per layer ({} layers)", a, c.n_layer)};
  c.layer_shape.resize(static_cast<size_t>(c.n_layer), ModelConfig::LayerShape{0, 0, 0, 0});
  c.ffn_only.assign(static_cast<size_t>(c.n_layer), 0);
  c.n_head = 0;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const int64_t n = (*heads)[static_cast<size_t>(l)];
    if (n < 0 || n > 4096) return Error{fmt::format("{}attention.head_count[{}] = {} is out of range", a, l, n)};
    c.layer_shape[static_cast<size_t>(l)].n_head = n;
    c.ffn_only[static_cast<size_t>(l)] = n == 0;
    c.n_head = std::max(c.n_head, n);
  }
  if (c.n_head == 0) return Error{fmt::format("{}attention.head_count: no layer has attention", a)};
  if (c.n_ffn_only_layers() == 0) c.ffn_only.clear();
  return {};
}

// feed_forward_length as one width per layer (ArchSpec::layer_geometry): into ModelConfig::layer_shape,
// n_ff the widest.
Status read_layer_ff(const GgufValue& v, const std::string& a, ModelConfig& c) {
  const auto ff = v.as_int_array();
  if (!ff || ff->size() != static_cast<size_t>(c.n_layer))
    return Error{fmt::format("{}feed_forward_length must hold one width per layer ({} layers)", a, c.n_layer)};
  c.layer_shape.resize(static_cast<size_t>(c.n_layer), ModelConfig::LayerShape{0, 0, 0, 0});
  c.n_ff = 0;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const int64_t n = (*ff)[static_cast<size_t>(l)];
    if (n < (c.arch.variable_layers ? 0 : 1) || n > (1 << 22))
      return Error{fmt::format("{}feed_forward_length[{}] = {} is out of range", a, l, n)};
    if (n == 0) {  // deci: a layer without an FFN
      c.no_ffn.resize(static_cast<size_t>(c.n_layer), 0);
      c.no_ffn[static_cast<size_t>(l)] = 1;
    }
    c.layer_shape[static_cast<size_t>(l)].n_ff = n;
    c.n_ff = std::max(c.n_ff, n);
  }
  return {};
}

// Expert counts and sizes, as llama.cpp reads them for the family (see ArchSpec::moe*).
Status read_moe_config(const GgufFile& f, const std::string& a, ModelConfig& c) {
  if (c.arch.moe == ArchSpec::Moe::None) {
    if (auto n = f.get_int(a + "expert_count"); n && *n > 1)
      return Error{fmt::format("{}expert_count {}: experts are not supported for architecture '{}'", a, *n, c.arch.name)};
    return {};
  }
  TM_ASSIGN_OR_RETURN(c.n_expert, opt_int(f, a + "expert_count", 0, 0, 4096));
  if (c.n_expert <= 1) {  // llama.cpp: one expert or none is a dense model
    if (c.arch.moe == ArchSpec::Moe::Required)
      return Error{fmt::format("metadata key '{}expert_count' must be > 1 for architecture '{}'", a, c.arch.name)};
    c.n_expert = 0;
    return {};
  }
  TM_ASSIGN_OR_RETURN(c.n_expert_used, req_int(f, a + "expert_used_count", 1, c.n_expert));
  // grouped routing (DeepSeek-V3): as llama.cpp, whatever the family
  TM_ASSIGN_OR_RETURN(c.moe_groups, opt_int(f, a + "expert_group_count", 1, 0, std::min<int64_t>(c.n_expert - 1, 64)));
  if (c.moe_groups <= 1) {
    c.moe_groups = 1;
  } else {
    TM_ASSIGN_OR_RETURN(c.moe_groups_used, req_int(f, a + "expert_group_used_count", 1, c.moe_groups - 1));
    if (c.n_expert % c.moe_groups != 0 || c.n_expert / c.moe_groups < 2)
      return Error{fmt::format("{}expert_group_count {}: {} experts do not split into groups of two or more", a,
                               c.moe_groups, c.n_expert)};
    if (c.n_expert_used > c.moe_groups_used * (c.n_expert / c.moe_groups))
      return Error{fmt::format("{}expert_used_count {} exceeds the experts of {} groups", a, c.n_expert_used,
                               c.moe_groups_used)};
  }
  // llama.cpp: 1 softmax, 2 sigmoid; gpt-oss's gating is fixed by its architecture (the key is ignored)
  if (auto g = f.get_int(a + "expert_gating_func"); g && *g != 1 && !c.arch.moe_softmax_topk && !c.arch.moe_gating_key)
    return Error{fmt::format("{}expert_gating_func {}: only softmax gating (1) is supported for '{}'", a, *g, c.arch.name)};
  c.n_ff_exp = c.n_ff;
  if (c.arch.moe_expert_ff_key) {
    TM_ASSIGN_OR_RETURN(c.n_ff_exp, opt_int(f, a + "expert_feed_forward_length", c.n_ff / c.n_expert_used, 1, 1 << 22));
  }
  if (c.n_ff_exp < 1) return Error{fmt::format("{}expert_feed_forward_length must be positive", a)};
  if (c.arch.moe_shared_expert) {
    TM_ASSIGN_OR_RETURN(c.n_ff_shexp, opt_int(f, a + "expert_shared_feed_forward_length", c.n_ff, 1, 1 << 22));
  } else if (auto sh = f.get_int(a + "expert_shared_feed_forward_length"); sh && *sh > 0 && !c.arch.moe_shared_ungated)
    return Error{fmt::format("{}expert_shared_feed_forward_length: shared experts are not supported for '{}'", a, c.arch.name)};
  return {};
}
}  // namespace

void register_arch(const ArchSpec& spec) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[spec.name] = spec;
}

const ArchSpec* find_arch(const std::string& name) {
  register_builtin_archs();
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : &it->second;
}

std::vector<std::string> known_archs() {
  register_builtin_archs();
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> out;
  for (auto& [k, v] : registry()) out.push_back(k);
  return out;
}

// Each family file defines one of these (explicit calls: static registration in a static library
// would be dropped by the linker).
ArchSpec arch_llama();
ArchSpec arch_qwen2();
ArchSpec arch_qwen3();
ArchSpec arch_phi3();
ArchSpec arch_qwen2moe();
ArchSpec arch_qwen3moe();
ArchSpec arch_olmoe();
ArchSpec arch_gemma2();
ArchSpec arch_gemma3();
ArchSpec arch_gemma_embedding();
ArchSpec arch_gptoss();
ArchSpec arch_gemma();
ArchSpec arch_granite();
ArchSpec arch_smollm3();
ArchSpec arch_olmo2();
ArchSpec arch_exaone();
ArchSpec arch_exaone4();
ArchSpec arch_ernie4_5();
ArchSpec arch_glm4();
ArchSpec arch_granitemoe();
ArchSpec arch_mistral3();
ArchSpec arch_glm4moe();
ArchSpec arch_deepseek2();
ArchSpec arch_ernie4_5_moe();
ArchSpec arch_minimax_m2();
ArchSpec arch_dots1();
ArchSpec arch_seed_oss();
ArchSpec arch_command_r();
ArchSpec arch_cohere2();
ArchSpec arch_llama4();
ArchSpec arch_starcoder2();
ArchSpec arch_phi2();
ArchSpec arch_stablelm();
ArchSpec arch_lfm2();
ArchSpec arch_lfm2moe();
ArchSpec arch_bailingmoe2();
ArchSpec arch_hunyuan_dense();
ArchSpec arch_hunyuan_moe();
ArchSpec arch_mistral4();
ArchSpec arch_arcee();
ArchSpec arch_apertus();
ArchSpec arch_exaone_moe();
ArchSpec arch_granitehybrid();
ArchSpec arch_qwen35();
ArchSpec arch_qwen35moe();
ArchSpec arch_nemotron_h();
ArchSpec arch_nemotron_h_moe();
ArchSpec arch_qwen2vl();
ArchSpec arch_qwen3next();
ArchSpec arch_falcon_h1();
ArchSpec arch_minicpm();
ArchSpec arch_internlm2();
ArchSpec arch_mamba();
ArchSpec arch_mamba2();
ArchSpec arch_jamba();
ArchSpec arch_orion();
ArchSpec arch_xverse();
ArchSpec arch_gpt2();
ArchSpec arch_starcoder();
ArchSpec arch_gptneox();
ArchSpec arch_falcon();
ArchSpec arch_bloom();
ArchSpec arch_mpt();
ArchSpec arch_olmo();
ArchSpec arch_baichuan();
ArchSpec arch_chatglm();
ArchSpec arch_codeshell();
ArchSpec arch_deepseek();
ArchSpec arch_refact();
ArchSpec arch_jais2();
ArchSpec arch_jais();
ArchSpec arch_plamo();
ArchSpec arch_gemma4();
ArchSpec arch_nemotron();
ArchSpec arch_deci();
ArchSpec arch_phimoe();
ArchSpec arch_afmoe();
ArchSpec arch_qwen();
ArchSpec arch_openelm();
ArchSpec arch_qwen3vl();
ArchSpec arch_qwen3vlmoe();

namespace {
void register_builtin_archs() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const ArchSpec& s : {arch_llama(), arch_qwen2(), arch_qwen3(), arch_phi3(), arch_qwen2moe(), arch_qwen3moe(), arch_olmoe(),
                               arch_gemma2(), arch_gemma3(), arch_gemma_embedding(), arch_gptoss(), arch_gemma(), arch_granite(), arch_smollm3(),
                               arch_olmo2(), arch_exaone(), arch_exaone4(), arch_ernie4_5(), arch_glm4(), arch_granitemoe(), arch_mistral3(),
                               arch_glm4moe(), arch_deepseek2(), arch_ernie4_5_moe(), arch_minimax_m2(), arch_dots1(),
                               arch_seed_oss(), arch_command_r(), arch_cohere2(), arch_llama4(),
                               arch_starcoder2(), arch_phi2(), arch_stablelm(), arch_lfm2(), arch_lfm2moe(),
                               arch_bailingmoe2(), arch_hunyuan_dense(), arch_hunyuan_moe(), arch_mistral4(), arch_arcee(), arch_apertus(), arch_exaone_moe(),
                               arch_granitehybrid(), arch_qwen35(), arch_qwen35moe(),
                               arch_nemotron_h(), arch_nemotron_h_moe(), arch_qwen2vl(), arch_qwen3vl(), arch_qwen3vlmoe(), arch_qwen3next(),
                               arch_falcon_h1(), arch_minicpm(), arch_internlm2(), arch_afmoe(), arch_qwen(), arch_openelm(),
                               arch_mamba(), arch_mamba2(), arch_jamba(), arch_orion(), arch_xverse(),
                               arch_gpt2(), arch_starcoder(), arch_gptneox(), arch_falcon(), arch_bloom(), arch_mpt(),
                               arch_olmo(), arch_baichuan(), arch_chatglm(), arch_codeshell(), arch_deepseek(), arch_refact(), arch_jais2(), arch_jais(), arch_plamo(),
                               arch_gemma4(), arch_nemotron(), arch_deci(), arch_phimoe()})
      registry()[s.name] = s;
  });
}
}  // namespace

Result<bool> read_sliding_window(const GgufFile& f, ModelConfig& c, int64_t def, int64_t pattern) {
  const std::string a = c.arch.name + ".";
  TM_ASSIGN_OR_RETURN(c.n_swa, opt_int(f, a + "attention.sliding_window", def, 0, 1ll << 32));
  if (c.n_swa == 0) return false;
  std::vector<bool> slides(static_cast<size_t>(c.n_layer));
  const std::string pkey = a + "attention.sliding_window_pattern";
  const GgufValue* pv = f.find(pkey);
  if (pv && pv->type == GgufType::ARRAY) {  // one bool (or integer) per layer
    auto v = pv->as_int_array();
    if (!v) return Error{fmt::format("{} must hold booleans", pkey)};
    if (v->size() != static_cast<size_t>(c.n_layer))
      return Error{fmt::format("{} has {} entries for {} layers", pkey, v->size(), c.n_layer)};
    for (size_t l = 0; l < v->size(); ++l) slides[l] = (*v)[l] != 0;
  } else {
    TM_ASSIGN_OR_RETURN(pattern, opt_int(f, pkey, pattern, 0, 1 << 20));
    for (int64_t l = 0; l < c.n_layer; ++l) slides[static_cast<size_t>(l)] = pattern == 0 || l % pattern < pattern - 1;
  }
  for (int64_t l = 0; l < c.n_layer; ++l)
    if (slides[static_cast<size_t>(l)]) c.layer_attn[static_cast<size_t>(l)].window = c.n_swa;
  return true;
}

void set_sliding_rope(ModelConfig& c, float theta, float freq_scale) {
  RopeParams r = c.ropes[0];
  r.theta = theta;
  r.freq_scale = freq_scale;
  set_sliding_rope(c, r);
}

void set_sliding_rope(ModelConfig& c, const RopeParams& r) {
  if (r == c.ropes[0]) return;
  c.ropes.push_back(r);
  const int idx = static_cast<int>(c.ropes.size()) - 1;
  for (auto& la : c.layer_attn)
    if (la.window > 0) la.rope = idx;
}

Status read_expert_gating(const GgufFile& f, ModelConfig& c, int64_t default_gating) {
  const std::string a = c.arch.name + ".";
  TM_ASSIGN_OR_RETURN(const int64_t gating, opt_int(f, a + "expert_gating_func", default_gating, 0, 1 << 20));
  if (gating != 1 && gating != 2)
    return gating == 0 ? Error{fmt::format("missing metadata key '{}expert_gating_func'", a)}
                       : Error{fmt::format("{}expert_gating_func {}: softmax (1) or sigmoid (2) gating only", a, gating)};
  c.moe_sigmoid = gating == 2;
  TM_ASSIGN_OR_RETURN(c.n_layer_dense_lead, opt_int(f, a + "leading_dense_block_count", 0, 0, c.n_layer));
  return {};
}

Status read_deepseek_moe(const GgufFile& f, ModelConfig& c, int64_t default_gating) {
  TM_TRY(read_expert_gating(f, c, default_gating));
  const std::string a = c.arch.name + ".";
  TM_ASSIGN_OR_RETURN(const int64_t shared, req_int(f, a + "expert_shared_count", 0, 64));
  c.n_ff_shexp = shared * c.n_ff_exp;
  return read_expert_weighting(f, c);
}

Status read_expert_weighting(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch.name + ".";
  TM_ASSIGN_OR_RETURN(const float scale, opt_float(f, a + "expert_weights_scale", 0.0f));
  if (!(scale >= 0) || !std::isfinite(scale))
    return Error{fmt::format("{}expert_weights_scale {} must be finite and not negative", a, scale)};
  c.moe_weights_scale = scale == 0.0f ? 1.0f : scale;  // llama.cpp: 0 (absent) is no scaling
  if (const GgufValue* n = f.find(a + "expert_weights_norm")) {
    auto b = n->as_bool();
    if (!b) return Error{fmt::format("{}expert_weights_norm must be a boolean", a)};
    c.arch.moe_norm_topk = *b;
  }
  return {};
}

void set_deepseek_style_moe(ArchSpec& s) {
  s.moe = ArchSpec::Moe::Required;
  s.moe_expert_ff_key = true;
  s.moe_shared_ungated = true;
  s.moe_gating_key = true;
  s.moe_selection_bias = true;
  s.moe_selection_bias_required = false;
}

Result<bool> read_mrope_sections(const GgufFile& f, ModelConfig& c, bool interleaved, bool required) {
  const std::string key = c.arch.name + ".rope.dimension_sections";
  const GgufValue* v = f.find(key);
  if (!v) {
    if (required) return Error{fmt::format("missing metadata key '{}'", key)};
    return false;
  }
  const auto s = v->as_int_array();
  if (!s || s->size() < 3 || s->size() > 4) return Error{fmt::format("{} must hold 3 or 4 section sizes", key)};
  const int64_t s0 = (*s)[0], s1 = (*s)[1], s2 = (*s)[2], s3 = s->size() > 3 ? (*s)[3] : 0;
  const int64_t total = s0 + s1 + s2 + s3;
  if (s0 < 0 || s1 < 0 || s2 < 0 || s3 < 0 || total > c.head_dim)
    return Error{fmt::format("{} [{}, {}, {}, {}] is out of range", key, s0, s1, s2, s3)};
  if (!(s0 > 0 && s1 > 0)) {
    if (required) return Error{fmt::format("{} [{}, {}, {}, {}]: the first two sections must not be empty", key, s0, s1, s2, s3)};
    return false;
  }
  std::vector<uint8_t> still(static_cast<size_t>(c.n_rot / 2), 0);
  bool any = false;
  for (int64_t i = 0; i < c.n_rot / 2; ++i) {
    const int64_t sec = i % total;
    const bool text = interleaved ? (sec % 3 == 1 && sec < 3 * s1) || (sec % 3 == 2 && sec < 3 * s2) ||
                                        (sec % 3 == 0 && sec < 3 * s0)
                                  : sec < s0 + s1 + s2;
    still[static_cast<size_t>(i)] = !text;
    any = any || !text;
  }
  if (any)
    for (RopeParams& r : c.ropes) r.still = still;
  return true;
}

void set_gpt_layer(ArchSpec& s) {
  s.layer_norm = true;
  s.norm_bias = true;
  s.ffn_ungated = true;
  s.ffn_bias = true;
  s.ffn_act = FfnActivation::GeluTanh;
  s.attn_out_bias = true;
}

Status read_whole_head_rope(const GgufFile&, ModelConfig& c) {
  if (c.n_rot != c.head_dim)
    return Error{fmt::format("{}.rope.dimension_count {} must be the head dimension {} (as llama.cpp requires)",
                             c.arch.name, c.n_rot, c.head_dim)};
  return {};
}

namespace {
// An optional float key of the family ({arch}.<key>, `def` when absent) that must be finite and >= 0.
Result<float> read_nonnegative(const GgufFile& f, const ModelConfig& c, const std::string& key) {
  TM_ASSIGN_OR_RETURN(const float v, read_family_float(f, c, key, 0.0f));
  if (!(v >= 0.0f) || !std::isfinite(v))
    return Error{fmt::format("{}.{} {} must be finite and not negative", c.arch.name, key, v)};
  return v;
}
}  // namespace

Status read_alibi_key(const GgufFile& f, ModelConfig& c) {
  TM_ASSIGN_OR_RETURN(const float max_bias, read_nonnegative(f, c, "attention.max_alibi_bias"));
  if (max_bias > 0.0f) set_alibi(c, max_bias);
  else set_no_rope(c);  // (llama.cpp: these families have no RoPE)
  return {};
}

Status read_clamp_kqv(const GgufFile& f, ModelConfig& c) {
  TM_ASSIGN_OR_RETURN(c.clamp_kqv, read_nonnegative(f, c, "attention.clamp_kqv"));
  return {};
}

void set_no_rope(ModelConfig& c) {
  for (LayerAttention& la : c.layer_attn) la.rope = -1;
}

void set_alibi(ModelConfig& c, float max_bias) {
  const auto n = static_cast<int64_t>(1) << static_cast<int>(std::floor(std::log2(static_cast<double>(c.n_head))));
  const float m0 = std::pow(2.0f, -max_bias / static_cast<float>(n));
  const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / static_cast<float>(n));
  c.alibi.resize(static_cast<size_t>(c.n_head));
  for (int64_t h = 0; h < c.n_head; ++h)
    c.alibi[static_cast<size_t>(h)] = h < n ? std::pow(m0, static_cast<float>(h + 1))
                                            : std::pow(m1, static_cast<float>(2 * (h - n) + 1));
  set_no_rope(c);
}

Result<float> read_family_float(const GgufFile& f, const ModelConfig& c, const std::string& key, float def) {
  return opt_float(f, c.arch.name + "." + key, def);
}

Result<int64_t> read_family_int(const GgufFile& f, const ModelConfig& c, const std::string& key,
                                std::optional<int64_t> def, int64_t min, int64_t max) {
  const std::string k = c.arch.name + "." + key;
  return def ? opt_int(f, k, *def, min, max) : req_int(f, k, min, max);
}

Result<ModelConfig> read_model_config(const GgufFile& f) {
  auto arch_name = f.get_string("general.architecture");
  if (!arch_name) return Error{"missing metadata key 'general.architecture'"};
  const ArchSpec* spec = find_arch(*arch_name);
  if (!spec) {
    std::string known;
    for (auto& k : known_archs()) known += (known.empty() ? "" : ", ") + k;
    return Error{fmt::format("unsupported architecture '{}' (supported: {})", *arch_name, known)};
  }
  ModelConfig c;
  c.arch = *spec;
  const std::string a = *arch_name + ".";
  constexpr int64_t kMaxDim = 1 << 20;
  TM_ASSIGN_OR_RETURN(c.n_embd, req_int(f, a + "embedding_length", 1, kMaxDim));
  TM_ASSIGN_OR_RETURN(c.n_layer, req_int(f, a + "block_count", 1, 4096));
  // llama.cpp's NextN / MTP blocks (GLM, EXAONE): the last nextn_predict_layers blocks are a draft
  // head, not layers of the model; their tensors are left unread
  TM_ASSIGN_OR_RETURN(const int64_t nextn, opt_int(f, a + "nextn_predict_layers", 0, 0, c.n_layer - 1));
  c.n_layer -= nextn;
  if (c.arch.attention_free) {
    TM_TRY(read_attention_free(f, a, c));
  } else {
    const GgufValue* hv = f.find(a + "attention.head_count");
    if (c.arch.variable_layers && hv && hv->type == GgufType::ARRAY) {  // deci: a count per layer
      TM_TRY(read_layer_heads(*hv, a, c));
    } else {
      TM_ASSIGN_OR_RETURN(c.n_head, req_int(f, a + "attention.head_count", 1, 4096));
    }
    TM_TRY(read_head_count_kv(f, a, c));
    const GgufValue* ffv = f.find(a + "feed_forward_length");
    if (c.arch.layer_geometry && ffv && ffv->type == GgufType::ARRAY) {  // gemma4: a width per layer
      TM_TRY(read_layer_ff(*ffv, a, c));
    } else if (!c.arch.single_block_layers) {  // (else read per layer with head_count_kv)
      TM_ASSIGN_OR_RETURN(c.n_ff, req_int(f, a + "feed_forward_length", 1, 1 << 22));
    }
  }
  TM_ASSIGN_OR_RETURN(c.n_ctx_train, opt_int(f, a + "context_length", 2048, 1, 1ll << 32));
  if (c.n_head % c.n_head_kv != 0 && !c.arch.variable_layers)  // (deci: checked per layer below)
    return Error{fmt::format("attention.head_count {} is not a multiple of head_count_kv {}", c.n_head, c.n_head_kv)};
  // (deci: llama.cpp divides by the first layer's head count)
  const int64_t first_heads = !c.layer_shape.empty() && c.layer_shape[0].n_head > 0 ? c.layer_shape[0].n_head : c.n_head;
  const int64_t def_hd = c.arch.attention_free ? 2 : c.n_embd / first_heads;
  TM_ASSIGN_OR_RETURN(c.head_dim, opt_int(f, a + "attention.key_length", def_hd, 1, 4096));
  TM_ASSIGN_OR_RETURN(int64_t vdim, opt_int(f, a + "attention.value_length", c.head_dim, 1, 4096));
  if (vdim != c.head_dim && !c.arch.mla) return Error{"attention.value_length != key_length is not supported"};
  if (c.head_dim % 2 != 0) return Error{fmt::format("head dimension {} must be even", c.head_dim)};
  TM_ASSIGN_OR_RETURN(c.n_rot, opt_int(f, a + "rope.dimension_count", c.head_dim, 2, c.head_dim));
  if (c.n_rot % 2 != 0) return Error{"rope.dimension_count must be even"};
  // (the LayerNorm families -- ArchSpec::layer_norm -- keep attention.layer_norm_epsilon in the same field)
  // (nemotron_h: layer_norm_epsilon when the RMS key is absent, as llama.cpp)
  const bool ln_eps = spec->layer_norm || (spec->single_block_layers && !f.find(a + "attention.layer_norm_rms_epsilon"));
  TM_ASSIGN_OR_RETURN(c.rms_eps, opt_float(f, a + (ln_eps ? "attention.layer_norm_epsilon"
                                                                     : "attention.layer_norm_rms_epsilon"), 1e-5f));
  TM_ASSIGN_OR_RETURN(c.rope_theta, opt_float(f, a + "rope.freq_base", 10000.0f));
  if (!(c.rms_eps > 0) || !(c.rope_theta > 0)) return Error{"rms epsilon and rope.freq_base must be positive"};
  // llama.cpp: the type defaults to linear, and rope.scaling.factor (or the old rope.scale_linear)
  // applies to linear and YaRN
  float factor = 0.0f;
  if (auto fac = f.get_number(a + "rope.scaling.factor")) factor = static_cast<float>(*fac);
  else if (auto sl = f.get_number(a + "rope.scale_linear")) factor = static_cast<float>(*sl);
  if (!(factor >= 0)) return Error{"rope.scaling.factor must not be negative"};
  const std::string stype = f.get_string(a + "rope.scaling.type").value_or("linear");
  if (stype == "linear" || stype == "yarn") {
    if (factor > 0 && (factor != 1.0f || stype == "yarn")) {
      c.rope_scaling = stype == "yarn" ? RopeScaling::Yarn : RopeScaling::Linear;
      c.rope_scale_factor = factor;
    }
  } else if (stype == "longrope") {  // the factor tensors below carry it; llama.cpp would also scale by a factor
    if (factor != 0 && factor != 1)
      return Error{fmt::format("rope.scaling.factor {} with rope.scaling.type longrope is not supported", factor)};
  } else if (stype != "none") {
    return Error{fmt::format("unsupported rope scaling type '{}' (supported: none, linear, yarn, longrope, llama3 via "
                             "rope_freqs)", stype)};
  }
  // llama.cpp uses rope_freqs when present, else LongRoPE's factors whenever a file has them
  if (f.find_tensor("rope_freqs.weight")) c.rope_scaling = RopeScaling::Llama3;
  else if (f.find_tensor("rope_factors_long.weight") || f.find_tensor("rope_factors_short.weight"))
    c.rope_scaling = RopeScaling::LongRope;
  // 0 (as some converters write for "none") means the trained context, as in llama.cpp
  TM_ASSIGN_OR_RETURN(c.n_ctx_orig, opt_int(f, a + "rope.scaling.original_context_length", c.n_ctx_train, 0, 1ll << 32));
  if (c.n_ctx_orig == 0) c.n_ctx_orig = c.n_ctx_train;
  TM_ASSIGN_OR_RETURN(c.rope_attn_factor, opt_float(f, a + "rope.scaling.attn_factor", 1.0f));
  if (!(c.rope_attn_factor > 0)) return Error{"rope.scaling.attn_factor must be positive"};
  // The global RoPE every layer uses unless the family says otherwise. YaRN's beta_fast/beta_slow are
  // llama.cpp's defaults: it reads rope.scaling.yarn_* only for families tokenmill does not compute.
  RopeParams rope;
  rope.theta = c.rope_theta;
  rope.freq_scale = c.rope_scaling == RopeScaling::Linear || c.rope_scaling == RopeScaling::Yarn ? 1.0f / c.rope_scale_factor : 1.0f;
  rope.yarn = c.rope_scaling == RopeScaling::Yarn;
  rope.n_ctx_orig = c.n_ctx_orig;
  rope.attn_factor = c.rope_attn_factor;
  c.ropes = {rope};
  c.layer_attn.assign(static_cast<size_t>(c.n_layer), LayerAttention{});
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  const GgufTensorInfo* emb = f.find_tensor("token_embd.weight");
  if (!emb) return Error{"missing tensor 'token_embd.weight'"};
  if (emb->ne.size() != 2 || emb->ne[0] != c.n_embd)
    return Error{fmt::format("token_embd.weight has shape {}x{}, expected {} columns", emb->ne[0],
                             emb->ne.size() > 1 ? emb->ne[1] : 1, c.n_embd)};
  c.n_vocab = emb->ne[1];
  if (auto v = f.get_int(a + "vocab_size"); v && *v != c.n_vocab)
    return Error{fmt::format("{}vocab_size {} disagrees with token_embd.weight rows {}", a, *v, c.n_vocab)};
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  if (c.tied_output && c.arch.output_required)
    return Error{fmt::format("missing tensor 'output.weight' ({}'s output is untied)", c.arch.name)};
  TM_TRY(read_moe_config(f, a, c));
  if (c.arch.read_family) TM_TRY(c.arch.read_family(f, c));
  for (size_t l = 0; l < c.layer_shape.size(); ++l) {  // (the family filled what the file left per layer)
    const ModelConfig::LayerShape& g = c.layer_shape[l];
    const auto li = static_cast<int64_t>(l);
    const bool attn = c.has_attention(li), ffn = c.has_ffn(li);  // (deci's layers may lack either)
    if (g.head_dim <= 0 || (attn && g.n_head_kv <= 0) || g.n_rot <= 0 || (ffn && g.n_ff <= 0) ||
        (attn && c.n_head_of(li) % g.n_head_kv != 0) || g.head_dim % 2 != 0 || g.n_rot > g.head_dim)
      return Error{fmt::format("{}: layer {}'s geometry (head size {}, {} K/V heads of {} query heads, {} RoPE dims, "
                               "FFN {}) is invalid", c.arch.name, l, g.head_dim, g.n_head_kv, c.n_head_of(li), g.n_rot, g.n_ff)};
  }
  return c;
}

}  // namespace tmill
