// LoRA adapters in the engine: the registry (load, unload, list: any thread, under lora_mu),
// resolving a request's adapter at submit, and binding each step's sequences to their adapters.
#include <bit>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "engine/engine_impl.h"

namespace tmill {

namespace {
// The prefix-cache key of an adapter load at a scale: K/V computed under it differ from any other's.
uint64_t lora_cache_key(uint64_t lora_id, float scale) {
  uint64_t z = lora_id * 0x9e3779b97f4a7c15ull ^ (static_cast<uint64_t>(std::bit_cast<uint32_t>(scale)) << 17);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

Result<LoraInfo> Engine::Impl::load_lora(const std::string& name_in, const std::string& path) {
  std::string name = name_in;
  if (name.empty()) {
    name = std::filesystem::path(path).filename().string();
    if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  }
  auto taken = [&]() -> std::optional<Error> {
    if (find_lora(name)) return Error{fmt::format("a LoRA adapter named '{}' is already loaded", name)};
    std::lock_guard<std::mutex> lock(lora_mu);
    if (static_cast<int32_t>(loras.size()) >= config.max_loras)
      return Error{fmt::format("{} LoRA adapters are loaded, the most --max-loras allows; unload one first", loras.size())};
    return std::nullopt;
  };
  if (auto e = taken()) return *e;
  // Read outside the lock: a large file does not hold up submissions.
  auto adapter = LoraAdapter::load(path, *model);
  if (!adapter.ok()) return adapter.error_value();
  if (config.max_lora_rank > 0 && (*adapter)->max_rank() > config.max_lora_rank)
    return Error{fmt::format("LoRA adapter '{}' has rank {}, above --max-lora-rank {}", name, (*adapter)->max_rank(),
                             config.max_lora_rank)};
  if (auto e = taken()) return *e;  // another thread may have loaded meanwhile
  LoadedLora l;
  l.adapter = *adapter;
  l.info.name = name;
  l.info.path = path;
  l.info.rank = l.adapter->max_rank();
  l.info.alpha = l.adapter->alpha();
  l.info.n_tensors = l.adapter->n_tensors();
  l.info.bytes = l.adapter->bytes();
  std::lock_guard<std::mutex> lock(lora_mu);
  l.info.id = next_lora_id++;
  loras.push_back(l);
  return l.info;
}

std::optional<LoadedLora> Engine::Impl::find_lora(const std::string& name) const {
  std::lock_guard<std::mutex> lock(lora_mu);
  for (const LoadedLora& l : loras)
    if (l.info.name == name) return l;
  return std::nullopt;
}

// Sequences of groups with an adapter get a binding per (adapter, scale); nothing without any.
void Engine::Impl::bind_loras(ForwardBatch& batch, const SchedulerOutput& out) const {
  if (live_lora_groups == 0) return;
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const Group& g = *choices.at(out.scheduled[i].id)->group;
    if (!g.lora) continue;
    const LoraBinding b{g.lora.get(), g.req.lora_scale};
    size_t k = 0;
    while (k < batch.loras.size() && (batch.loras[k].adapter != b.adapter || batch.loras[k].scale != b.scale)) ++k;
    if (k == batch.loras.size()) batch.loras.push_back(b);
    batch.seqs[i].lora = static_cast<int32_t>(k);
  }
}

Result<LoraInfo> Engine::load_lora(const std::string& name, const std::string& path) {
  if (!impl_->model) return Error{"LoRA adapters need a generation model (this is an embedding model)"};
  return impl_->load_lora(name, path);
}

Status Engine::unload_lora(const std::string& name) {
  std::lock_guard<std::mutex> lock(impl_->lora_mu);
  auto& v = impl_->loras;
  for (auto it = v.begin(); it != v.end(); ++it)
    if (it->info.name == name) {
      v.erase(it);  // requests using it hold their own reference
      return ok_status();
    }
  return Error{fmt::format("no LoRA adapter named '{}' is loaded", name)};
}

std::vector<LoraInfo> Engine::loras() const {
  std::lock_guard<std::mutex> lock(impl_->lora_mu);
  std::vector<LoraInfo> out;
  for (const LoadedLora& l : impl_->loras) out.push_back(l.info);
  return out;
}

// The request's adapter, resolved now (a later unload does not affect it); scale 0 = base model.
Status resolve_request_lora(const Engine::Impl& im, const GenerateRequest& r, Group& g) {
  if (r.lora.empty()) return ok_status();
  auto l = im.find_lora(r.lora);
  if (!l) return Error{fmt::format("The model '{}' does not exist (no LoRA adapter of that name is loaded)", r.lora)};
  if (r.lora_scale == 0.0f) return ok_status();
  g.lora = l->adapter;
  g.cache_key = lora_cache_key(l->info.id, r.lora_scale);
  return ok_status();
}

}  // namespace tmill
