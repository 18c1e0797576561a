// Sampling for one step: every sequence whose chunk reached its last known token draws its next
// token from its logits row, sequences in parallel (each choice owns its RNG, each pool thread its
// Sampler scratch). For n > 1 the other choices draw their first token from choice 0's logits and
// join the scheduler as forks after the update. Constrained choices mask their row first
// (constraints.cpp), inside the same parallel loop. A sequence with speculative drafts verifies them
// here, row by row (sample_entry), a constrained one with each row masked by its grammar's state
// after the drafts before it.
#include "engine/engine_impl.h"

namespace tmill {

StepSamples Engine::Impl::sample_step(const SchedulerOutput& out) {
  const int32_t n_vocab = static_cast<int32_t>(model->config().n_vocab);
  StepSamples s;
  s.tokens.resize(out.scheduled.size());
  s.results.resize(out.scheduled.size());
  struct Job {
    size_t i;    // index in out.scheduled
    size_t row;  // its first logits row (greedy_step: its argmax's index in greedy_ids)
    Choice* c;
    const Request* r;
  };
  auto row_of = [&](const Job& j) { return logits.data() + j.row * static_cast<size_t>(n_vocab); };
  std::vector<Job> jobs;
  std::vector<int32_t> accepted(out.scheduled.size(), 0);  // drafts kept, per entry
  size_t row = 0;
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledRequest& sr = out.scheduled[i];
    if (!sr.produces_sample) continue;
    // (A choice ended since schedule -- async scheduling's stop strings and aborts -- is skipped.)
    const auto c = choices.find(sr.id);
    const Request* r = sched->request(sr.id);
    if (c != choices.end() && r) jobs.push_back({i, row, c->second, r});
    row += 1 + static_cast<size_t>(sr.num_draft_tokens);  // a chunk with drafts has a row per position
  }
  auto sample_one = [&](const Job& j, int tid) {
    if (greedy_step) {  // the device's argmax of the row (plain_greedy_step)
      SampleResult res;
      res.token = greedy_ids[static_cast<size_t>(j.row)];
      s.results[j.i].push_back(res);
      s.tokens[j.i].push_back(res.token);
      return;
    }
    accepted[j.i] = sample_entry(out.scheduled[j.i], row_of(j), *j.c, *j.r, samplers[static_cast<size_t>(tid)],
                                 constraint_scratch[static_cast<size_t>(tid)], s.results[j.i]);
    for (const SampleResult& res : s.results[j.i]) s.tokens[j.i].push_back(res.token);
  };
  if (jobs.size() > 1 && pool->size() > 1) {
    pool->parallel_for(static_cast<int64_t>(jobs.size()), 1, [&](int64_t b, int64_t e, int tid) {
      for (int64_t k = b; k < e; ++k) sample_one(jobs[static_cast<size_t>(k)], tid);
    });
  } else {
    for (const Job& j : jobs) sample_one(j, 0);
  }
  for (const Job& j : jobs) {
    s.by_request[out.scheduled[j.i].id] = &s.results[j.i];
    if (const int32_t k = out.scheduled[j.i].num_draft_tokens; k > 0) {
      const int32_t a = accepted[j.i];
      s.num_drafts++;
      s.num_draft_tokens += k;
      s.num_accepted += a;
      if (static_cast<int32_t>(s.accepted_per_pos.size()) < k) s.accepted_per_pos.resize(static_cast<size_t>(k), 0);
      for (int32_t p = 0; p < a; ++p) s.accepted_per_pos[static_cast<size_t>(p)]++;
      record_verification(j.c->spec, k, a, config.speculative.adaptive);
    }
    Group& g = *j.c->group;
    if (g.req.n > 1 && !g.forked && j.c->index == 0 && j.r->num_output_tokens() == 0) {
      g.forked = true;
      StepSamples::Fork f{j.c, {}};
      for (auto& child : g.choices)
        if (child->index != 0)
          f.children.emplace_back(child.get(), sample_choice(*child, row_of(j), *j.r, samplers[0], constraint_scratch[0]));
      s.forks.push_back(std::move(f));
    }
  }
  return s;
}

// Without drafts: one token from the row. With k drafts (rows 0..k score the positions of drafts
// 1..k and the one after them): each draft is verified against the row before it (Sampler::verify:
// the sampler's own choice, or the rejection rule) with the accepted drafts counted as output for
// penalties; the first rejection ends the entry with the verifier's token, and when all are accepted
// the last row gives one more token.
// A constrained choice verifies through constrained_sample: row j is masked with its grammar state
// after drafts 0..j-1, which is its real state advanced by the kept tokens so far (a rejected
// draft never reaches it: the state moves by the verifier's token instead). A draft after which
// the grammar is complete and nothing may follow ends the entry without a token of its own.
int32_t Engine::Impl::sample_entry(const ScheduledRequest& sr, const float* lg, Choice& c, const Request& r,
                                   Sampler& sp, ConstraintScratch& scratch, std::vector<SampleResult>& out) {
  const int32_t k = sr.num_draft_tokens;
  if (k == 0) {
    out.push_back(sample_choice(c, lg, r, sp, scratch));
    return 0;
  }
  const auto n = static_cast<int32_t>(model->config().n_vocab);
  const SamplingParams& p = c.group->req.sampling;
  const int32_t* drafts = sr.token_ids.data() + (sr.token_ids.size() - static_cast<size_t>(k));
  std::vector<int32_t> output(r.outputs().begin(), r.outputs().end());
  for (int32_t j = 0; j <= k; ++j) {
    const float* row = lg + static_cast<size_t>(j) * static_cast<size_t>(n);
    if (c.constraint) {
      out.push_back(constrained_sample(c, row, r, output, sp, scratch, j < k ? drafts[j] : -1));
      if (j == k || out.back().token != drafts[j]) return j;
      if (c.constraint->dead || c.constraint->terminated()) return j + 1;
      output.push_back(drafts[j]);
      continue;
    }
    if (j == k) {
      out.push_back(sp.sample(row, n, p, r.prompt(), output, c.rng));
      return k;
    }
    bool accepted = false;
    out.push_back(sp.verify(row, n, p, r.prompt(), output, drafts[j], c.rng, &accepted));
    if (!accepted) return j;
    output.push_back(drafts[j]);
  }
  return k;
}

void Engine::Impl::start_forks(StepSamples& samples) {
  for (StepSamples::Fork& f : samples.forks) {
    for (auto& [child, res] : f.children) {
      child->sched_id = next_sched_id++;
      choices[child->sched_id] = child;
      child->added = true;
      auto ev = sched->request(f.parent->sched_id) ? sched->fork(f.parent->sched_id, child->sched_id, res.token)
                                                   : Result<RequestEvent>(Error{"parent finished"});
      if (ev.ok()) {
        handle_event(*child, *ev, &res);
      } else {
        // The parent ended on its first token: the child starts over as its own request (its prompt
        // blocks are in the prefix cache by now).
        choices.erase(child->sched_id);
        child->added = false;
        child->constraint = new_constraint(*child->group);  // its first token is drawn again
        add_choice(*child->group, *child);
      }
    }
  }
}

}  // namespace tmill
