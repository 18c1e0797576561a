// Sampling for one step: every sequence whose chunk reached its last known token draws its next
// token from its logits row, sequences in parallel (each choice owns its RNG, each pool thread its
// Sampler scratch). For n > 1 the other choices draw their first token from choice 0's logits and
// join the scheduler as forks after the update. Constrained choices mask their row first
// (constraints.cpp), inside the same parallel loop.
#include "engine/engine_impl.h"

namespace tmill {

StepSamples Engine::Impl::sample_step(const SchedulerOutput& out) {
  const int32_t n_vocab = static_cast<int32_t>(model->config().n_vocab);
  StepSamples s;
  s.tokens.assign(out.scheduled.size(), -1);
  s.results.resize(out.scheduled.size());
  struct Job {
    size_t i;         // index in out.scheduled
    const float* lg;  // its logits row
    Choice* c;
    const Request* r;
  };
  std::vector<Job> jobs;
  size_t row = 0;
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledRequest& sr = out.scheduled[i];
    if (!sr.produces_sample) continue;
    jobs.push_back({i, logits.data() + row++ * static_cast<size_t>(n_vocab), choices.at(sr.id), sched->request(sr.id)});
  }
  auto sample_one = [&](const Job& j, int tid) {
    s.results[j.i] = sample_choice(*j.c, j.lg, *j.r, samplers[static_cast<size_t>(tid)],
                                   constraint_scratch[static_cast<size_t>(tid)]);
    s.tokens[j.i] = s.results[j.i].token;
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
    Group& g = *j.c->group;
    if (g.req.n > 1 && !g.forked && j.c->index == 0 && j.r->num_output_tokens() == 0) {
      g.forked = true;
      StepSamples::Fork f{j.c, {}};
      for (auto& child : g.choices)
        if (child->index != 0)
          f.children.emplace_back(child.get(), sample_choice(*child, j.lg, *j.r, samplers[0], constraint_scratch[0]));
      s.forks.push_back(std::move(f));
    }
  }
  return s;
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
