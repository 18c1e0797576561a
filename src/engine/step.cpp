// The step loop: schedule -> forward(batch) -> sample -> update, and turning scheduler events into
// streamed outputs (text, stop strings, logprobs, finish reasons).
#include <algorithm>

#include "core/log.h"
#include "engine/engine_impl.h"
#include "tokenizer/tokenizer.h"

namespace tmill {

namespace {
double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
}  // namespace

// Schedules, computes and samples one step. Returns false when nothing was scheduled.
bool Engine::Impl::step() {
  drain_inbox();
  expire_queued();
  SchedulerOutput out = sched->schedule();
  if (out.empty()) {
    update_stats();
    return false;
  }
  const auto t0 = Clock::now();

  // 1. the batch: each scheduled request's tokens, positions and block table
  for (const BlockCopy& c : out.block_copies) kv.copy_block(c.src, c.dst);
  ForwardBatch batch;
  StepStats st;
  for (const ScheduledRequest& s : out.scheduled) {
    SeqSlice slice;
    slice.token_begin = static_cast<int32_t>(batch.tokens.size());
    slice.n_tokens = s.num_tokens;
    slice.pos_begin = s.start_pos;
    slice.block_table = s.block_table;
    slice.logits = s.produces_sample ? SeqSlice::Logits::Last : SeqSlice::Logits::None;
    batch.tokens.insert(batch.tokens.end(), s.token_ids.begin(), s.token_ids.end());
    batch.seqs.push_back(std::move(slice));
    const Request* r = sched->request(s.id);
    const bool decode = r && s.start_pos >= r->num_prompt_tokens();
    (decode ? st.num_decode_tokens : st.num_prefill_tokens) += s.num_tokens;
    Choice* c = choices[s.id];
    if (!c->group->timings.scheduled) {
      c->group->timings.scheduled = true;
      c->group->timings.first_scheduled = t0;
      c->group->cached_prompt_tokens = s.start_pos;  // a first schedule starts past its prefix-cache hit
      if (observer) observer->on_request_scheduled(c->group->timings);
    }
  }

  // 2. forward
  forward->run(batch, kv, logits);

  // 3. sample every sequence whose chunk reached its last known token
  const int32_t n_vocab = static_cast<int32_t>(self->model_->config().n_vocab);
  std::vector<int32_t> sampled(out.scheduled.size(), -1);
  std::vector<SampleResult> results(out.scheduled.size());
  struct PendingFork {
    Choice* parent;
    std::vector<std::pair<Choice*, SampleResult>> children;
  };
  std::vector<PendingFork> forks;
  struct SampleJob {
    size_t i;          // index in out.scheduled
    const float* lg;   // its logits row
    Choice* c;
    const Request* r;
  };
  std::vector<SampleJob> jobs;
  size_t row = 0;
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledRequest& s = out.scheduled[i];
    if (!s.produces_sample) continue;
    jobs.push_back({i, logits.data() + row++ * static_cast<size_t>(n_vocab), choices[s.id], sched->request(s.id)});
  }
  // Sequences sample in parallel (each choice owns its RNG, each thread its Sampler scratch).
  auto sample_one = [&](const SampleJob& j, Sampler& sp) {
    results[j.i] = sp.sample(j.lg, n_vocab, j.c->group->req.sampling, j.r->prompt(), j.r->outputs(), j.c->rng);
    sampled[j.i] = results[j.i].token;
  };
  if (jobs.size() > 1 && pool->size() > 1) {
    pool->parallel_for(static_cast<int64_t>(jobs.size()), 1, [&](int64_t b, int64_t e, int tid) {
      for (int64_t k = b; k < e; ++k) sample_one(jobs[static_cast<size_t>(k)], samplers[static_cast<size_t>(tid)]);
    });
  } else {
    for (const SampleJob& j : jobs) sample_one(j, samplers[0]);
  }
  // n > 1: the other choices draw their first token from the same logits, then fork after update.
  for (const SampleJob& j : jobs) {
    Group& g = *j.c->group;
    const GenerateRequest& gr = g.req;
    if (gr.n > 1 && !g.forked && j.c->index == 0 && j.r->num_output_tokens() == 0) {
      g.forked = true;
      PendingFork pf{j.c, {}};
      for (auto& child : g.choices)
        if (child->index != 0)
          pf.children.emplace_back(
              child.get(), samplers[0].sample(j.lg, n_vocab, gr.sampling, j.r->prompt(), j.r->outputs(), child->rng));
      forks.push_back(std::move(pf));
    }
  }

  // 4. update: advance the scheduler and stream what each request produced
  std::vector<RequestEvent> events = sched->update(out, sampled);
  std::unordered_map<RequestId, const SampleResult*> result_of;
  for (const SampleJob& j : jobs) result_of[out.scheduled[j.i].id] = &results[j.i];
  for (const RequestEvent& ev : events) {
    auto it = choices.find(ev.id);
    if (it == choices.end()) continue;
    auto sr = result_of.find(ev.id);
    handle_event(*it->second, ev, sr == result_of.end() ? nullptr : sr->second);
  }
  for (PendingFork& pf : forks) {
    for (auto& [child, res] : pf.children) {
      child->sched_id = next_sched_id++;
      choices[child->sched_id] = child;
      child->added = true;
      auto ev = sched->request(pf.parent->sched_id)
                    ? sched->fork(pf.parent->sched_id, child->sched_id, res.token)
                    : Result<RequestEvent>(Error{"parent finished"});
      if (ev.ok()) {
        handle_event(*child, *ev, &res);
      } else {
        // The parent ended on its first token: the child starts over as its own request (its prompt
        // blocks are in the prefix cache by now).
        choices.erase(child->sched_id);
        child->added = false;
        add_choice(*child->group, *child);
      }
    }
  }

