// NFA construction: backwards, hash-consed Thompson fragments; one rule at a time.
#include "grammar/compiler_impl.h"

namespace tmill::grammar::compile_detail {

int32_t Compiler::byte_edge(Nfa& nfa, const ByteSet& set, int32_t to) {
  Hash128 h;
  h.mix(0x2545F4914F6CDD1Dull);  // apart from expression hashes
  for (uint64_t w : set) h.mix(w);
  auto [it, fresh] = memo_.emplace(MemoKey{h, to}, 0);
  if (fresh) {
    it->second = nfa.add();
    nfa.edge(it->second, {1, to, nfa.set_id(set)});
  }
  return it->second;
}

int32_t Compiler::build(Nfa& nfa, const Expr& e, int32_t cont) {
  if (too_big_ || static_cast<int64_t>(nfa.n) + nfa_total_ > lim_.max_nfa_states) {
    too_big_ = true;
    return cont;
  }
  if (e.kind == Expr::Kind::Seq && e.kids.empty()) return cont;
  const MemoKey key{e.hash, cont};
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  int32_t start = build_uncached(nfa, e, cont);
  if (!too_big_) memo_.emplace(key, start);
  return start;
}

int32_t Compiler::build_uncached(Nfa& nfa, const Expr& e, int32_t cont) {
  switch (e.kind) {
    case Expr::Kind::Seq:
      for (size_t i = e.kids.size(); i-- > 0;) cont = build(nfa, e.kids[i], cont);
      return cont;
    case Expr::Kind::Alt: {
      int32_t s = nfa.add();
      for (const Expr& k : e.kids) {
        int32_t t = build(nfa, k, cont);
        nfa.edge(s, {0, t, 0});
      }
      return s;
    }
    case Expr::Kind::Literal:
      for (size_t i = e.text.size(); i-- > 0;) {
        ByteSet set{};
        byteset_add(set, static_cast<uint8_t>(e.text[i]));
        cont = byte_edge(nfa, set, cont);
      }
      return cont;
    case Expr::Kind::Class: {
      std::vector<std::vector<ByteRange>> seqs;
      for (auto [lo, hi] : e.ranges) utf8_sequences(lo, hi, seqs);
      int32_t s = nfa.add();
      ByteSet single{};
      bool any_single = false;
      for (const auto& seq : seqs) {
        if (seq.size() == 1) {
          for (unsigned b = seq[0].lo; b <= seq[0].hi; ++b) byteset_add(single, static_cast<uint8_t>(b));
          any_single = true;
          continue;
        }
        int32_t t = cont;
        for (size_t i = seq.size(); i-- > 1;) {  // the continuation bytes, shared
          ByteSet set{};
          for (unsigned b = seq[i].lo; b <= seq[i].hi; ++b) byteset_add(set, static_cast<uint8_t>(b));
          t = byte_edge(nfa, set, t);
        }
        ByteSet lead{};
        for (unsigned b = seq[0].lo; b <= seq[0].hi; ++b) byteset_add(lead, static_cast<uint8_t>(b));
        nfa.edge(s, {1, t, nfa.set_id(lead)});
      }
      if (any_single) nfa.edge(s, {1, cont, nfa.set_id(single)});
      return s;
    }
    case Expr::Kind::Ref: {
      if (inlinable(e.rule) && (cur_bounded_ || !has_loop_refs(e.rule))) {
        return build(nfa, syn_.rules[static_cast<size_t>(e.rule)].body, cont);
      }
      if (cur_bounded_ && loop_inlinable(e.rule)) {
        return build(nfa, syn_.rules[static_cast<size_t>(e.rule)].body, cont);
      }
      int32_t s = nfa.add();
      nfa.edge(s, {2, cont, program_rule(e.rule)});
      return s;
    }
    case Expr::Kind::Repeat: {
      const Expr& x = e.kids[0];
      const int64_t copies = e.max < 0 ? e.min : e.max;
      if (conservative_ ? copies > 1 && !maybe_nullable(x)
                        : copies > lim_.max_unrolled_repeat && copies * estimate(x) > lim_.max_unrolled_states) {
        // Counted on the stack instead of unrolled: a call of a repetition pseudo-rule.
        Program::Repeat rep;
        rep.body = expr_rule(&x, cur_rule_name_ + "{" + std::to_string(e.min) + "," +
                                     (e.max < 0 ? std::string() : std::to_string(e.max)) + "}");
        rep.min = e.min;
        rep.max = e.max;
        prog_.repeats.push_back(rep);
        int32_t s = nfa.add();
        nfa.edge(s, {2, cont, -1 - static_cast<int32_t>(prog_.repeats.size() - 1)});
        return s;
      }
      if (e.max < 0) {  // loop: s -x-> s, leave from s
        int32_t s = nfa.add();
        int32_t t = build(nfa, x, s);
        nfa.edge(s, {0, t, 0});
        nfa.edge(s, {0, cont, 0});
        cont = s;
      } else {
        const int32_t leave = cont;
        for (int32_t i = e.min; i < e.max && !too_big_; ++i) {  // x? chained: leave before any copy
          int32_t s = nfa.add();
          int32_t t = build(nfa, x, cont);
          nfa.edge(s, {0, t, 0});
          nfa.edge(s, {0, leave, 0});
          cont = s;
        }
      }
      for (int32_t i = 0; i < e.min && !too_big_; ++i) cont = build(nfa, x, cont);
      return cont;
    }
  }
  return cont;
}

Status Compiler::build_rule(Pending job) {
  int32_t pr = job.prog_rule;
  cur_rule_name_ = prog_.rules[static_cast<size_t>(pr)].name;
  cur_bounded_ = bounded(*job.body);
  if (cur_bounded_) {  // inlining loops must not blow the rule up (keys with many exclusions)
    est_loops_ = true;
    cur_bounded_ = estimate(*job.body) <= lim_.max_loop_inlined_rule;
    est_loops_ = false;
  }
  // The subset construction can blow up exponentially (optional counted classes that overlap:
  // 116 NFA states made 131,096 DFA states). Past a budget the rule is built again conservatively:
  // repetitions counted on the stack and loop rules called, so the matcher's stacks carry the
  // ambiguity instead of the automaton.
  const size_t states0 = prog_.rule_of.size(), trans0 = prog_.trans.size(), repeats0 = prog_.repeats.size();
  const bool bounded_rule = cur_bounded_;
  for (conservative_ = false;; conservative_ = true) {
    cur_bounded_ = bounded_rule && !conservative_;
    Nfa nfa;
    memo_.clear();
    int32_t final_state = nfa.add();
    int32_t start = build(nfa, *job.body, final_state);
    nfa_total_ += static_cast<int64_t>(nfa.n);
    if (too_big_) {
      return Error{"grammar: too large to compile (more than " + std::to_string(lim_.max_nfa_states) +
                   " automaton states; rule '" + prog_.rules[static_cast<size_t>(pr)].name + "')"};
    }
    nfa.finish();
    // Conservatively built, a rule still this large is refused: a regular language whose automaton
    // explodes (a loop of a group of many '.') would take seconds and gigabytes.
    dfa_budget_ = conservative_ ? std::max<size_t>(lim_.max_rule_dfa_states, 8 * static_cast<size_t>(nfa.n))
                                : 2 * static_cast<size_t>(nfa.n) + 2048;
    over_budget_ = false;
    Status st = determinize(nfa, start, final_state, pr);
    if (!over_budget_ || conservative_) return st;
    prog_.rule_of.resize(states0);
    prog_.row.resize(states0);
    prog_.flags.resize(states0);
    prog_.first.resize(states0);
    pending_refs_.resize(states0);
    prog_.trans.resize(trans0);
    prog_.repeats.resize(repeats0);
    prog_.rules[static_cast<size_t>(pr)].class_runs.clear();
  }
}

bool Compiler::maybe_nullable(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::Literal: return e.text.empty();
    case Expr::Kind::Class: return false;
    case Expr::Kind::Repeat: return e.min == 0 || maybe_nullable(e.kids[0]);
    case Expr::Kind::Ref: {
      auto& v = nullable_[static_cast<size_t>(e.rule)];
      if (v < 0) {
        v = 1;  // in progress: unsure
        v = maybe_nullable(syn_.rules[static_cast<size_t>(e.rule)].body) ? 1 : 0;
      }
      return v != 0;
    }
    case Expr::Kind::Alt:
      for (const Expr& k : e.kids) {
        if (maybe_nullable(k)) return true;
      }
      return false;
    case Expr::Kind::Seq:
      for (const Expr& k : e.kids) {
        if (!maybe_nullable(k)) return false;
      }
      return true;
  }
  return true;
}

}  // namespace tmill::grammar::compile_detail
