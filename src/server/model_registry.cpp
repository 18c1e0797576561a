#include "server/model_registry.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include <fmt/format.h>

#include "core/log.h"
#include "core/memory.h"

namespace tmill::server {

using SteadyClock = std::chrono::steady_clock;

namespace {

constexpr double kMaxDurationSeconds = 1e9;  // ~31 years

// Destroys unloaded models (their engines stop; weights, KV cache and mappings are freed) and hands
// the freed heap back to the system, so that the resident set follows the budget. Never under mu_.
void free_models(std::vector<std::shared_ptr<LoadedModel>>& models) {
  const bool any = std::any_of(models.begin(), models.end(), [](const auto& m) { return m != nullptr; });
  models.clear();
  if (any) release_free_memory();
}

std::string gib(uint64_t b) { return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1ull << 30)); }

}  // namespace

const char* model_state_name(ModelState s) {
  switch (s) {
    case ModelState::Unloaded: return "unloaded";
    case ModelState::Loading: return "loading";
    case ModelState::Loaded: return "loaded";
  }
  return "unloaded";
}

Result<double> parse_duration_seconds(std::string_view s) {
  const std::string text(s);
  if (s.empty()) return Error{"an empty duration"};
  bool neg = false;
  if (s.front() == '-') {
    neg = true;
    s.remove_prefix(1);
  }
  double total = 0;
  bool any = false;
  while (!s.empty()) {
    size_t i = 0;
    while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
    if (i == 0) return Error{fmt::format("'{}' is not a duration (e.g. 300, 90s, 5m, 1h)", text)};
    // The whole run of digits and dots must be one number ("1.2.3" is not 1.2).
    const std::string num(s.substr(0, i));
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(num.c_str(), &end);
    if (end != num.c_str() + num.size() || errno == ERANGE)
      return Error{fmt::format("'{}' is not a duration (e.g. 300, 90s, 5m, 1h)", text)};
    s.remove_prefix(i);
    double unit = 1;
    if (s.substr(0, 2) == "ms") unit = 1e-3, s.remove_prefix(2);
    else if (!s.empty() && s[0] == 's') unit = 1, s.remove_prefix(1);
    else if (!s.empty() && s[0] == 'm') unit = 60, s.remove_prefix(1);
    else if (!s.empty() && s[0] == 'h') unit = 3600, s.remove_prefix(1);
    else if (!s.empty()) return Error{fmt::format("'{}' is not a duration (units: ms, s, m, h)", text)};
    else if (any) return Error{fmt::format("'{}' is not a duration (a unit is missing)", text)};
    total += v * unit;
    any = true;
  }
  if (!any) return Error{fmt::format("'{}' is not a duration (e.g. 300, 90s, 5m, 1h)", text)};
  // Bounded, so that a time point this far ahead still fits the clock's integer duration.
  if (!(total <= kMaxDurationSeconds))
    return Error{fmt::format("'{}' is too long a duration (at most {:.0f} s; negative: forever)", text,
                             kMaxDurationSeconds)};
  return neg ? -total : total;
}

LoadedModel::~LoadedModel() {
  if (on_unload) on_unload();
  if (engine) engine->stop();
}

struct ModelRegistry::Slot {
  ModelState state = ModelState::Unloaded;
  std::shared_ptr<LoadedModel> model;
  int64_t inflight = 0;
  SteadyClock::time_point last_used{};
  std::optional<double> keep_alive;                      // the next idle period's (Ollama's keep_alive)
  std::optional<SteadyClock::time_point> idle_deadline;  // unload at this time when still idle
  std::string last_error;
  bool sized = false;         // anon/mapped are the engine's figures (else the estimate)
  uint64_t anon_bytes = 0;    // the engine's figures once loaded
  uint64_t mapped_bytes = 0;
};

ModelLease& ModelLease::operator=(ModelLease&& o) noexcept {
  if (this != &o) {
    release();
    reg_ = o.reg_;
    slot_ = o.slot_;
    model_ = std::move(o.model_);
    o.reg_ = nullptr;
  }
  return *this;
}

