#include "formats/lora_gguf.h"

#include <map>

#include <fmt/format.h>

namespace tmill {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string shape(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

}  // namespace

bool LoraTensorPair::is_embedding() const { return base_name == "token_embd.weight"; }

Result<LoraFileInfo> read_lora_gguf(const GgufFile& f) {
  LoraFileInfo info;
  const auto general_type = f.get_string("general.type");
  if (general_type != "adapter")
    return Error{fmt::format("not a LoRA adapter: general.type is '{}', expected 'adapter'",
                             general_type.value_or("(missing)"))};
  const auto adapter_type = f.get_string("adapter.type");
  if (adapter_type != "lora")
    return Error{fmt::format("adapter.type is '{}', expected 'lora' (only LoRA adapters are supported)",
                             adapter_type.value_or("(missing)"))};
  info.architecture = f.get_string("general.architecture").value_or("");
  if (info.architecture.empty()) return Error{"general.architecture is missing"};
  info.name = f.get_string("general.name").value_or("");
  if (const GgufValue* a = f.find("adapter.lora.alpha")) {
    const auto v = a->as_number();
    if (!v) return Error{"adapter.lora.alpha is not a number"};
    info.alpha = static_cast<float>(*v);
  }
  if (f.find("adapter.alora.invocation_tokens"))
    return Error{"activated LoRA (adapter.alora.invocation_tokens) is not supported"};

  std::map<std::string, size_t> index;  // base name -> position in info.pairs
  for (const GgufTensorInfo& t : f.tensors()) {
    const bool is_a = ends_with(t.name, ".lora_a"), is_b = ends_with(t.name, ".lora_b");
    if (!is_a && !is_b) {
      if (ends_with(t.name, "_norm.weight")) continue;  // llama.cpp skips norm vectors too
      return Error{fmt::format("tensor '{}' is not a LoRA tensor (expected a .lora_a or .lora_b suffix)", t.name)};
    }
    const std::string base = t.name.substr(0, t.name.size() - 7);
    auto [it, fresh] = index.try_emplace(base, info.pairs.size());
    if (fresh) info.pairs.push_back({base, nullptr, nullptr, 0});
    LoraTensorPair& p = info.pairs[it->second];
    if (t.ne.size() != 2) return Error{fmt::format("tensor '{}' has shape {}, expected 2 dimensions", t.name, shape(t.ne))};
    (is_a ? p.a : p.b) = &t;
  }
  for (LoraTensorPair& p : info.pairs) {
    if (!p.a || !p.b)
      return Error{fmt::format("LoRA tensor pair for '{}' lacks its {}", p.base_name, p.a ? ".lora_b" : ".lora_a")};
    // Both layouts share the rank as ne[0] of lora_b; the plain layout also has it as lora_a's ne[1].
    p.rank = p.b->ne[0];
    if (p.rank <= 0) return Error{fmt::format("'{}.lora_b' has rank 0", p.base_name)};
    const int64_t a_rank = p.is_embedding() ? p.a->ne[0] : p.a->ne[1];
    if (a_rank != p.rank)
      return Error{fmt::format("LoRA pair for '{}': lora_a {} and lora_b {} disagree on the rank{}", p.base_name,
                               shape(p.a->ne), shape(p.b->ne),
                               p.is_embedding() ? "" : " (lora_a must be stored transposed, ne = [n_in, rank])")};
  }
  if (info.pairs.empty()) return Error{"the adapter has no .lora_a/.lora_b tensors"};
  return info;
}

Status check_lora_against_base(const LoraFileInfo& lora, const GgufFile& base) {
  const std::string arch = base.get_string("general.architecture").value_or("");
  if (lora.architecture != arch)
    return Error{fmt::format("the adapter is for architecture '{}', the model is '{}'", lora.architecture, arch)};
  for (const LoraTensorPair& p : lora.pairs) {
    const GgufTensorInfo* w = base.find_tensor(p.base_name);
    if (!w) return Error{fmt::format("adapted tensor '{}' does not exist in the base model (wrong base model?)", p.base_name)};
    if (w->ne.size() != 2) return Error{fmt::format("adapted tensor '{}' is not a matrix in the base model", p.base_name)};
    const bool ok = p.is_embedding() ? (w->ne[0] == p.b->ne[1] && w->ne[1] == p.a->ne[1])
                                     : (w->ne[0] == p.a->ne[0] && w->ne[1] == p.b->ne[1]);
    if (!ok)
      return Error{fmt::format("LoRA pair for '{}' (lora_a {}, lora_b {}) does not fit the base tensor {} (wrong base model?)",
                               p.base_name, shape(p.a->ne), shape(p.b->ne), shape(w->ne))};
  }
  return ok_status();
}

}  // namespace tmill
