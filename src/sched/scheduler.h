// Continuous-batching scheduler in vLLM v1 style: every step is one map request -> number of tokens
// to compute; prefill, chunked prefill, decode and prefix-cache hits share one code path.
//
// Engine loop:
//   SchedulerOutput out = sched.schedule();
//   apply out.block_copies (in order), run the forward pass over out.scheduled, sample one token for
//   each entry with produces_sample;
//   auto events = sched.update(out, sampled);   // sampled[i] pairs with out.scheduled[i]
//
// Speculative decoding: before schedule() the engine gives a decoding request draft tokens
// (set_draft_tokens); schedule() scores them with its decode as one chunk of 1 + k tokens (the budget
// and the KV cache permitting: drafts are cut first, they never cause a preemption), and update()
// takes the tokens the engine kept (the accepted drafts, then one token of its own), advances
// num_computed_tokens past the accepted ones only and gives back the slots of the rejected ones
// (KvCacheManager::truncate), so the prefix cache never holds a rejected token.
//
// Preemption is by recomputation: the victim's blocks are freed, num_computed_tokens resets to 0 and
// it re-enters the waiting queue at the front (FCFS) keeping its outputs, which are then prefilled
// again as part of its tokens (prefix caching usually makes that cheap).
// No tensors and no text here: the engine handles stop strings and calls finish().
// Not thread-safe: one engine thread owns the scheduler (HTTP threads talk to it through queues).
// Request ids must not be reused while an output that names them is still in flight.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "api/config.h"  // SchedulingPolicy, defaults
#include "core/result.h"
#include "kv/kv_cache_manager.h"
#include "sched/request.h"

namespace tmill {

struct SchedulerConfig {
  int32_t max_num_batched_tokens = defaults::kMaxNumBatchedTokens;  // token budget per step
  int32_t max_num_seqs = defaults::kMaxNumSeqs;  // requests per step (and running requests admitted)
  int32_t max_model_len = 0;              // prompt + outputs; 0 or more than the KV capacity: the capacity
  int32_t long_prefill_token_threshold = 0;  // >0: cap on one request's chunk per step
  bool enable_chunked_prefill = true;     // false: a prompt must fit the remaining budget whole
  SchedulingPolicy policy = SchedulingPolicy::Fcfs;
  // Context shift (llama-server's --context-shift): a request that reaches its max_model_len before
  // max_tokens keeps its first context_shift_keep tokens (-1: its prompt; at most half the context),
  // discards half of the rest (the oldest) and recomputes the remainder by prefill (its kept prefix
  // from the prefix cache), then goes on generating. Off: it finishes with Length.
  bool context_shift = false;
  int32_t context_shift_keep = 1;
  // > 0: every layer of the model attends to at most this many positions (a sliding window on all
  // layers, Mistral-style). After each step a running request's blocks that lie wholly before the
  // window of its next token go back to the pool (KvCacheManager::release_before), so its KV stays
  // bounded by the window. 0: blocks are kept until the request ends.
  int32_t kv_window = 0;
  KvCacheConfig kv;
};

struct ScheduledRequest {
  RequestId id = 0;
  int32_t start_pos = 0;              // num_computed_tokens before the step = position of token 0
  int32_t num_tokens = 0;             // tokens computed this step
  std::vector<int32_t> token_ids;     // those tokens: tokens[start_pos, start_pos + num_tokens - num_draft_tokens)
                                      // followed by the draft tokens
  int32_t num_draft_tokens = 0;       // speculative drafts at the end of token_ids (scored, not yet tokens)
  std::vector<int32_t> block_table;   // full block table after allocation
  int32_t state_slot = -1;            // recurrent models: the request's sequence-state slot (else -1)
  bool produces_sample = false;       // the last token reaches the end of the known tokens
  bool resumed = false;               // newly admitted from the waiting queue this step
};

struct SchedulerOutput {
  uint64_t step = 0;
  std::vector<ScheduledRequest> scheduled;  // running requests first, then newly admitted ones
  std::vector<RequestId> preempted;
  std::vector<BlockCopy> block_copies;      // apply in order before the forward pass
  std::vector<BlockCopy> state_copies;      // sequence-state slots (forks of recurrent models), likewise
  int32_t total_tokens = 0;
  bool empty() const { return scheduled.empty(); }
};

// Per-request result of update() / fork(): the new token (if any) and whether it finished.
struct RequestEvent {
  RequestId id = 0;
  std::optional<int32_t> token;
  FinishReason finish = FinishReason::None;
};

struct SchedulerStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;         // includes preempted requests
  uint64_t num_preemptions = 0;    // total
  uint64_t num_context_shifts = 0; // total
  uint64_t num_steps = 0;
  int32_t last_step_tokens = 0;
  int64_t total_scheduled_tokens = 0;
  KvStats kv;
};