void ModelLease::release() {
  if (reg_ && model_) reg_->release(slot_);
  reg_ = nullptr;
  model_.reset();
}

ModelRegistry::ModelRegistry(std::vector<ModelSpec> specs, uint64_t memory_limit, ModelLoader loader)
    : specs_(std::move(specs)), limit_(memory_limit), loader_(std::move(loader)) {
  for (size_t i = 0; i < specs_.size(); ++i) {
    slots_.push_back(std::make_unique<Slot>());
    for (AdapterSpec a : specs_[i].loras) {
      a.base = specs_[i].name;
      adapters_.push_back({i, std::move(a)});
    }
  }
  reaper_ = std::thread([this] { reaper_loop(); });
}

ModelRegistry::~ModelRegistry() {
  std::vector<std::shared_ptr<LoadedModel>> freed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  reaper_.join();
  for (auto& l : loaders_) l.thread.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& s : slots_) freed.push_back(std::move(s->model));
  // freed's engines stop after the lock is released (`freed` is declared before the guard).
}

std::optional<ResolvedModel> ModelRegistry::resolve(std::string_view name) const {
  if (name.empty()) return specs_.empty() ? std::nullopt : std::optional<ResolvedModel>(ResolvedModel{0, {}});
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (specs_[i].name == name) return ResolvedModel{i, {}};
    for (const auto& a : specs_[i].aliases)
      if (a == name) return ResolvedModel{i, {}};
  }
  std::lock_guard<std::mutex> lock(adapters_mu_);
  for (const AdapterEntry& a : adapters_)
    if (a.spec.name == name) return ResolvedModel{a.slot, a.spec.name, a.spec.scale};
  return std::nullopt;
}

Status ModelRegistry::add_adapter(size_t slot, AdapterSpec a) {
  TM_ASSERT(slot < specs_.size(), "add_adapter: no such slot");
  if (a.name.empty()) return Error{"an adapter needs a name"};
  for (const ModelSpec& m : specs_)
    if (m.name == a.name || std::find(m.aliases.begin(), m.aliases.end(), a.name) != m.aliases.end())
      return Error{fmt::format("the name '{}' is a model's", a.name)};
  std::lock_guard<std::mutex> lock(adapters_mu_);
  for (const AdapterEntry& e : adapters_)
    if (e.spec.name == a.name) return Error{fmt::format("an adapter named '{}' is already loaded", a.name)};
  a.base = specs_[slot].name;
  adapters_.push_back({slot, std::move(a)});
  return {};
}

std::optional<size_t> ModelRegistry::remove_adapter(const std::string& name) {
  std::lock_guard<std::mutex> lock(adapters_mu_);
  for (auto it = adapters_.begin(); it != adapters_.end(); ++it)
    if (it->spec.name == name) {
      const size_t slot = it->slot;
      adapters_.erase(it);
      return slot;
    }
  return std::nullopt;
}

std::vector<AdapterSpec> ModelRegistry::adapters(size_t slot) const {
  std::lock_guard<std::mutex> lock(adapters_mu_);
  std::vector<AdapterSpec> out;
  for (const AdapterEntry& a : adapters_)
    if (a.slot == slot) out.push_back(a.spec);
  return out;
}

Status ModelRegistry::set_global_scales(size_t slot, const std::vector<std::pair<size_t, float>>& scales) {
  std::lock_guard<std::mutex> lock(adapters_mu_);
  std::vector<AdapterEntry*> mine;
  for (AdapterEntry& a : adapters_)
    if (a.slot == slot) mine.push_back(&a);
  for (const auto& [i, scale] : scales)
    if (i >= mine.size()) return Error{fmt::format("no adapter with id {} (this model has {})", i, mine.size())};
  for (AdapterEntry* a : mine) a->spec.global_scale = 0;
  for (const auto& [i, scale] : scales) mine[i]->spec.global_scale = scale;
  return {};
}

