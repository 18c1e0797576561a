// The heartbeat: one engine step, and the bookkeeping around it (the inbox, queue timeouts, step
// statistics). Batch building, sampling and output processing live in their own files.
#include <chrono>
#include <cstdlib>

#include "core/log.h"

#include "engine/engine_impl.h"

namespace tmill {

namespace {
double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
}  // namespace

// Schedules, computes and samples one step. Returns false when nothing was scheduled.
bool Engine::Impl::step() {
  drain_inbox();                                          // new requests, aborts, queue timeouts
  propose_drafts();                                       // speculative decoding: draft tokens
  const SchedulerOutput out = sched->schedule();          // request -> num_tokens (+ drafts) this step
  if (out.empty()) {
    emit_pending();                                       // async scheduling: the last step's outputs
    publish_stats();
    return false;
  }
  const Clock::time_point t0 = Clock::now();
  copy_blocks(out);                                       // copy-on-write
  ForwardBatch batch = build_forward_batch(out);
  bind_loras(batch, out);                                 // sequences with a LoRA adapter
  StepStats st = begin_step(out, t0);
  launch_forward(batch, out);                             // the GPU starts (the CPU's forward runs whole)
  emit_pending();                                         // async scheduling: the last step's outputs meanwhile
  wait_forward();                                         // logits, or the device's argmax
  StepSamples samples = sample_step(out);                 // drafts verified, accepted ones kept
  std::vector<RequestEvent> events = sched->update(out, samples.tokens);
  finish_step(StepOutputs{std::move(events), std::move(samples), st, t0});  // text, stop strings, forks
  return true;
}

// The step's outputs: its text (stop strings, finishing, callbacks), its forks (n > 1) and its
// statistics. With async scheduling on a GPU device the forks join now (the scheduler needs them
// before the next schedule) and the rest waits for emit_pending, which runs while the next step is
// on the device: the host's share of a step then overlaps the device's. A choice that a stop string,
// a grammar or an abort ends meanwhile has the next step's token computed but never sampled (the
// scheduler skips it in update, sample_step skips it): one wasted token, the output unchanged.
void Engine::Impl::finish_step(StepOutputs o) {
  o.stats.seconds = seconds_between(o.t0, Clock::now());
  if (!async_scheduling) {
    emit_outputs(o.events, o.samples);
    start_forks(o.samples);
    end_step(o.stats, o.samples);
    return;
  }
  start_forks(o.samples);
  pending = std::move(o);
}

void Engine::Impl::emit_pending() {
  if (!pending) return;
  StepOutputs o = std::move(*pending);
  pending.reset();
  emit_outputs(o.events, o.samples);
  {
    std::lock_guard<std::mutex> lock(stats_mu);
    stats.async_scheduled_steps++;
  }
  end_step(o.stats, o.samples);
}

// A failed GPU call mid-step (a device fault, not a request's fault) leaves the device state unknown:
// the process ends with the reason, as on a failed CPU invariant, and a supervisor restarts it.
namespace {
void gpu_or_die(const Status& st) {
  if (!st.ok()) {
    log_error("GPU step failed: {}", st.error());
    std::abort();
  }
}
}  // namespace

void Engine::Impl::copy_blocks(const SchedulerOutput& out) {
  for (const BlockCopy& c : out.block_copies) {
    if (gpu_forward) gpu_or_die(gpu_forward->copy_block(c.src, c.dst));
    else kv.copy_block(c.src, c.dst);
  }
  for (const BlockCopy& c : out.state_copies) {  // (recurrent models run on the CPU only)
    TM_ASSERT(!gpu_forward, "sequence states on the GPU");
    kv.copy_state(c.src, c.dst);
  }
}

void Engine::Impl::launch_forward(const ForwardBatch& batch, const SchedulerOutput& out) {
  greedy_step = gpu_forward && plain_greedy_step(out);
  if (gpu_forward) gpu_or_die(gpu_forward->launch(batch, greedy_step));
  else forward->run(batch, kv, logits);
}

void Engine::Impl::wait_forward() {
  if (gpu_forward) gpu_or_die(gpu_forward->wait(logits, greedy_step ? &greedy_ids : nullptr));
}

// Every sample of the step is a plain argmax of its row (SamplingParams::plain_argmax, Sampler::sample's
// fast path) with no logprobs, no grammar, no drafts to verify and no n > 1 choices to fork from the row.
bool Engine::Impl::plain_greedy_step(const SchedulerOutput& out) const {
  for (const ScheduledRequest& sr : out.scheduled) {
    if (!sr.produces_sample) continue;
    if (sr.num_draft_tokens > 0) return false;
    const Choice& c = *choices.at(sr.id);
    const GenerateRequest& r = c.group->req;
    const SamplingParams& p = r.sampling;
    if (c.constraint || r.n > 1 || !p.plain_argmax() || p.logprobs >= 0) return false;
  }
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
    const uint64_t base_seed = r.sampling.seed ? *r.sampling.seed : config.seed ? request_seeds.next() : random_seed();
    for (int32_t i = 0; i < r.n; ++i) {
      auto c = std::make_unique<Choice>();
      c->group = &g;
      c->index = i;
      c->rng.reseed(base_seed + static_cast<uint64_t>(i));
      c->spec.rng.reseed(~base_seed + static_cast<uint64_t>(i));  // the replay proposer's errors
      StreamingDetokenizer::Options opt;
      opt.skip_special = r.skip_special_tokens;
      opt.stop = r.stop;
      c->text = std::make_unique<StreamingDetokenizer>(tokenizer, r.prompt, std::move(opt));
      c->constraint = new_constraint(g);
      g.choices.push_back(std::move(c));
    }
    g.unfinished = r.n;
    live_groups.fetch_add(1);
    if (g.lora) ++live_lora_groups;
    const uint64_t id = g.id;
    groups[id] = std::move(gp);
    // n > 1 starts with choice 0 alone; the others fork from it after the prompt is computed.
    add_choice(*groups[id], *groups[id]->choices[0]);
  }
  for (uint64_t id : to_abort) end_group(id, FinishReason::Abort, "aborted");
  expire_queued();
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

// Counts the step's prefill and decode tokens, and stamps requests scheduled for the first time.
StepStats Engine::Impl::begin_step(const SchedulerOutput& out, Clock::time_point t0) {
  StepStats st;
  st.num_seqs = static_cast<int32_t>(out.scheduled.size());
  st.num_tokens = out.total_tokens;
  for (const ScheduledRequest& s : out.scheduled) {
    const Request* r = sched->request(s.id);
    const bool decode = r && s.start_pos >= r->num_prompt_tokens();
    (decode ? st.num_decode_tokens : st.num_prefill_tokens) += s.num_tokens;
    st.num_draft_tokens += s.num_draft_tokens;
    Group& g = *choices.at(s.id)->group;
    if (!g.timings.scheduled) {
      g.timings.scheduled = true;
      g.timings.first_scheduled = t0;
      g.cached_prompt_tokens = s.start_pos;  // a first schedule starts past its prefix-cache hit
      if (observer) observer->on_request_scheduled(g.timings);
    }
  }
  return st;
}

void Engine::Impl::end_step(const StepStats& st, const StepSamples& samples) {
  {
    std::lock_guard<std::mutex> lock(stats_mu);
    stats.spec_num_drafts += static_cast<uint64_t>(samples.num_drafts);
    stats.spec_num_draft_tokens += static_cast<uint64_t>(samples.num_draft_tokens);
    stats.spec_num_accepted_tokens += static_cast<uint64_t>(samples.num_accepted);
    for (size_t p = 0; p < samples.accepted_per_pos.size() && p < stats.spec_accepted_per_pos.size(); ++p)
      stats.spec_accepted_per_pos[p] += static_cast<uint64_t>(samples.accepted_per_pos[p]);
    stats.steps++;
    stats.prompt_tokens_total += static_cast<uint64_t>(st.num_prefill_tokens);
    stats.grammar_mask_seconds_total += static_cast<double>(mask_ns.exchange(0)) * 1e-9;
  }
  if (observer) observer->on_step(st);
  publish_stats();
}

void Engine::Impl::publish_stats() {
  const SchedulerStats s = sched->stats();
  std::lock_guard<std::mutex> lock(stats_mu);
  stats.num_running = s.num_running;
  stats.num_waiting = s.num_waiting;
  stats.num_preemptions = s.num_preemptions;
  stats.num_context_shifts = s.num_context_shifts;
  stats.kv = s.kv;
}

}  // namespace tmill
