// Several models behind one server: which models are configured (names, aliases), which are
// resident, and the process memory budget that decides what may be loaded.
//
//   ModelRegistry reg(specs, memory_limit, loader);
//   auto r = reg.resolve(body_model);            // name or alias -> slot (+ adapter, reserved for LoRA)
//   auto lease = reg.acquire(r->slot, 30, &why);  // loaded: at once; on demand: loads off this thread
//   lease->model().ctx ...                        // the model's request context and engine
//
// Memory: a model costs its anonymous memory (KV cache, the weights its engine copies or packs) plus
// the weights it reads in place from its file mapping, counted once per file however many models map
// it (they share the page cache). Before a model is loaded its cost is estimated as file size +
// configured KV bytes, all of it its own (the engine copies most weights; an estimate must not be
// low, or a load would overshoot the budget until its real size is known); after loading the
// engine's memory plan replaces the estimate. To make room the least recently used unpinned idle model is unloaded;
// when nothing can go, acquire fails with Unavailable and a message saying what holds the memory.
//
// Threads: every method is thread-safe. Loads run on their own thread (never the caller's lock), so
// requests for other models go on meanwhile; a reaper thread unloads on-demand models idle past
// their time. Engines are stopped and freed outside the lock, once no lease holds them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/result.h"
#include "server/openai_request.h"

namespace tmill::server {

enum class ModelState { Unloaded, Loading, Loaded };

// A duration as Ollama's keep_alive and the models file write it: a number of seconds, or a string
// "300", "90s", "5m", "1h", "250ms", "1h30m"; negative values ("-1") mean forever.
Result<double> parse_duration_seconds(std::string_view s);
const char* model_state_name(ModelState s);

// A LoRA adapter served as a model name on top of a base model (docs/lora.md, "Server").
struct AdapterSpec {
  std::string name;   // the model name requests give
  std::string path;   // llama.cpp's LoRA GGUF
  float scale = 1.0f; // applied to every request that names it (llama.cpp's --lora-scaled)
  std::string base;   // the base model's name or alias (command line; "" = the first model)
  // llama-server's global scale (POST /lora-adapters): applied to the base model's requests that give
  // neither an adapter's name nor a "lora" list; 0 (the default, llama-server's
  // --lora-init-without-apply): none.
  float global_scale = 0.0f;
};

// One configured model.
struct ModelSpec {
  std::string name;
  std::vector<std::string> aliases;
  std::string path;               // the weight file
  bool pinned = true;             // loaded at start and never unloaded to make room
  double idle_unload_s = 0;       // on demand: unload after this many idle seconds (0: only to make room)
  uint64_t file_bytes = 0;        // the weight file's size
  uint64_t kv_bytes = 0;          // configured KV cache (0: unknown before loading)
  int32_t max_model_len = 0;      // configured (0: the model's), shown before loading
  std::string chat_template;      // a file or template text; empty: the server's --chat-template
  std::vector<AdapterSpec> loras; // adapters on this model, at start (the registry keeps the live list)
};

// A resident model: its engine (null in tests) and request context.
struct LoadedModel {
  std::unique_ptr<Engine> engine;
  ServerContext ctx;
  uint64_t anon_bytes = 0;             // KV cache + weights the engine holds itself (copies, packs)
  // Weights read in place from the file mapping, counted once per file however many models map it;
  // nullopt: the whole file (spec.file_bytes).
  std::optional<uint64_t> mapped_bytes;
  std::function<void()> on_unload;     // before the engine stops (e.g. detach its metrics)
  ~LoadedModel();
};

// Loads one model (on a loader thread); *load_seconds gets the time taken.
using ModelLoader = std::function<Result<std::shared_ptr<LoadedModel>>(size_t slot, const ModelSpec&,
                                                                       double* load_seconds)>;

// A model name resolved: the slot, and an adapter to apply (a LoRA adapter's name resolves to its
// base model's slot plus the adapter; empty for the base model itself).
struct ResolvedModel {
  size_t slot = 0;
  std::string adapter;
  float adapter_scale = 1.0f;
};

class ModelRegistry;

// Holds a resident model in use: it is not unloaded while a lease exists.
class ModelLease {
 public:
  ModelLease() = default;
  ModelLease(ModelLease&& o) noexcept { *this = std::move(o); }
  ModelLease& operator=(ModelLease&& o) noexcept;
  ~ModelLease() { release(); }
  void release();
  LoadedModel& model() const { return *model_; }
  size_t slot() const { return slot_; }
  explicit operator bool() const { return model_ != nullptr; }

