// Scheduler: schedule() (token budget, chunked prefill, prefix hits, preemption).
// Request lifecycle (add, update, finish, fork) lives in scheduler_lifecycle.cpp.
#include "sched/scheduler.h"

#include <algorithm>

#include "core/log.h"

namespace tmill {

Result<Scheduler> Scheduler::create(const SchedulerConfig& config) {
  SchedulerConfig c = config;
  if (c.max_num_batched_tokens < 1) return Error{"scheduler: max_num_batched_tokens must be >= 1"};
  if (c.max_num_seqs < 1) return Error{"scheduler: max_num_seqs must be >= 1"};
  if (c.max_model_len < 0) return Error{"scheduler: max_model_len must not be negative"};
  if (c.long_prefill_token_threshold < 0) return Error{"scheduler: negative long_prefill_token_threshold"};
  if (c.kv_window < 0) return Error{"scheduler: kv_window must not be negative"};
  TM_ASSIGN_OR_RETURN(KvCacheManager kv, KvCacheManager::create(c.kv));
  // A request must fit the cache alone, or it could never make progress: the KV capacity acts as a
  // max_model_len (vLLM refuses to start instead; tiny test configs rely on the clamp).
  if (c.max_model_len == 0) {
    c.max_model_len = static_cast<int32_t>(kv.capacity_tokens());
  } else if (c.max_model_len > kv.capacity_tokens()) {
    log_warn("scheduler: max_model_len {} exceeds the KV cache capacity ({} tokens); clamping",
             c.max_model_len, kv.capacity_tokens());
    c.max_model_len = static_cast<int32_t>(kv.capacity_tokens());
  }
  if (!c.enable_chunked_prefill && c.max_num_batched_tokens < c.max_model_len)
    return Error{"scheduler: without chunked prefill, max_num_batched_tokens must be >= max_model_len"};
  return Scheduler(c, std::move(kv));
}

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager kv)
    : config_(config), kv_(std::move(kv)) {}

Request& Scheduler::req(RequestId id) {
  auto it = requests_.find(id);
  TM_ASSERT(it != requests_.end(), "unknown request id");
  return it->second;
}

