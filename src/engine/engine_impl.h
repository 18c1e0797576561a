// Engine internals shared by the engine's files: lifecycle and submission (engine.cpp), the step
// loop (step.cpp), batch building (batch.cpp), parallel sampling and the n > 1 fork
// (sample_step.cpp), structured output (constraints.cpp), and output processing (outputs.cpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "engine/batch.h"
#include "engine/constraints.h"
#include "engine/embed_worker.h"
#include "engine/engine.h"
#include "engine/speculative.h"
#include "model/forward.h"
#include "model/gpu_forward.h"
#include "model/kv_storage.h"
#include "model/lora.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "sched/scheduler.h"
#include "tokenizer/detokenizer.h"

namespace tmill {

struct Group;

// One choice of a request = one scheduler request.
struct Choice {
  RequestId sched_id = 0;
  Group* group = nullptr;
  int32_t index = 0;
  Rng rng;
  std::unique_ptr<StreamingDetokenizer> text;
  int32_t completion_tokens = 0;
  bool added = false;     // handed to the scheduler
  bool finished = false;
  FinishReason finish_reason = FinishReason::None;
  Clock::time_point last_token_time{};
  std::unique_ptr<ChoiceConstraint> constraint;  // structured output; null: free text
  SpecState spec;                                 // speculative decoding: acceptance, adaptive k
};

// One submitted request (all its choices).
struct Group {
  uint64_t id = 0;
  GenerateRequest req;
  OutputCallback callback;
  std::vector<std::unique_ptr<Choice>> choices;
  int32_t unfinished = 0;
  bool forked = false;    // n > 1: children created from choice 0
  int32_t cached_prompt_tokens = 0;
  RequestTimings timings;
  std::shared_ptr<const grammar::Grammar> grammar;  // req.constraint compiled (null when none)
  std::shared_ptr<const LoraAdapter> lora;          // req.lora resolved at submit (null: base model)
  std::optional<uint64_t> cache_key;                 // prefix-cache key of (adapter load, scale)
};

struct LoadedLora {
  LoraInfo info;
  std::shared_ptr<const LoraAdapter> adapter;
};

// What one step sampled, indexed like SchedulerOutput::scheduled: per entry the tokens it produced
// (none; one; or with speculative drafts, the accepted drafts and one more) and their results.
struct StepSamples {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<SampleResult>> results;
  std::unordered_map<RequestId, const std::vector<SampleResult>*> by_request;
  // n > 1: the other choices' first tokens, drawn from choice 0's logits; they fork after update.
  struct Fork {
    Choice* parent;
    std::vector<std::pair<Choice*, SampleResult>> children;
  };
  std::vector<Fork> forks;
  // speculative decoding: what this step verified
  int32_t num_drafts = 0, num_draft_tokens = 0, num_accepted = 0;
  std::vector<int32_t> accepted_per_pos;
};

// A step's results on their way to the outputs (Engine::Impl::finish_step).
struct StepOutputs {
  std::vector<RequestEvent> events;
  StepSamples samples;
  StepStats stats;
  Clock::time_point t0;
};

struct Engine::Impl {
  EngineConfig config;
  std::shared_ptr<const Model> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  MemoryPlan plan;
  ModelInfo info;

  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<EmbedWorker> embed;  // embedding models only (then no forward, KV or scheduler)
  std::unique_ptr<Forward> forward;  // the CPU's forward and KV cache (--device cpu / auto)
  KvStorage kv;
  std::unique_ptr<GpuForward> gpu_forward;  // --device cuda / cuda-emu / gpu-oracle: weights and KV on the device instead
  std::unique_ptr<Scheduler> sched;
  std::vector<Sampler> samplers;  // one per pool thread (scratch buffers)
  std::vector<ConstraintScratch> constraint_scratch;  // one per pool thread
  std::unique_ptr<grammar::GrammarCache> grammars;    // compiled constraints, on the model's vocabulary
  std::once_flag grammars_once;                       // grammars is built by the first grammar_cache()
  std::atomic<int64_t> mask_ns{0};                    // this step's mask time (pool threads add to it)
  EngineObserver* observer = nullptr;
  std::vector<int32_t> eog_ids;
  std::unique_ptr<Proposer> proposer;  // speculative decoding (null: off)

  // inbox (any thread) -> engine thread
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Group>> inbox;
  std::vector<uint64_t> aborts;
  std::atomic<uint64_t> next_id{1};
  std::atomic<int64_t> live_groups{0};  // drained from the inbox, not yet finished

  // LoRA adapters (lora.cpp): any thread, under lora_mu; groups hold what they use
  mutable std::mutex lora_mu;
  std::vector<LoadedLora> loras;
  uint64_t next_lora_id = 1;

