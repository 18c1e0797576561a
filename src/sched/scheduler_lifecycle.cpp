// Scheduler request lifecycle: add_request, update, finish/abort, fork.
#include <algorithm>
#include <string>

#include "core/log.h"
#include "sched/scheduler.h"

namespace tmill {

void Scheduler::add_request(RequestParams params) {
  // The engine's front door (check_request) refused anything else; these are invariants here.
  TM_ASSERT(!requests_.count(params.id), "duplicate request id");
  TM_ASSERT(!params.prompt.empty(), "empty prompt");
  TM_ASSERT(params.max_tokens >= 1 && params.min_tokens >= 0, "max_tokens < 1 or min_tokens < 0");
  int32_t max_len = config_.max_model_len;
  if (params.max_model_len > 0) max_len = std::min(max_len, params.max_model_len);
  TM_ASSERT(static_cast<int64_t>(params.prompt.size()) <= max_len, "prompt longer than max_model_len");
  const RequestId id = params.id;
  std::optional<int32_t> shift_keep;
  if (config_.context_shift) shift_keep = config_.context_shift_keep;
  requests_.emplace(id, Request(std::move(params), next_arrival_++, max_len, kv_.block_size(), shift_keep));
  enqueue_waiting(id, /*front=*/false);
}

void Scheduler::remove_request(RequestId id) {
  if (auto it = std::find(running_.begin(), running_.end(), id); it != running_.end()) running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), id); it != waiting_.end()) waiting_.erase(it);
  kv_.free(id);  // blocks go back to the pool; full computed ones stay in the prefix cache
  requests_.erase(id);
}

bool Scheduler::finish(RequestId id, FinishReason reason) {
  if (!requests_.count(id)) return false;
  log_debug("request {} finished by the engine: {}", id, to_string(reason));
  remove_request(id);
  return true;
}

std::vector<RequestEvent> Scheduler::update(const SchedulerOutput& out, std::span<const int32_t> sampled) {
  TM_ASSERT(sampled.size() == out.scheduled.size(), "one sampled entry per scheduled request");
  std::vector<std::vector<int32_t>> lists(sampled.size());
  for (size_t i = 0; i < sampled.size(); ++i)
    if (out.scheduled[i].produces_sample) lists[i].push_back(sampled[i]);
  return update(out, std::span<const std::vector<int32_t>>(lists));
}

std::vector<RequestEvent> Scheduler::update(const SchedulerOutput& out, std::span<const std::vector<int32_t>> sampled) {
  TM_ASSERT(sampled.size() == out.scheduled.size(), "one sampled entry per scheduled request");
  in_flight_ = false;
  std::vector<RequestEvent> events;
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledRequest& s = out.scheduled[i];
    auto it = requests_.find(s.id);
    if (it == requests_.end() || it->second.status != RequestStatus::Running) continue;  // aborted
    Request& r = it->second;
    TM_ASSERT(r.num_computed_tokens == s.start_pos, "update() does not match the request state");
    r.draft_tokens.clear();
    if (!s.produces_sample) {
      r.num_computed_tokens += s.num_tokens;
      kv_.commit(r.id(), r.block_hashes(), r.num_computed_tokens);
      release_out_of_window(r);
      continue;
    }
    const std::vector<int32_t>& toks = sampled[i];
    const auto accepted = static_cast<int32_t>(toks.size()) - 1;
    TM_ASSERT(accepted >= 0 && accepted <= s.num_draft_tokens, "more tokens than drafts + 1");
    for (int32_t k = 0; k < accepted; ++k)
      TM_ASSERT(toks[k] == s.token_ids[s.token_ids.size() - s.num_draft_tokens + k], "an accepted token is not its draft");
    // The KV of the scored tokens up to the last accepted draft stays; rejected drafts' slots go back.
    r.num_computed_tokens += s.num_tokens - (s.num_draft_tokens - accepted);
    if (accepted < s.num_draft_tokens) kv_.truncate(r.id(), r.num_computed_tokens);
    FinishReason finish = FinishReason::None;
    for (int32_t tok : toks) {
      finish = r.append_output(tok);
      events.push_back({s.id, tok, finish});
      if (finish != FinishReason::None) break;
    }
    // Finished on an accepted draft: the computed tokens end with it.
    r.num_computed_tokens = std::min(r.num_computed_tokens, r.num_tokens());
    kv_.commit(r.id(), r.block_hashes(), r.num_computed_tokens);
    if (finish != FinishReason::None) {
      r.status = finished_status(finish);
      remove_request(s.id);
    } else {
      release_out_of_window(r);
    }
  }
  return events;
}

// The next token of r sits at position num_computed_tokens and attends to the kv_window positions
// ending there; every later token attends to later ones. Called after commit, so the released full
// blocks already carry their prefix-cache keys.
void Scheduler::release_out_of_window(const Request& r) {
  if (config_.kv_window > 0) kv_.release_before(r.id(), r.num_computed_tokens + 1 - config_.kv_window);
}

bool Scheduler::set_draft_tokens(RequestId id, std::vector<int32_t> drafts) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  Request& r = it->second;
  if (r.status != RequestStatus::Running || r.num_tokens() - r.num_computed_tokens != 1) return false;
  r.draft_tokens = std::move(drafts);
  return true;
}

Result<RequestEvent> Scheduler::fork(RequestId parent, RequestId child,
                                     std::optional<int32_t> child_last_token) {
  if (in_flight_) return Error{"fork: a step is in flight; call it after update()"};
  auto it = requests_.find(parent);
  if (it == requests_.end()) return Error{"fork: unknown parent request"};
  const Request& p = it->second;
  if (p.status != RequestStatus::Running || p.num_computed_tokens < p.num_prompt_tokens())
    return Error{"fork: the parent must be running with its prompt computed"};
  if (requests_.count(child)) return Error{"fork: child id already in use"};
  Request c = p.fork_as(child, next_arrival_++);
  RequestEvent ev{child, std::nullopt, FinishReason::None};
  if (child_last_token) {
    if (c.num_output_tokens() == 0 || c.num_computed_tokens >= c.num_tokens())
      return Error{"fork: the parent has no uncomputed output token to replace"};
    c.replace_last_output(*child_last_token);
    ev.token = *child_last_token;
  }
  ev.finish = c.check_stop();
  if (ev.finish != FinishReason::None) return ev;  // (finished at once: nothing to hold)
  const bool shares = kv_.fork(parent, child);
  if (!shares) {  // no state slot free (recurrent models): computed from its start once one is
    c.num_computed_tokens = 0;
    c.status = RequestStatus::Preempted;
  }
  requests_.emplace(child, std::move(c));
  if (shares) running_.push_back(child);
  else enqueue_waiting(child, /*front=*/true);
  return ev;
}

}  // namespace tmill
