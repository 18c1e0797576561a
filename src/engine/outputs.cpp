// Output processing: scheduler events (a new token, a finish) become the outputs streamed to each
// request's callback: incremental text, stop strings (held back, then cut), logprobs, finish
// reasons, per-request timings, and the end of a request once all its choices have finished.
#include <chrono>

#include "engine/engine_impl.h"
#include "tokenizer/tokenizer.h"

namespace tmill {

namespace {
double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

RequestOutput output_for(const Group& g, const Choice& c) {
  RequestOutput o;
  o.request_id = g.id;
  o.index = c.index;
  o.prompt_tokens = static_cast<int32_t>(g.req.prompt.size());
  o.cached_prompt_tokens = g.cached_prompt_tokens;
  return o;
}
}  // namespace

void Engine::Impl::add_choice(Group& g, Choice& c) {
  const GenerateRequest& r = g.req;
  RequestParams p;
  c.sched_id = next_sched_id++;
  p.id = c.sched_id;
  p.prompt = r.prompt;
  p.max_tokens = r.max_tokens;
  p.min_tokens = r.min_tokens;
  p.priority = r.priority;
  p.stop_token_ids = r.stop_token_ids;
  p.cache_key = g.cache_key;  // K/V under an adapter are cached apart from the base model's
  if (!r.ignore_eos)
    for (int32_t e : eog_ids) p.stop_token_ids.push_back(e);
  sched->add_request(std::move(p));  // checked at the front door (Engine::submit)
  c.added = true;
  choices[c.sched_id] = &c;
}

void Engine::Impl::emit_outputs(const std::vector<RequestEvent>& events, const StepSamples& samples) {
  // A request's events come in token order (several with accepted speculative drafts), like its results.
  std::unordered_map<RequestId, size_t> seen;
  for (const RequestEvent& ev : events) {
    const size_t k = seen[ev.id]++;
    auto it = choices.find(ev.id);
    if (it == choices.end()) continue;
    auto sr = samples.by_request.find(ev.id);
    const bool found = sr != samples.by_request.end();
    const SampleResult* res = found && k < sr->second->size() ? &(*sr->second)[k] : nullptr;
    handle_event(*it->second, ev, res, !found || k + 1 >= sr->second->size());
  }
}

void Engine::Impl::handle_event(Choice& c, const RequestEvent& ev, const SampleResult* sample, bool last_of_step) {
  if (c.finished) return;
  Group& g = *c.group;
  RequestOutput o = output_for(g, c);
  FinishReason finish = ev.finish;
  std::string reason;
  bool stop_string = false;
  if (ev.token) {
    const int32_t tok = *ev.token;
    const auto now = Clock::now();
    c.completion_tokens++;
    o.token_ids.push_back(tok);
    if (sample && g.req.sampling.logprobs >= 0) o.logprobs.push_back(*sample);
    if (!g.timings.produced_token) {
      g.timings.produced_token = true;
      g.timings.first_token = now;
    } else if (c.index == 0) {
      g.timings.itl_s.push_back(seconds_between(c.last_token_time, now));
    }
    c.last_token_time = now;
    g.timings.last_token = now;
    {
      std::lock_guard<std::mutex> lock(stats_mu);
      stats.generation_tokens_total++;
    }
    if (finish == FinishReason::Stop) {
      reason = tokenizer->token_text(tok);  // a stop token: counted, but not part of the text
    } else {
      o.text = c.text->push(tok);
      if (c.text->stopped()) {
        if (finish == FinishReason::None) sched->finish(c.sched_id, FinishReason::Stop);
        finish = FinishReason::Stop;
        reason = g.req.stop[static_cast<size_t>(c.text->stop_index())];
        if (g.req.include_stop_str_in_output) o.text += reason;
        stop_string = true;
      }
    }
    // Grammar complete, or stuck. The constraint has already moved past every token of this step
    // (several with accepted speculative drafts), and only the last can complete it or get stuck.
    if (c.constraint && last_of_step) finish = constraint_finish(c, finish, reason);
  }
  o.completion_tokens = c.completion_tokens;
  if (finish == FinishReason::None) {
    if (g.callback && (!o.token_ids.empty() || !o.text.empty())) g.callback(o);
    return;
  }
  if (!stop_string) o.text += c.text->finish();
  o.finished = true;
  o.finish_reason = finish;
  o.stop_reason = reason;
  c.finished = true;
  c.finish_reason = finish;
  choices.erase(c.sched_id);
  if (proposer) proposer->release(c.sched_id);
  if (g.callback) g.callback(o);
  g.unfinished--;
  maybe_finish_group(g);
}

// Ends a choice that produced no new token now (abort, error).
void Engine::Impl::finish_choice(Choice& c, FinishReason reason, const std::string& stop_reason) {
  if (c.finished) return;
  Group& g = *c.group;
  c.finished = true;
  c.finish_reason = reason;
  RequestOutput o = output_for(g, c);
  o.completion_tokens = c.completion_tokens;
  o.finished = true;
  o.finish_reason = reason;
  o.stop_reason = stop_reason;
  if (c.added) choices.erase(c.sched_id);
  if (c.added && proposer) proposer->release(c.sched_id);
  if (g.callback) g.callback(o);
  g.unfinished--;
  maybe_finish_group(g);
}

void Engine::Impl::maybe_finish_group(Group& g) {
  if (g.unfinished > 0) return;
  g.timings.finished = Clock::now();
  int32_t total = 0;
  FinishReason reason = g.choices[0]->finish_reason;
  for (auto& c : g.choices) {
    total += c->completion_tokens;
    if (c->finish_reason == FinishReason::Abort || c->finish_reason == FinishReason::Error) reason = c->finish_reason;
  }
  g.timings.completion_tokens = total;
  g.timings.finish_reason = reason;
  {
    std::lock_guard<std::mutex> lock(stats_mu);
    stats.requests_finished++;
  }
  if (observer) observer->on_request_done(g.timings);
  live_groups.fetch_sub(1);
  if (g.lora) --live_lora_groups;
  groups.erase(g.id);
}

// Ends every unfinished choice of a request. The group is destroyed when its last choice finishes,
// so it is looked up again before each choice.
void Engine::Impl::end_group(uint64_t id, FinishReason reason, const std::string& why) {
  auto it = groups.find(id);
  if (it == groups.end()) return;
  const size_t n = it->second->choices.size();
  for (size_t i = 0; i < n; ++i) {
    it = groups.find(id);
    if (it == groups.end()) return;
    Choice& c = *it->second->choices[i];
    if (c.finished) continue;
    if (c.added) sched->abort(c.sched_id);
    finish_choice(c, reason, why);
  }
}

}  // namespace tmill
