// Engine lifecycle: loading, memory plan, the front door (check, submit, abort), the background
// thread.
#include "engine/engine.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "core/dtype.h"
#include "core/log.h"
#include "engine/device.h"
#include "engine/engine_impl.h"
#include "engine/memory_plan.h"
#include "gpu/nvml.h"
#include "model/embedder.h"
#include "tokenizer/tokenizer.h"

namespace tmill {

namespace {

ModelInfo model_info_of(const Model& m, const Tokenizer& tok, const std::string& path, int32_t max_model_len) {
  const ModelConfig& c = m.config();
  ModelInfo info;
  std::string stem = std::filesystem::path(path).filename().string();
  if (stem.size() > 5 && stem.substr(stem.size() - 5) == ".gguf") stem.resize(stem.size() - 5);
  info.name = m.file().get_string("general.name").value_or(stem);
  info.architecture = c.arch.name;
  info.path = path;
  // Token ids must be valid for both the model (embedding rows) and the tokenizer (decoding).
  info.n_vocab = static_cast<int32_t>(std::min<int64_t>(c.n_vocab, tok.n_vocab()));
  info.max_model_len = max_model_len;
  info.n_ctx_train = c.n_ctx_train;
  info.n_layer = c.n_layer;
  info.n_embd = c.n_embd;
  info.n_params = m.n_params();
  info.weight_type = std::string(dtype_name(m.main_weight_type()));
  // llama.cpp's recommended sampling keys (general.sampling.*), when the file carries them.
  GenerationDefaults& g = info.generation_defaults;
  const GgufFile& f = m.file();
  auto num = [&](const char* key) -> std::optional<float> {
    if (auto v = f.get_number(key)) return static_cast<float>(*v);
    return std::nullopt;
  };
  g.temperature = num("general.sampling.temp");
  g.top_p = num("general.sampling.top_p");
  g.min_p = num("general.sampling.min_p");
  g.repetition_penalty = num("general.sampling.penalty_repeat");
  if (auto k = f.get_int("general.sampling.top_k")) g.top_k = static_cast<int32_t>(*k);
  return info;
}

// The window the scheduler may free KV blocks behind: the largest window when every layer has one
// (a query then never reads a position more than that far back), else 0 (a global layer reads all).
int64_t kv_window_of(const ModelConfig& c) {
  int64_t w = 0;
  for (const LayerAttention& la : c.layer_attn) {
    if (la.window <= 0) return 0;
    w = std::max(w, la.window);
  }
  return w;
}

}  // namespace

Engine::Engine() = default;

Status Engine::check_device(const std::string& device) { return check_engine_device(device); }
bool Engine::is_gpu_device(const std::string& device) { return tmill::is_gpu_device(device); }

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config) {
  auto e = std::unique_ptr<Engine>(new Engine());
  e->impl_ = std::make_unique<Impl>();
  Impl& im = *e->impl_;
  im.config = config;
  const auto t0 = Clock::now();
  TM_TRY(check_engine_device(config.device));
  auto opened = GgufFile::open(config.model_path);
  if (!opened.ok()) return opened.error_value();
  auto file = std::make_shared<const GgufFile>(std::move(opened).value());
  if (is_embedding_model(*file) || !config.pooling.empty()) {  // encoders, decoders with a pooling type: engine/embed.cpp
    auto st = create_embedding_engine(im, file);
    if (!st.ok()) return Error{fmt::format("{}: {}", config.model_path, st.error())};
    return e;
  }
  auto model = Model::from_gguf(file);
  if (!model.ok()) return Error{fmt::format("{}: {}", config.model_path, model.error())};
  im.model = std::move(model).value();
  auto tok = Tokenizer::from_gguf(im.model->file());
  if (!tok.ok()) return Error{fmt::format("{}: tokenizer: {}", config.model_path, tok.error())};
  im.tokenizer = *tok;
  const int threads = config.threads > 0 ? config.threads : default_thread_count();
  im.pool = std::make_unique<ThreadPool>(threads);
  im.samplers.resize(static_cast<size_t>(threads));
  im.constraint_scratch.resize(static_cast<size_t>(threads));
  // The weights are prepared (repacked, copied to huge pages) before the memory plan, so that the
  // KV cache's automatic size sees the memory they took and the plan reports what they occupy.
  KvLayout layout;
  if (is_gpu_device(config.device)) {  // weights and KV cache on the device: engine/gpu_engine.cpp
    TM_TRY(im.setup_gpu(&layout));
    im.async_scheduling = config.async_scheduling;
  } else {
    im.forward = std::make_unique<Forward>(im.model, im.pool.get());
    TM_ASSIGN_OR_RETURN(im.plan, plan_memory(*im.model, config, im.forward->weight_bytes(), &layout));
    im.plan.weight_mapped_bytes = im.forward->mapped_weight_bytes();
    TM_ASSIGN_OR_RETURN(im.kv, KvStorage::create(layout));
  }
  SchedulerConfig sc;
  sc.max_num_batched_tokens = config.max_num_batched_tokens;
  sc.max_num_seqs = config.max_num_seqs;
  sc.max_model_len = im.plan.max_model_len;
  sc.long_prefill_token_threshold = config.long_prefill_token_threshold;
  sc.policy = config.policy;
  sc.context_shift = config.context_shift;
  sc.context_shift_keep = config.context_shift_keep;
  sc.kv.num_blocks = static_cast<int32_t>(layout.num_blocks);
  sc.kv.block_size = static_cast<int32_t>(layout.block_size);
  sc.kv.enable_prefix_caching = config.enable_prefix_caching;
  if (layout.num_state_slots > 0) {  // recurrent layers: a state slot per running sequence, no prefix cache
    if (config.speculative.enabled())
      return Error{fmt::format("{}: speculative decoding is not supported for models with recurrent layers ({}): "
                               "a rejected draft would need the state before it",
                               config.model_path, im.model->config().arch.name)};
    sc.kv.enable_prefix_caching = false;
    sc.kv.num_state_slots = static_cast<int32_t>(layout.num_state_slots);
    sc.max_num_seqs = std::min(sc.max_num_seqs, sc.kv.num_state_slots);
  }
  if (config.free_out_of_window_kv) sc.kv_window = static_cast<int32_t>(kv_window_of(im.model->config()));
  auto sched = Scheduler::create(sc);
  if (!sched.ok()) return sched.error_value();
  im.sched = std::make_unique<Scheduler>(std::move(sched).value());
  // The scheduler never admits more than the KV cache holds: the front door uses the same limit.
  im.plan.max_model_len = std::min(im.plan.max_model_len, im.sched->config().max_model_len);
  // LongRoPE (phi3) picks its short or long factors by the context served, as llama.cpp by n_ctx
  if (im.forward) im.forward->set_context_length(im.plan.max_model_len);
  else im.gpu_forward->set_context_length(im.plan.max_model_len);
  im.eog_ids = im.tokenizer->eog_ids();
  im.info = model_info_of(*im.model, *im.tokenizer, config.model_path, im.plan.max_model_len);
  if (config.speculative.enabled()) {
    TM_ASSIGN_OR_RETURN(im.proposer, make_proposer(config.speculative, *im.tokenizer, im.info.n_vocab,
                                                   static_cast<int32_t>(layout.block_size), im.pool.get()));
    im.stats.spec_accepted_per_pos.assign(static_cast<size_t>(config.speculative.num_speculative_tokens), 0);
  }
  if (config.seed) im.request_seeds.reseed(*config.seed);
  for (const LoraSpec& l : config.loras) {
    auto loaded = im.load_lora(l.name, l.path);
    if (!loaded.ok()) return Error{fmt::format("LoRA adapter {}: {}", l.path, loaded.error())};
  }
  log_debug("engine ready in {:.2f} s", std::chrono::duration<double>(Clock::now() - t0).count());
  return e;
}