  // engine thread only
  Rng request_seeds;  // EngineConfig::seed's generator: the seeds of requests without one
  std::unordered_map<uint64_t, std::unique_ptr<Group>> groups;
  int64_t live_lora_groups = 0;  // groups with an adapter: zero means no batch needs LoRA work
  std::unordered_map<RequestId, Choice*> choices;
  RequestId next_sched_id = 1;
  std::vector<float> logits;
  // A GPU step whose every sample is plain greedy (plain_greedy_step): the device's argmax per
  // logits row instead of the logits (sample_step takes them as the tokens).
  bool greedy_step = false;
  std::vector<int32_t> greedy_ids;
  // Async scheduling (EngineConfig::async_scheduling, GPU devices): the last step's outputs, emitted
  // while the next step runs on the device (emit_pending).
  bool async_scheduling = false;
  std::optional<StepOutputs> pending;
  Clock::time_point last_expiry_check{};

  // background thread
  std::thread thread;
  std::atomic<bool> stopping{false};
  bool started = false;

  // stats (engine thread writes, snapshot under stats_mu)
  mutable std::mutex stats_mu;
  EngineStats stats;

  // step.cpp: the heartbeat and its bookkeeping
  bool step();
  // The step's copy-on-write block copies and forward pass, on the CPU or the GPU forward: launched
  // (the CPU's forward runs whole there), then waited for (the logits, or the device's argmax).
  void copy_blocks(const SchedulerOutput& out);
  void launch_forward(const ForwardBatch& batch, const SchedulerOutput& out);
  void wait_forward();
  // The step's text, forks and statistics: now, or with async scheduling forks now and the rest in
  // emit_pending, during the next step's device time (or when nothing more is scheduled).
  void finish_step(StepOutputs o);
  void emit_pending();
  bool plain_greedy_step(const SchedulerOutput& out) const;
  // gpu_engine.cpp: --device cuda / gpu-oracle: what the GPU forward does not run refused, the memory
  // plan (vLLM's --gpu-memory-utilization on a device), the weights uploaded, the KV cache allocated.
  Status setup_gpu(KvLayout* layout);
  // speculative.cpp: draft tokens for the decoding sequences, handed to the scheduler
  void propose_drafts();
  void drain_inbox();
  void expire_queued();  // queue_timeout_s
  StepStats begin_step(const SchedulerOutput& out, Clock::time_point t0);
  void end_step(const StepStats& st, const StepSamples& samples);
  void publish_stats();

  // lora.cpp: the adapter registry and each step's bindings
  Result<LoraInfo> load_lora(const std::string& name, const std::string& path);
  std::optional<LoadedLora> find_lora(const std::string& name) const;
  void bind_loras(ForwardBatch& batch, const SchedulerOutput& out) const;

  // sample_step.cpp: every sequence whose chunk reached its last known token, in parallel
  StepSamples sample_step(const SchedulerOutput& out);
  void start_forks(StepSamples& samples);
  // One entry's tokens: one sample, or its drafts verified row by row (logits: its k + 1 rows).
  // Returns how many drafts were accepted.
  int32_t sample_entry(const ScheduledRequest& sr, const float* logits, Choice& c, const Request& r, Sampler& sp,
                       ConstraintScratch& scratch, std::vector<SampleResult>& out);

  // constraints.cpp: masks, fast-forward, `after`, finishing on a complete grammar
  grammar::GrammarCache& grammar_cache();  // engine.cpp
  std::unique_ptr<ChoiceConstraint> new_constraint(const Group& g) const;
  SampleResult sample_choice(Choice& c, const float* logits, const Request& r, Sampler& sp, ConstraintScratch& s);
  // A constrained choice's token from one row under its constraint's current state (`output`: the
  // output before it, accepted drafts included), which it advances by that token. draft >= 0:
  // speculative verification of that draft (kept when the token returned is the draft).
  SampleResult constrained_sample(Choice& c, const float* logits, const Request& r, std::span<const int32_t> output,
                                  Sampler& sp, ConstraintScratch& s, int32_t draft);
  FinishReason constraint_finish(Choice& c, FinishReason finish, std::string& reason);

  // outputs.cpp: scheduler events -> streamed outputs (text, stop strings, finishing, timings)
  void add_choice(Group& g, Choice& c);
  void emit_outputs(const std::vector<RequestEvent>& events, const StepSamples& samples);
  // last_of_step: ev is the choice's last token of this step (its constraint state is after it).
  void handle_event(Choice& c, const RequestEvent& ev, const SampleResult* sample, bool last_of_step = true);
  void finish_choice(Choice& c, FinishReason reason, const std::string& stop_reason);
  void maybe_finish_group(Group& g);
  void end_group(uint64_t id, FinishReason reason, const std::string& why);
};

// embed.cpp: an embedding model's engine (no generation): tokenizer, embedder, its thread, info.
Status create_embedding_engine(Engine::Impl& im, std::shared_ptr<const GgufFile> file);
// The GPU backend table of a GPU --device (cuda, cuda-emu; gpu-oracle: the host oracle) (gpu_engine.cpp).
gpu::Ops& gpu_ops_for(const std::string& device);
void stop_embedding(Engine::Impl& im);

// lora.cpp: sets g.lora and g.cache_key from r.lora / r.lora_scale; error: no such adapter.
Status resolve_request_lora(const Engine::Impl& im, const GenerateRequest& r, Group& g);

}  // namespace tmill
