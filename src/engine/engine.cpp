// Engine lifecycle: loading, memory plan, request validation and submission, the background thread.
#include "engine/engine.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/log.h"
#include "core/strings.h"
#include "engine/engine_impl.h"
#include "engine/memory_plan.h"
#include "tokenizer/tokenizer.h"

namespace tmill {

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config) {
  auto e = std::unique_ptr<Engine>(new Engine());
  e->config_ = config;
  const auto t0 = Clock::now();
  TM_ASSIGN_OR_RETURN(e->model_, Model::load(config.model_path));
  auto tok = Tokenizer::from_gguf(e->model_->file());
  if (!tok.ok()) return Error{fmt::format("{}: tokenizer: {}", config.model_path, tok.error())};
  e->tokenizer_ = *tok;
  auto impl = std::make_unique<Impl>();
  impl->self = e.get();
  const int threads = config.threads > 0 ? config.threads : default_thread_count();
  impl->pool = std::make_unique<ThreadPool>(threads);
  impl->samplers.resize(static_cast<size_t>(threads));
  // The weights are prepared (repacked, copied to huge pages) before the memory plan, so that the
  // KV cache's automatic size sees the memory they took and the plan reports what they occupy.
  impl->forward = std::make_unique<Forward>(e->model_, impl->pool.get());
  KvLayout layout;
  TM_ASSIGN_OR_RETURN(e->plan_, plan_memory(*e->model_, config, impl->forward->weight_bytes(), &layout));
  TM_ASSIGN_OR_RETURN(impl->kv, KvStorage::create(layout));
  SchedulerConfig sc;
  sc.max_num_batched_tokens = config.max_num_batched_tokens;
  sc.max_num_seqs = config.max_num_seqs;
  sc.max_model_len = e->plan_.max_model_len;
  sc.long_prefill_token_threshold = config.long_prefill_token_threshold;
  sc.policy = config.policy;
  sc.kv.num_blocks = static_cast<int32_t>(layout.num_blocks);
  sc.kv.block_size = static_cast<int32_t>(layout.block_size);
  sc.kv.enable_prefix_caching = config.enable_prefix_caching;
  auto sched = Scheduler::create(sc);
  if (!sched.ok()) return sched.error_value();
  impl->sched = std::make_unique<Scheduler>(std::move(sched).value());
  impl->eog_ids = e->tokenizer_->eog_ids();
  e->impl_ = std::move(impl);
  log_debug("engine ready in {:.2f} s", std::chrono::duration<double>(Clock::now() - t0).count());
  return e;
}

Engine::~Engine() { stop(); }

Result<uint64_t> Engine::submit(GenerateRequest r, OutputCallback callback) {
  const int32_t n_vocab = static_cast<int32_t>(model_->config().n_vocab);
  if (r.prompt.empty()) return Error{"the prompt is empty"};
  for (int32_t t : r.prompt)
    if (t < 0 || t >= n_vocab) return Error{fmt::format("prompt token id {} is outside the vocabulary [0, {})", t, n_vocab)};
  if (r.max_tokens < 1) return Error{fmt::format("max_tokens must be at least 1, got {}", r.max_tokens)};
  if (r.n < 1) return Error{fmt::format("n must be at least 1, got {}", r.n)};
  const int64_t len = static_cast<int64_t>(r.prompt.size());
  if (len >= plan_.max_model_len)
    return Error{fmt::format("the prompt has {} tokens; this model's context length is {} tokens", len,
                             plan_.max_model_len)};
  if (len + r.max_tokens > plan_.max_model_len)
    return Error{fmt::format("the prompt ({} tokens) plus max_tokens ({}) exceeds the context length of {} tokens",
                             len, r.max_tokens, plan_.max_model_len)};
  const auto& sp = r.sampling;
  if (!(sp.top_p > 0 && sp.top_p <= 1)) return Error{"top_p must be in (0, 1]"};
  if (!(sp.min_p >= 0 && sp.min_p <= 1)) return Error{"min_p must be in [0, 1]"};
  if (!(sp.repetition_penalty > 0)) return Error{"repetition_penalty must be positive"};
  if (!(sp.temperature >= 0)) return Error{"temperature must be non-negative"};
  for (auto& s : r.stop)
    if (s.empty()) return Error{"stop strings must not be empty"};

  auto g = std::make_unique<Group>();
  g->id = impl_->next_id.fetch_add(1);
  g->callback = std::move(callback);
  g->timings.request_id = g->id;
  g->timings.arrival = Clock::now();
  g->timings.prompt_tokens = static_cast<int32_t>(len);
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
  if (impl_->started) return;
  impl_->started = true;
  impl_->stopping = false;
  impl_->thread = std::thread([this] {
    Impl& im = *impl_;
    while (!im.stopping.load()) {
      {
        std::unique_lock<std::mutex> lock(im.mu);
        im.cv.wait(lock, [&] {
          return im.stopping.load() || !im.inbox.empty() || !im.aborts.empty() || im.sched->has_unfinished();
        });
      }
      if (im.stopping.load()) break;
      const bool progressed = im.step();
      if (progressed && config_.debug_step_delay_s > 0)
        std::this_thread::sleep_for(std::chrono::duration<double>(config_.debug_step_delay_s));
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

bool Engine::step() { return impl_->step(); }

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