Engine::~Engine() {
  stop();
  if (impl_) stop_embedding(*impl_);
}

// Built on first use (any thread), so engines that never see a constraint do not pay for the
// vocabulary's trie. The grammar sees every row of the logits (padded rows have no bytes).
grammar::GrammarCache& Engine::Impl::grammar_cache() {
  std::call_once(grammars_once, [this] {
    const auto n = static_cast<int32_t>(model->config().n_vocab);
    grammar::VocabularyData vocab{tokenizer->token_bytes_all(), {}};
    vocab.token_bytes.resize(static_cast<size_t>(n));  // padded rows: no bytes
    for (int32_t e : eog_ids)
      if (e < n) vocab.eos_tokens.push_back(e);
    grammars = std::make_unique<grammar::GrammarCache>(grammar::Vocabulary::create(std::move(vocab)));
  });
  return *grammars;
}

const ModelInfo& Engine::model_info() const { return impl_->info; }
std::shared_ptr<const Tokenizer> Engine::tokenizer() const { return impl_->tokenizer; }
const MemoryPlan& Engine::memory_plan() const { return impl_->plan; }
Result<DeviceUsage> Engine::device_usage() const {
  if (impl_->plan.device != "cuda") return Error{fmt::format("the engine runs on {}, not a GPU", impl_->plan.device)};
  TM_ASSIGN_OR_RETURN(const gpu::NvmlUsage u, gpu::nvml_usage(0));
  return DeviceUsage{impl_->plan.device_name, u.utilization, u.memory_used_bytes, u.memory_total_bytes};
}
const EngineConfig& Engine::config() const { return impl_->config; }
int32_t Engine::max_model_len() const { return impl_->plan.max_model_len; }
RequestLimits Engine::limits() const {
  return {impl_->info.n_vocab, impl_->plan.max_model_len, impl_->config.policy == SchedulingPolicy::Priority,
          impl_->config.context_shift};
}

