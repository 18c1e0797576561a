// Engine internals shared by engine.cpp (lifecycle, submission) and step.cpp (the step loop).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/thread_pool.h"
#include "engine/engine.h"
#include "tokenizer/detokenizer.h"
#include "model/forward.h"
#include "model/kv_storage.h"

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
};

struct Engine::Impl {
  Engine* self = nullptr;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Forward> forward;
  KvStorage kv;
  std::unique_ptr<Scheduler> sched;
  std::vector<Sampler> samplers;  // one per pool thread (scratch buffers)
  EngineObserver* observer = nullptr;
  std::vector<int32_t> eog_ids;

  // inbox (any thread) -> engine thread
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Group>> inbox;
  std::vector<uint64_t> aborts;
  std::atomic<uint64_t> next_id{1};
  std::atomic<int64_t> live_groups{0};  // drained from the inbox, not yet finished

  // engine thread only
  std::unordered_map<uint64_t, std::unique_ptr<Group>> groups;
  std::unordered_map<RequestId, Choice*> choices;
  RequestId next_sched_id = 1;
  std::vector<float> logits;

  // background thread
  std::thread thread;
  std::atomic<bool> stopping{false};
  bool started = false;

  // stats (engine thread writes, snapshot under stats_mu)
  mutable std::mutex stats_mu;
  EngineStats stats;

  bool step();
  void drain_inbox();
  void add_choice(Group& g, Choice& c, const std::vector<int32_t>* prompt_override = nullptr);
  void handle_event(Choice& c, const RequestEvent& ev, const SampleResult* sample);
  void finish_choice(Choice& c, FinishReason reason, const std::string& stop_reason, std::string tail_text);
  void maybe_finish_group(Group& g);
  void end_group(uint64_t id, FinishReason reason, const std::string& why);
  void update_stats();
  void expire_queued();  // queue_timeout_s
  Clock::time_point last_expiry_check{};
};

}  // namespace tmill