class Scheduler {
 public:
  static Result<Scheduler> create(const SchedulerConfig& config);

  // Queues a request. The engine checked it at its front door (check_request): a duplicate id, an
  // empty prompt, max_tokens < 1 or a prompt longer than max_model_len is a broken invariant here.
  void add_request(RequestParams params);
  // Plans one step. Every non-empty output must be followed by update() before the next schedule().
  SchedulerOutput schedule();
  // Applies a step: advances num_computed_tokens, caches newly full blocks, appends the sampled
  // tokens (sampled.size() == out.scheduled.size(); entries without produces_sample are ignored) and
  // finishes requests on stop tokens / max_tokens / max_model_len. Requests finished or aborted
  // since schedule() are skipped. Returns one event per appended token.
  std::vector<RequestEvent> update(const SchedulerOutput& out, std::span<const int32_t> sampled);
  // The same with speculative decoding: sampled[i] is what entry i produced, in order: its accepted
  // draft tokens (a prefix of its drafts) and one more token (empty for entries without a sample).
  // Tokens after one that finishes the request are dropped. One event per appended token.
  std::vector<RequestEvent> update(const SchedulerOutput& out, std::span<const std::vector<int32_t>> sampled);
  // Draft tokens for a running request whose next step is a decode (all its tokens but the last
  // computed); replaces earlier ones. False (nothing set) for any other request.
  bool set_draft_tokens(RequestId id, std::vector<int32_t> drafts);
  // Ends a request for a reason found by the engine (stop string: Stop). False if unknown.
  bool finish(RequestId id, FinishReason reason);
  bool abort(RequestId id) { return finish(id, FinishReason::Abort); }
  // n > 1: child continues from parent's state and shares its blocks. Parent must be running with
  // its prompt computed. (Recurrent models: when no state slot is free the child waits, to be
  // computed from its start like a preempted request.) child_last_token (if set) replaces the last, not yet computed output token
  // (the child's own sample from the same logits). The returned event says if the child finished.
  Result<RequestEvent> fork(RequestId parent, RequestId child,
                            std::optional<int32_t> child_last_token = std::nullopt);

  const Request* request(RequestId id) const;  // live requests only
  bool has_unfinished() const { return !requests_.empty(); }
  const std::vector<RequestId>& running() const { return running_; }
  std::vector<RequestId> waiting() const { return {waiting_.begin(), waiting_.end()}; }
  SchedulerStats stats() const;
  const KvCacheManager& kv() const { return kv_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  Scheduler(const SchedulerConfig& config, KvCacheManager kv);
  void enqueue_waiting(RequestId id, bool front);
  void preempt(Request& req);
  void shift_context(Request& req);
  void release_out_of_window(const Request& r);
  void remove_request(RequestId id);
  Request& req(RequestId id);

  SchedulerConfig config_;
  KvCacheManager kv_;
  std::unordered_map<RequestId, Request> requests_;  // live (unfinished) requests
  std::vector<RequestId> running_;                   // in admission order (last = newest)
  std::deque<RequestId> waiting_;                    // scheduling order (front first)
  uint64_t next_arrival_ = 0;
  uint64_t step_ = 0;
  bool in_flight_ = false;  // a non-empty schedule() awaits its update()
  uint64_t num_preemptions_ = 0;
  uint64_t num_context_shifts_ = 0;
  int32_t last_step_tokens_ = 0;
  int64_t total_scheduled_tokens_ = 0;
};

}  // namespace tmill