std::vector<ModelRegistry::AdapterEntry> ModelRegistry::all_adapters() const {
  std::lock_guard<std::mutex> lock(adapters_mu_);
  return adapters_;
}

uint64_t ModelRegistry::total_locked(const std::function<bool(size_t)>& in) const {
  uint64_t total = 0;
  std::vector<std::pair<std::string, uint64_t>> files;  // path -> the largest mapped figure
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (!in(i)) continue;
    const Slot& s = *slots_[i];
    // Not yet sized: the estimate, all of it the model's own (file + configured KV).
    const uint64_t anon = s.sized ? s.anon_bytes : specs_[i].kv_bytes + specs_[i].file_bytes;
    const uint64_t mapped = s.sized ? s.mapped_bytes : 0;
    total += anon;
    auto it = std::find_if(files.begin(), files.end(), [&](const auto& f) { return f.first == specs_[i].path; });
    if (it == files.end()) files.emplace_back(specs_[i].path, mapped);
    else it->second = std::max(it->second, mapped);
  }
  for (const auto& f : files) total += f.second;
  return total;
}

uint64_t ModelRegistry::slot_cost_locked(size_t slot) const {
  return total_locked([slot](size_t i) { return i == slot; });
}

uint64_t ModelRegistry::used_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_locked([this](size_t i) { return slots_[i]->state != ModelState::Unloaded; });
}

bool ModelRegistry::make_room_locked(size_t slot, std::vector<std::shared_ptr<LoadedModel>>* freed,
                                     std::string* why) {
  if (limit_ == 0) return true;
  // Victims are chosen on paper first, so nothing is unloaded when even all of them would not do.
  std::vector<size_t> gone;
  auto resident = [&](size_t i) {
    return slots_[i]->state != ModelState::Unloaded && std::find(gone.begin(), gone.end(), i) == gone.end();
  };
  for (;;) {
    const uint64_t u = total_locked([&](size_t i) { return i != slot && resident(i); });  // the others
    const uint64_t with = total_locked([&](size_t i) { return i == slot || resident(i); });
    const uint64_t need = with - u;  // a file already mapped by another model is not counted again
    if (with <= limit_) break;
    // The least recently used model that is resident, unpinned, idle, and not this one.
    size_t victim = specs_.size();
    for (size_t i = 0; i < specs_.size(); ++i) {
      const Slot& s = *slots_[i];
      if (i == slot || !resident(i) || specs_[i].pinned || s.state != ModelState::Loaded || s.inflight > 0) continue;
      if (victim == specs_.size() || s.last_used < slots_[victim]->last_used) victim = i;
    }
    if (victim == specs_.size()) {
      std::string holders;
      for (size_t i = 0; i < specs_.size(); ++i)
        if (i != slot && resident(i))
          holders += fmt::format("{}{} ({})", holders.empty() ? "" : ", ", specs_[i].name,
                                 specs_[i].pinned                            ? "pinned"
                                 : slots_[i]->state == ModelState::Loading ? "loading"
                                                                             : "busy");
      *why = fmt::format("The model `{}` needs {} but {} of the server's {} memory limit are in use by {}, and "
                         "none of them can be unloaded now.",
                         specs_[slot].name, gib(need), gib(u), gib(limit_), holders.empty() ? "nothing" : holders);
      return false;
    }
    gone.push_back(victim);
  }
  for (size_t v : gone) {
    log_info("unloading model {} (least recently used) to make room for {}", specs_[v].name, specs_[slot].name);
    freed->push_back(std::move(slots_[v]->model));
    slots_[v]->state = ModelState::Unloaded;
    slots_[v]->idle_deadline.reset();
    ++unloads_;
  }
  return true;
}