// check_request, then the output constraint compiled (cached, so submit and later requests with
// the same schema find it): a constraint that does not compile is refused naming its field.
std::optional<RequestProblem> Engine::check(const GenerateRequest& r) const {
  if (impl_->embed)
    return RequestProblem{RequestProblem::Kind::Invalid, "model",
                          fmt::format("The model '{}' is an embedding model (pooling {}): it does not generate text",
                                      impl_->info.name, impl_->info.pooling)};
  if (auto problem = check_request(r, limits())) return problem;
  if (!r.lora.empty() && !impl_->find_lora(r.lora))
    return RequestProblem{RequestProblem::Kind::NotFound, "model",
                          fmt::format("The model '{}' does not exist (no LoRA adapter of that name is loaded)", r.lora)};
  if (!r.constraint.active()) return std::nullopt;
  auto compiled = impl_->grammar_cache().get(r.constraint);
  if (compiled.ok()) return std::nullopt;
  {
    std::lock_guard<std::mutex> lock(impl_->stats_mu);
    impl_->stats.grammar_compile_failures_total++;
  }
  return RequestProblem{RequestProblem::Kind::Invalid, r.constraint.field, compiled.error()};
}

Result<uint64_t> Engine::submit(GenerateRequest r, OutputCallback callback) {
  if (auto problem = check(r)) return Error{problem->message};
  auto g = std::make_unique<Group>();
  TM_TRY(resolve_request_lora(*impl_, r, *g));  // an unload since check() is an error here
  if (r.constraint.active()) {
    g->grammar = *impl_->grammar_cache().get(r.constraint);  // compiled by check(): a cache hit
    std::lock_guard<std::mutex> lock(impl_->stats_mu);
    impl_->stats.structured_requests_total++;
  }
  g->id = impl_->next_id.fetch_add(1);
  g->callback = std::move(callback);
  g->timings.request_id = g->id;
  g->timings.arrival = Clock::now();
  g->timings.prompt_tokens = static_cast<int32_t>(r.prompt.size());
  g->req = std::move(r);
  const uint64_t id = g->id;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->inbox.push_back(std::move(g));
  }
  impl_->cv.notify_one();
  return id;
}

void Engine::abort(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->aborts.push_back(id);
  }
  impl_->cv.notify_one();
}

void Engine::start() {
  if (impl_->started || impl_->embed) return;  // an embedding model's thread runs from create()
  impl_->started = true;
  impl_->stopping = false;
  impl_->thread = std::thread([this] {
    Impl& im = *impl_;
    while (!im.stopping.load()) {
      {
        std::unique_lock<std::mutex> lock(im.mu);
        im.cv.wait(lock, [&] {
          return im.stopping.load() || !im.inbox.empty() || !im.aborts.empty() || im.sched->has_unfinished() ||
                 im.pending.has_value();  // (async scheduling: a step's outputs still to emit)
        });
      }
      if (im.stopping.load()) break;
      const bool progressed = im.step();
      if (progressed && im.config.debug_step_delay_s > 0)
        std::this_thread::sleep_for(std::chrono::duration<double>(im.config.debug_step_delay_s));
      if (!progressed) {
        // Work exists but nothing was schedulable this instant; don't spin hot.
        std::unique_lock<std::mutex> lock(im.mu);
        im.cv.wait_for(lock, std::chrono::milliseconds(2));
      }
    }
  });
}

void Engine::stop() {
  if (!impl_ || !impl_->started) return;
  impl_->stopping = true;
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->started = false;
}

bool Engine::step() { return impl_->embed ? false : impl_->step(); }

void Engine::run_until_idle() {
  while (impl_->step() || !idle()) {
  }
}

bool Engine::idle() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->inbox.empty() && impl_->aborts.empty() && impl_->live_groups.load() == 0;
}

void Engine::set_observer(EngineObserver* observer) { impl_->observer = observer; }

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(impl_->stats_mu);
  return impl_->stats;
}

}  // namespace tmill