const Request* Scheduler::request(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

void Scheduler::enqueue_waiting(RequestId id, bool front) {
  if (config_.policy == SchedulingPolicy::Fcfs) {
    if (front) waiting_.push_front(id);
    else waiting_.push_back(id);
    return;
  }
  // Priority: sorted by (priority, arrival); a preempted request goes back to its own rank.
  const Request& r = req(id);
  auto pos = std::find_if(waiting_.begin(), waiting_.end(), [&](RequestId other) {
    const Request& o = req(other);
    return std::pair(o.priority(), o.arrival()) > std::pair(r.priority(), r.arrival());
  });
  waiting_.insert(pos, id);
}

void Scheduler::preempt(Request& r) {
  kv_.free(r.id());
  r.draft_tokens.clear();
  r.status = RequestStatus::Preempted;
  r.num_computed_tokens = 0;
  ++r.num_preemptions;
  ++num_preemptions_;
  enqueue_waiting(r.id(), /*front=*/true);
}

// The request's tokens lose their oldest part after the kept prefix; its KV is recomputed from the
// front of the waiting queue, like a preempted request (the kept prefix's full blocks hit the cache).
void Scheduler::shift_context(Request& r) {
  kv_.free(r.id());
  const int32_t discarded = r.shift_context();
  TM_ASSERT(discarded > 0, "context shift made no room");
  log_debug("request {}: context shift discarded {} tokens", r.id(), discarded);
  r.status = RequestStatus::Preempted;
  ++num_context_shifts_;
  enqueue_waiting(r.id(), /*front=*/true);
}

namespace {
struct Planned {
  RequestId id;
  int32_t start_pos;
  int32_t num_tokens;  // including num_drafts
  int32_t num_drafts;
  bool resumed;
  std::vector<BlockCopy> copies;
};
}  // namespace

SchedulerOutput Scheduler::schedule() {
  TM_ASSERT(!in_flight_, "schedule() called again before update()");
  SchedulerOutput out;
  out.step = step_++;
  int32_t budget = config_.max_num_batched_tokens;
  const auto max_seqs = static_cast<size_t>(config_.max_num_seqs);
  const int32_t threshold = config_.enable_chunked_prefill ? config_.long_prefill_token_threshold : 0;
  std::vector<Planned> plan;

  // 1. Running requests, oldest first: decodes (1 token) and unfinished chunked prefills.
  size_t i = 0;
  while (i < running_.size() && budget > 0 && plan.size() < max_seqs) {
    Request& r = req(running_[i]);
    if (r.context_shift_enabled() && r.num_tokens() >= r.max_model_len()) {
      // Its next token would not fit the context: shift (after update(), so n > 1 forks are done).
      running_.erase(running_.begin() + static_cast<ptrdiff_t>(i));
      shift_context(r);
      continue;
    }
    int32_t n = r.num_tokens() - r.num_computed_tokens;
    TM_ASSERT(n >= 1 && r.num_tokens() <= r.max_model_len());
    if (threshold > 0) n = std::min(n, threshold);
    n = std::min(n, budget);
    std::optional<AllocResult> alloc;
    // Speculative drafts ride along a decode when budget, context and free blocks allow (cut first),
    // leaving a free block for each running request after this one, so drafts do not preempt anyone.
    int32_t drafts = 0;
    if (n == 1 && !r.draft_tokens.empty() &&
        kv_.num_free_blocks() > static_cast<int32_t>(running_.size() - i - 1)) {
      drafts = std::min({static_cast<int32_t>(r.draft_tokens.size()), budget - 1, r.max_model_len() - r.num_tokens()});
      if (drafts > 0 && !(alloc = kv_.allocate_slots(r.id(), r.num_computed_tokens, n + drafts))) drafts = 0;
      drafts = std::max(drafts, 0);
    }
    bool self_preempted = false;
    while (!alloc && !(alloc = kv_.allocate_slots(r.id(), r.num_computed_tokens, n))) {
      // No room: preempt the newest running request (lowest priority, then newest, under the
      // priority policy). The victim may be r itself.
      size_t v = running_.size() - 1;
      if (config_.policy == SchedulingPolicy::Priority) {
        auto key = [&](size_t k) { return std::pair(req(running_[k]).priority(), req(running_[k]).arrival()); };
        for (size_t k = 0; k < running_.size(); ++k)
          if (key(k) > key(v)) v = k;
      }
      const RequestId victim = running_[v];
      running_.erase(running_.begin() + static_cast<ptrdiff_t>(v));
      if (v < i) --i;
      auto done = std::find_if(plan.begin(), plan.end(), [&](const Planned& p) { return p.id == victim; });
      if (done != plan.end()) {  // already planned this step: give its budget back
        budget += done->num_tokens;
        plan.erase(done);
      }
      preempt(req(victim));
      out.preempted.push_back(victim);
      if (victim == r.id()) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    plan.push_back({r.id(), r.num_computed_tokens, n + drafts, drafts, false, std::move(alloc->copies)});
    budget -= n + drafts;
    ++i;
  }

  // 2. Waiting requests in queue order, only if nobody was preempted (no room to admit anyway).
  while (out.preempted.empty() && !waiting_.empty() && budget > 0 && running_.size() < max_seqs &&
         plan.size() < max_seqs) {
    Request& r = req(waiting_.front());
    TM_ASSERT(r.num_computed_tokens == 0 && !kv_.has_request(r.id()));
    const PrefixHit hit = kv_.get_computed_blocks({r.tokens(), r.block_hashes()});
    int32_t n = r.num_tokens() - hit.num_tokens;
    if (threshold > 0) n = std::min(n, threshold);
    if (!config_.enable_chunked_prefill && n > budget) break;
    n = std::min(n, budget);
    std::optional<AllocResult> alloc = kv_.allocate_slots(r.id(), 0, n, &hit);
    if (!alloc) break;  // head of line waits for blocks (FCFS: nobody overtakes it)
    waiting_.pop_front();
    running_.push_back(r.id());
    r.status = RequestStatus::Running;
    r.num_computed_tokens = hit.num_tokens;
    plan.push_back({r.id(), hit.num_tokens, n, 0, true, std::move(alloc->copies)});
    budget -= n;
  }

  // 3. Output: snapshot tokens and block tables (tables no longer change this step).
  for (Planned& p : plan) {
    const Request& r = req(p.id);
    ScheduledRequest s;
    s.id = p.id;
    s.start_pos = p.start_pos;
    s.num_tokens = p.num_tokens;
    auto toks = r.tokens().subspan(p.start_pos, p.num_tokens - p.num_drafts);
    s.token_ids.assign(toks.begin(), toks.end());
    s.token_ids.insert(s.token_ids.end(), r.draft_tokens.begin(), r.draft_tokens.begin() + p.num_drafts);
    s.num_draft_tokens = p.num_drafts;
    s.block_table = kv_.block_table(p.id);
    s.state_slot = kv_.state_slot(p.id);
    s.produces_sample = p.start_pos + p.num_tokens - p.num_drafts == r.num_tokens();
    s.resumed = p.resumed;
    out.block_copies.insert(out.block_copies.end(), p.copies.begin(), p.copies.end());
    out.total_tokens += p.num_tokens;
    out.scheduled.push_back(std::move(s));
  }
  out.state_copies = kv_.take_state_copies();
  TM_ASSERT(out.total_tokens <= config_.max_num_batched_tokens);
  last_step_tokens_ = out.total_tokens;
  total_scheduled_tokens_ += out.total_tokens;
  in_flight_ = !out.scheduled.empty();
  return out;
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.num_running = static_cast<int32_t>(running_.size());
  s.num_waiting = static_cast<int32_t>(waiting_.size());
  s.num_preemptions = num_preemptions_;
  s.num_context_shifts = num_context_shifts_;
  s.num_steps = step_;
  s.last_step_tokens = last_step_tokens_;
  s.total_scheduled_tokens = total_scheduled_tokens_;
  s.kv = kv_.stats();
  return s;
}

}  // namespace tmill