void ModelRegistry::start_load_locked(size_t slot, std::vector<std::shared_ptr<LoadedModel>> victims) {
  Slot& s = *slots_[slot];
  s.state = ModelState::Loading;
  s.sized = false;  // the estimate until the engine says
  s.last_error.clear();
  // Finished loader threads are joined here (a thread that is not joined keeps its stack).
  for (auto it = loaders_.begin(); it != loaders_.end();) {
    if (it->done->load()) {
      it->thread.join();
      it = loaders_.erase(it);
    } else {
      ++it;
    }
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  loaders_.push_back({{}, done});
  loaders_.back().thread = std::thread([this, slot, done, victims = std::move(victims)]() mutable {
    free_models(victims);  // the models unloaded to make room are freed before this one loads
    double secs = 0;
    auto r = loader_(slot, specs_[slot], &secs);
    std::shared_ptr<LoadedModel> drop;  // a model loaded after the registry began stopping, or too large
    std::vector<std::shared_ptr<LoadedModel>> freed;  // models unloaded to make room for its real size
    {
      std::lock_guard<std::mutex> lock(mu_);
      Slot& s = *slots_[slot];
      if (!r.ok()) {
        s.state = ModelState::Unloaded;
        s.last_error = r.error();
        log_error("model {}: {}", specs_[slot].name, r.error());
      } else if (stopping_) {
        drop = std::move(r).value();
        s.state = ModelState::Unloaded;
      } else {
        // The engine's real size replaces the estimate; if it is larger (e.g. an automatic KV cache
        // size) other idle models may have to go, and when nothing can, this one does.
        s.anon_bytes = r.value()->anon_bytes;
        s.mapped_bytes = r.value()->mapped_bytes.value_or(specs_[slot].file_bytes);
        s.sized = true;
        std::string why;
        if (!make_room_locked(slot, &freed, &why)) {
          drop = std::move(r).value();
          s.state = ModelState::Unloaded;
          s.last_error = "once loaded: " + why;
          log_error("model {}: {}", specs_[slot].name, s.last_error);
        } else {
          s.model = std::move(r).value();
          s.state = ModelState::Loaded;
          s.last_used = SteadyClock::now();
          if (!specs_[slot].pinned && specs_[slot].idle_unload_s > 0)
            s.idle_deadline = s.last_used + std::chrono::duration_cast<SteadyClock::duration>(
                                                std::chrono::duration<double>(specs_[slot].idle_unload_s));
          ++loads_;
        }
      }
    }
    cv_.notify_all();
    freed.push_back(std::move(drop));
    free_models(freed);
    done->store(true);
  });
}

Result<ModelLease> ModelRegistry::acquire(size_t slot, double timeout_s, Failure* why) {
  Failure dummy;
  if (!why) why = &dummy;
  *why = Failure::None;
  std::vector<std::shared_ptr<LoadedModel>> freed;  // destroyed after the lock is released
  std::unique_lock<std::mutex> lock(mu_);
  Slot& s = *slots_[slot];
  if (s.state == ModelState::Unloaded) {
    std::string msg;
    if (!make_room_locked(slot, &freed, &msg)) {
      *why = Failure::Unavailable;
      lock.unlock();
      return Error{msg};
    }
    start_load_locked(slot, std::move(freed));
  }
  const auto deadline = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                                 std::chrono::duration<double>(std::max(0.0, timeout_s)));
  while (s.state == ModelState::Loading && !stopping_) {
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && s.state == ModelState::Loading) {
      *why = Failure::Timeout;
      return Error{fmt::format("The model `{}` is still loading; retry later.", specs_[slot].name)};
    }
  }
  if (s.state != ModelState::Loaded) {
    *why = Failure::LoadFailed;
    return Error{fmt::format("The model `{}` could not be loaded: {}", specs_[slot].name,
                             s.last_error.empty() ? "the server is stopping" : s.last_error)};
  }
  return lease_locked(slot, s);
}

ModelLease ModelRegistry::lease_locked(size_t slot, Slot& s) {
  ModelLease l;
  l.reg_ = this;
  l.slot_ = slot;
  l.model_ = s.model;
  ++s.inflight;
  s.idle_deadline.reset();
  return l;
}