 private:
  friend class ModelRegistry;
  ModelRegistry* reg_ = nullptr;
  size_t slot_ = 0;
  std::shared_ptr<LoadedModel> model_;
};

class ModelRegistry {
 public:
  enum class Failure { None, Unavailable, LoadFailed, Timeout };

  ModelRegistry(std::vector<ModelSpec> specs, uint64_t memory_limit, ModelLoader loader);
  ~ModelRegistry();  // unloads everything (waits for loads in progress)

  size_t size() const { return specs_.size(); }
  const ModelSpec& spec(size_t slot) const { return specs_[slot]; }
  // A name or alias; an empty name is the first model (a request without "model"); an adapter's
  // name is its base model's slot plus the adapter.
  std::optional<ResolvedModel> resolve(std::string_view name) const;

  // LoRA adapters addressed as model names. The registry's list is what a model loads with (the
  // server loads each into the engine) and what resolve() answers; the engine's list follows it.
  // add_adapter errors: an empty name, a name taken by a model, an alias or an adapter.
  Status add_adapter(size_t slot, AdapterSpec a);
  // Removes it from the list: its slot, or nullopt when no adapter has that name.
  std::optional<size_t> remove_adapter(const std::string& name);
  std::vector<AdapterSpec> adapters(size_t slot) const;
  // Sets the global scales of a model's adapters (index in adapters(slot) -> scale; the others 0).
  // Errors: an index out of range.
  Status set_global_scales(size_t slot, const std::vector<std::pair<size_t, float>>& scales);
  struct AdapterEntry {
    size_t slot;
    AdapterSpec spec;
  };
  std::vector<AdapterEntry> all_adapters() const;

  // A lease on the model, loading it first when needed (waits up to timeout_s for the load).
  // On failure *why says which and the error's message is for the client.
  Result<ModelLease> acquire(size_t slot, double timeout_s, Failure* why = nullptr);
  // Synchronous load (start-up, admin): Ok when loaded (or already resident).
  Status load(size_t slot, Failure* why = nullptr);
  // Unloads an idle resident model; an error when it is serving requests or not resident.
  Status unload(size_t slot);
  // Installs a model loaded elsewhere (Server::attach_engine) into an unloaded slot.
  void attach(size_t slot, std::shared_ptr<LoadedModel> model);
  // A model already resident and serving: nullopt when it is not Loaded (no load started).
  std::optional<ModelLease> try_lease(size_t slot);

  // Ollama's keep_alive for the model's next idle period: seconds (0: unload when idle, < 0: never).
  void set_keep_alive(size_t slot, double seconds);
  // Unloads on-demand models whose idle time is over (the reaper calls it; tests call it directly).
  void reap(std::chrono::steady_clock::time_point now);

  struct View {
    ModelState state = ModelState::Unloaded;
    int64_t inflight = 0;
    uint64_t bytes = 0;           // counted against the budget (estimate while not loaded)
    int32_t max_model_len = 0;    // the engine's once loaded, else the configured one
    std::string last_error;       // the last load failure
  };
  View view(size_t slot) const;
  uint64_t used_bytes() const;
  uint64_t memory_limit() const { return limit_; }
  int64_t loads() const;
  int64_t unloads() const;

 private:
  friend class ModelLease;
  struct Slot;
  void release(size_t slot);
  // A lease on a Loaded slot (mu_ held): counts it in flight and cancels its idle unload.
  ModelLease lease_locked(size_t slot, Slot& s);
  // Caller holds mu_. The bytes of the slots `in` selects if they were resident: anonymous bytes
  // each, mapped file bytes once per file (the largest figure among them).
  uint64_t total_locked(const std::function<bool(size_t)>& in) const;
  uint64_t slot_cost_locked(size_t slot) const;  // the slot alone
  // Caller holds mu_: unload LRU idle unpinned models until `need` more bytes fit; the freed models
  // are appended to *freed (destroyed by the caller after unlocking). False when impossible.
  bool make_room_locked(size_t slot, std::vector<std::shared_ptr<LoadedModel>>* freed, std::string* why);
  // Caller holds mu_: start loading the slot on a loader thread, which first frees `victims`.
  void start_load_locked(size_t slot, std::vector<std::shared_ptr<LoadedModel>> victims);
  void reaper_loop();

  std::vector<ModelSpec> specs_;
  uint64_t limit_;
  ModelLoader loader_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Slot>> slots_;
  struct Loader {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;  // set as the thread's last act
  };
  std::vector<Loader> loaders_;
  int64_t loads_ = 0, unloads_ = 0;
  bool stopping_ = false;
  std::thread reaper_;
  mutable std::mutex adapters_mu_;  // never held while taking mu_
  std::vector<AdapterEntry> adapters_;
};

}  // namespace tmill::server
