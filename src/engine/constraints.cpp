// Structured output in the step: a constrained choice's logits row is copied with every token its
// grammar refuses set to -inf, sampled, and the token advances the choice's Matcher. Runs inside
// the parallel sampling of sample_step, so the masks of a step's constrained sequences are computed
// on the pool's threads, one sequence per task. Logprobs describe the model's unmasked row (vLLM's
// default "raw" logprobs); a step where the grammar allows exactly one token takes it without
// sampling (fast-forward).
//
// Where the masks run: inside sample_step's parallel loop, one sequence per pool task, after the
// forward pass. Measured on 2 cores (Qwen2 vocabulary, 151,936 tokens, random-weight Qwen2.5-0.5B,
// 16 streams, half with a JSON schema): ~0.1 ms per constrained token for mask and copy, under 1 %
// of a ~70 ms decode step, so overlapping them with the forward pass (which keeps both cores busy
// with a spinning pool) would buy nothing here; a machine with spare cores could start them before
// Forward::run, since a step's mask depends only on tokens already accepted.
// Fast-forward takes one forced token per step; forced_bytes() spanning several tokens would need the
// scheduler to append several tokens in one step (as speculative decoding does), which it cannot yet.
//
// Speculative decoding (docs/speculative.md): a constrained sequence's drafts are cut at the first
// token its grammar refuses before they are scored (allowed_draft_prefix, on a copy of the state);
// in verification each position is masked with the state after the drafts before it, which is
// the real state advanced by the accepted ones (constrained_sample is called row by row and moves
// the state by each kept token only: an accepted draft, or the verifier's own token, never a
// rejected draft).
//
// `after` (e.g. "</think>"): until the output contains it the row is not masked; the token that
// completes it feeds the matcher the bytes that follow it, and a token whose following bytes the
// grammar refuses is excluded and the row sampled again.
#include <bit>
#include <chrono>
#include <cmath>

#include "engine/engine_impl.h"
#include "tokenizer/tokenizer.h"