std::optional<ModelLease> ModelRegistry::try_lease(size_t slot) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = *slots_[slot];
  if (s.state != ModelState::Loaded) return std::nullopt;
  return lease_locked(slot, s);
}

void ModelRegistry::attach(size_t slot, std::shared_ptr<LoadedModel> model) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& s = *slots_[slot];
    TM_ASSERT(s.state == ModelState::Unloaded, "attach into a slot in use");
    s.anon_bytes = model->anon_bytes;
    s.mapped_bytes = model->mapped_bytes.value_or(specs_[slot].file_bytes);
    s.sized = true;
    s.model = std::move(model);
    s.state = ModelState::Loaded;
    s.last_used = SteadyClock::now();
    ++loads_;
  }
  cv_.notify_all();
}

Status ModelRegistry::load(size_t slot, Failure* why) {
  auto l = acquire(slot, 24 * 3600.0, why);
  if (!l.ok()) return Error{l.error()};
  return {};
}

Status ModelRegistry::unload(size_t slot) {
  std::vector<std::shared_ptr<LoadedModel>> freed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& s = *slots_[slot];
    if (s.state == ModelState::Loading) return Error{fmt::format("The model `{}` is loading.", specs_[slot].name)};
    if (s.state == ModelState::Unloaded) return Error{fmt::format("The model `{}` is not loaded.", specs_[slot].name)};
    if (s.inflight > 0)
      return Error{fmt::format("The model `{}` is serving {} request(s).", specs_[slot].name, s.inflight)};
    freed.push_back(std::move(s.model));
    s.state = ModelState::Unloaded;
    s.idle_deadline.reset();
    ++unloads_;
    log_info("unloaded model {}", specs_[slot].name);
  }
  free_models(freed);  // the engine stops outside the lock
  return {};
}

void ModelRegistry::release(size_t slot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& s = *slots_[slot];
    --s.inflight;
    s.last_used = SteadyClock::now();
    if (s.inflight == 0 && !specs_[slot].pinned) {
      // The request's keep_alive (Ollama: seconds; 0 unloads now; < 0 never), else idle_unload
      // (0: unloaded only to make room).
      const std::optional<double> ka = std::exchange(s.keep_alive, std::nullopt);
      const double idle = ka.value_or(specs_[slot].idle_unload_s);
      if (ka ? idle >= 0 : idle > 0)
        s.idle_deadline = s.last_used + std::chrono::duration_cast<SteadyClock::duration>(
                                            std::chrono::duration<double>(idle));
      else
        s.idle_deadline.reset();
    }
  }
  cv_.notify_all();
}

void ModelRegistry::set_keep_alive(size_t slot, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  slots_[slot]->keep_alive = seconds;
}

void ModelRegistry::reap(SteadyClock::time_point now) {
  std::vector<std::shared_ptr<LoadedModel>> freed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < specs_.size(); ++i) {
      Slot& s = *slots_[i];
      if (s.state != ModelState::Loaded || s.inflight > 0 || specs_[i].pinned || !s.idle_deadline) continue;
      if (now < *s.idle_deadline) continue;
      log_info("unloading model {} (idle)", specs_[i].name);
      freed.push_back(std::move(s.model));
      s.state = ModelState::Unloaded;
      s.idle_deadline.reset();
      ++unloads_;
    }
  }
  free_models(freed);  // engines stop outside the lock
}

void ModelRegistry::reaper_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (stopping_) break;
    lock.unlock();
    reap(SteadyClock::now());
    lock.lock();
  }
}

ModelRegistry::View ModelRegistry::view(size_t slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Slot& s = *slots_[slot];
  View v;
  v.state = s.state;
  v.inflight = s.inflight;
  v.bytes = slot_cost_locked(slot);
  v.max_model_len = s.model ? s.model->ctx.max_model_len : specs_[slot].max_model_len;
  v.last_error = s.last_error;
  return v;
}

int64_t ModelRegistry::loads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loads_;
}

int64_t ModelRegistry::unloads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unloads_;
}

}  // namespace tmill::server