  st.num_seqs = static_cast<int32_t>(out.scheduled.size());
  st.num_tokens = out.total_tokens;
  st.seconds = seconds_between(t0, Clock::now());
  {
    std::lock_guard<std::mutex> lock(stats_mu);
    stats.steps++;
    stats.prompt_tokens_total += static_cast<uint64_t>(st.num_prefill_tokens);
  }
  if (observer) observer->on_step(st);
  update_stats();
  return true;
}

void Engine::Impl::drain_inbox() {
  std::deque<std::unique_ptr<Group>> incoming;
  std::vector<uint64_t> to_abort;
  {
    std::lock_guard<std::mutex> lock(mu);
    incoming.swap(inbox);
    to_abort.swap(aborts);
  }
  for (auto& gp : incoming) {
    Group& g = *gp;
    const GenerateRequest& r = g.req;
    const auto& tok = self->tokenizer_;
    const uint64_t base_seed = r.sampling.seed ? *r.sampling.seed : random_seed();
    for (int32_t i = 0; i < r.n; ++i) {
      auto c = std::make_unique<Choice>();
      c->group = &g;
      c->index = i;
      c->rng.reseed(base_seed + static_cast<uint64_t>(i));
      StreamingDetokenizer::Options opt;
      opt.skip_special = r.skip_special_tokens;
      opt.stop = r.stop;
      c->text = std::make_unique<StreamingDetokenizer>(tok, r.prompt, std::move(opt));
      g.choices.push_back(std::move(c));
    }
    g.unfinished = r.n;
    live_groups.fetch_add(1);
    const uint64_t id = g.id;
    groups[id] = std::move(gp);
    // n > 1 starts with choice 0 alone; the others fork from it after the prompt is computed.
    add_choice(*groups[id], *groups[id]->choices[0]);
  }
  for (uint64_t id : to_abort) end_group(id, FinishReason::Abort, "aborted");
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
    finish_choice(c, reason, why, {});
  }
}

void Engine::Impl::add_choice(Group& g, Choice& c, const std::vector<int32_t>*) {
  const GenerateRequest& r = g.req;
  RequestParams p;
  c.sched_id = next_sched_id++;
  p.id = c.sched_id;
  p.prompt = r.prompt;
  p.max_tokens = r.max_tokens;
  p.min_tokens = r.min_tokens;
  p.priority = r.priority;
  p.stop_token_ids = r.stop_token_ids;
  if (!r.ignore_eos)
    for (int32_t e : eog_ids) p.stop_token_ids.push_back(e);
  Status st = sched->add_request(std::move(p));
  if (!st.ok()) {
    finish_choice(c, FinishReason::Error, st.error(), {});
    return;
  }
  c.added = true;
  choices[c.sched_id] = &c;
}

void Engine::Impl::handle_event(Choice& c, const RequestEvent& ev, const SampleResult* sample) {
  if (c.finished) return;
  Group& g = *c.group;
  RequestOutput o;
  o.request_id = g.id;
  o.index = c.index;
  o.prompt_tokens = static_cast<int32_t>(g.req.prompt.size());
  o.cached_prompt_tokens = g.cached_prompt_tokens;
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
      reason = self->tokenizer_->token_text(tok);  // a stop token: counted, but not part of the text
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
  if (g.callback) g.callback(o);
  g.unfinished--;
  maybe_finish_group(g);
}

// Ends a choice that produced no new token now (abort, error).
void Engine::Impl::finish_choice(Choice& c, FinishReason reason, const std::string& stop_reason, std::string tail_text) {
  if (c.finished) return;
  Group& g = *c.group;
  c.finished = true;
  c.finish_reason = reason;
  RequestOutput o;
  o.request_id = g.id;
  o.index = c.index;
  o.prompt_tokens = static_cast<int32_t>(g.req.prompt.size());
  o.cached_prompt_tokens = g.cached_prompt_tokens;
  o.completion_tokens = c.completion_tokens;
  o.text = std::move(tail_text);
  o.finished = true;
  o.finish_reason = reason;
  o.stop_reason = stop_reason;
  if (c.added) choices.erase(c.sched_id);
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
  groups.erase(g.id);
}

void Engine::Impl::expire_queued() {
  const auto now = Clock::now();
  if (now - last_expiry_check < std::chrono::milliseconds(5)) return;
  last_expiry_check = now;
  std::vector<uint64_t> expired;
  for (auto& [id, g] : groups)
    if (g->req.queue_timeout_s > 0 && !g->timings.scheduled &&
        seconds_between(g->timings.arrival, now) > g->req.queue_timeout_s)
      expired.push_back(id);
  for (uint64_t id : expired) end_group(id, FinishReason::Error, "timeout");
}

void Engine::Impl::update_stats() {
  std::lock_guard<std::mutex> lock(stats_mu);
  stats.sched = sched->stats();
}

}  // namespace tmill