namespace tmill {

namespace {

// s.row = lg with refused tokens at -inf. Returns how many tokens are allowed; *only is the token
// when exactly one is.
int32_t masked_row(ChoiceConstraint& cc, const float* lg, int32_t n, ConstraintScratch& s, int32_t* only) {
  const size_t words = grammar::Matcher::mask_words(n);
  s.mask.assign(words, 0);
  cc.matcher.fill_mask(s.mask);
  s.row.resize(static_cast<size_t>(n));
  float* row = s.row.data();
  int32_t count = 0;
  for (size_t w = 0; w < words; ++w) {
    const int32_t base = static_cast<int32_t>(w * 32);
    const int32_t end = std::min(base + 32, n);
    uint32_t m = s.mask[w];
    if (end - base < 32) m &= (1u << (end - base)) - 1;
    if (m == 0) {
      std::fill(row + base, row + end, -INFINITY);
      continue;
    }
    if (count == 0) *only = base + std::countr_zero(m);
    count += std::popcount(m);
    if (m == ~0u) {
      std::copy(lg + base, lg + end, row + base);
      continue;
    }
    for (int32_t t = base; t < end; ++t) row[t] = (m >> (t - base)) & 1u ? lg[t] : -INFINITY;
  }
  return count;
}

// The output bytes a token adds, special tokens as their text (so "</think>" is found as `after`
// even when it is a control token that the grammar's vocabulary leaves empty).
const std::string& text_of(const Tokenizer& tok, int32_t token) { return tok.piece(token, /*skip_special=*/false); }

// Inactive: where `after` ends in tail + token's text, or npos.
size_t after_end(const ChoiceConstraint& cc, const std::string& joined) {
  const size_t pos = joined.find(cc.after);
  return pos == std::string::npos ? pos : pos + cc.after.size();
}

// False when the token completes `after` and the grammar refuses the bytes that follow it.
bool after_ok(const ChoiceConstraint& cc, const Tokenizer& tok, int32_t token) {
  if (cc.active) return true;
  const std::string joined = cc.tail + text_of(tok, token);
  const size_t end = after_end(cc, joined);
  if (end == std::string::npos || end == joined.size()) return true;
  grammar::Matcher probe = cc.matcher;
  return probe.accept_bytes(std::string_view(joined).substr(end));
}

void advance(ChoiceConstraint& cc, const Tokenizer& tok, int32_t token) {
  if (cc.active) {
    if (!cc.matcher.accept_token(token)) cc.dead = true;  // only when the mask allowed nothing
    return;
  }
  std::string joined = cc.tail + text_of(tok, token);
  const size_t end = after_end(cc, joined);
  if (end == std::string::npos) {
    const size_t keep = cc.after.size() - 1;  // a prefix of `after` may end the text so far
    cc.tail = joined.size() > keep ? joined.substr(joined.size() - keep) : std::move(joined);
    return;
  }
  cc.active = true;
  cc.tail.clear();
  if (end < joined.size() && !cc.matcher.accept_bytes(std::string_view(joined).substr(end))) cc.dead = true;
}

}  // namespace

std::unique_ptr<ChoiceConstraint> Engine::Impl::new_constraint(const Group& g) const {
  if (!g.grammar) return nullptr;
  return std::make_unique<ChoiceConstraint>(g.grammar, g.req.constraint.after);
}

SampleResult Engine::Impl::sample_choice(Choice& c, const float* lg, const Request& r, Sampler& sp,
                                         ConstraintScratch& s) {
  if (!c.constraint)
    return sp.sample(lg, static_cast<int32_t>(model->config().n_vocab), c.group->req.sampling, r.prompt(), r.outputs(),
                     c.rng);
  return constrained_sample(c, lg, r, r.outputs(), sp, s, -1);
}

SampleResult Engine::Impl::constrained_sample(Choice& c, const float* lg, const Request& r,
                                              std::span<const int32_t> output, Sampler& sp, ConstraintScratch& s,
                                              int32_t draft) {
  const SamplingParams& p = c.group->req.sampling;
  const int32_t n = static_cast<int32_t>(model->config().n_vocab);
  ChoiceConstraint* cc = c.constraint.get();
  SampleResult res;
  if (cc->active) {
    int32_t only = -1;
    const auto t0 = Clock::now();
    const int32_t allowed = masked_row(*cc, lg, n, s, &only);
    mask_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(),
                      std::memory_order_relaxed);
    if (allowed == 0) {
      // Nothing can follow in this vocabulary: end the choice (reported as an error).
      cc->dead = true;
      res.token = eog_ids.empty() ? 0 : eog_ids[0];
      return res;
    }
    if (allowed == 1) {
      res.token = only;  // fast-forward: the grammar leaves no choice
      if (p.logprobs >= 0) sp.fill_logprobs(lg, n, p.logprobs, res);
    } else if (draft >= 0) {
      // The rejection rule on the masked distribution: the draft with probability p(draft) under
      // the grammar's mask, else a token from the masked p without it.
      bool accepted = false;
      res = sp.verify(s.row.data(), n, p, r.prompt(), output, draft, c.rng, &accepted, lg);
    } else {
      res = sp.sample(s.row.data(), n, p, r.prompt(), output, c.rng, lg);
    }
  } else {
    // `after` not seen yet: the model's row, redrawn without a token whose following bytes the
    // grammar refuses. A draft is verified by drawing the token this way and accepting the draft
    // when they are equal: for a draft proposed with certainty that is the rejection rule itself
    // (the draft with the probability this procedure gives it, else a token from the rest).
    res = sp.sample(lg, n, p, r.prompt(), output, c.rng);
    for (int tries = 0; !after_ok(*cc, *tokenizer, res.token); ++tries) {
      if (tries == 0) s.row.assign(lg, lg + n);
      s.row[static_cast<size_t>(res.token)] = -INFINITY;
      if (tries == 64) {
        cc->dead = true;
        return res;
      }
      res = sp.sample(s.row.data(), n, p, r.prompt(), output, c.rng, lg);
    }
  }
  advance(*cc, *tokenizer, res.token);
  return res;
}

size_t allowed_draft_prefix(const ChoiceConstraint& cc, const Tokenizer& tok, std::span<const int32_t> drafts) {
  ChoiceConstraint probe = cc;
  for (size_t i = 0; i < drafts.size(); ++i) {
    const int32_t t = drafts[i];
    if (probe.active) {
      if (!probe.matcher.accept_token(t)) return i;
    } else {
      if (!after_ok(probe, tok, t)) return i;
      advance(probe, tok, t);
      if (probe.dead) return i;
    }
    if (probe.terminated()) return i + 1;
  }
  return drafts.size();
}

// After a choice's new token: the grammar is complete and nothing may follow -> "stop"; the grammar
// allowed no token -> an error. `finish` is what the scheduler and stop strings decided.
FinishReason Engine::Impl::constraint_finish(Choice& c, FinishReason finish, std::string& reason) {
  const ChoiceConstraint* cc = c.constraint.get();
  if (!cc || finish == FinishReason::Length || finish == FinishReason::Abort) return finish;
  if (cc->dead) {
    if (finish == FinishReason::None) sched->finish(c.sched_id, FinishReason::Error);
    reason = "the output constraint allows no token here";
    return FinishReason::Error;
  }
  if (finish == FinishReason::None && cc->terminated()) {
    sched->finish(c.sched_id, FinishReason::Stop);
    return FinishReason::Stop;
  }
  return finish;
}

}  // namespace tmill
