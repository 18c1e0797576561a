// Whole-program passes after every rule is built: counted repetitions, call tables, FIRST/FOLLOW
// exit bytes, left recursion.
#include "grammar/compiler_impl.h"

namespace tmill::grammar::compile_detail {

Status Compiler::finish_repeats() {
  int64_t next = prog_.num_states();
  for (auto& r : prog_.repeats) {
    r.base = static_cast<int32_t>(next);
    next += (r.max < 0 ? r.min : r.max) + 1;
    if (next >= (int64_t{1} << 30)) return Error{"grammar: too many counted repetitions"};
    const Program::RuleInfo& body = prog_.rules[static_cast<size_t>(r.body)];
    bool simple = !prog_.final(body.start);
    for (int32_t s = body.first_state; s < body.first_state + body.num_states; ++s) {
      uint8_t f = prog_.flags[static_cast<size_t>(s)];
      if ((f & Program::kRefs) || ((f & Program::kFinal) && !(f & Program::kPureEnd))) simple = false;
    }
    r.simple = simple;
  }
  return {};
}

void Compiler::finish_refs() {
  prog_.ref_begin.clear();
  for (auto& v : pending_refs_) {
    prog_.ref_begin.push_back(static_cast<uint32_t>(prog_.refs.size()));
    for (auto& r : v) prog_.refs.push_back(r);
  }
  prog_.ref_begin.push_back(static_cast<uint32_t>(prog_.refs.size()));
}

void Compiler::compute_exit_bytes() {
  Program& p = prog_;
  auto ns = static_cast<size_t>(p.num_states());
  size_t nr = p.rules.size();
  size_t nslots = nr + p.repeats.size();
  auto slot = [&](int32_t r) { return r >= 0 ? static_cast<size_t>(r) : nr + static_cast<size_t>(-1 - r); };
  auto orr = [](ByteSet& a, const ByteSet& b) {
    bool ch = false;
    for (size_t i = 0; i < 4; ++i) {
      uint64_t v = a[i] | b[i];
      ch |= v != a[i];
      a[i] = v;
    }
    return ch;
  };
  std::vector<int32_t> with_refs;
  for (size_t s = 0; s < ns; ++s) {
    if (p.ref_begin[s] != p.ref_begin[s + 1]) with_refs.push_back(static_cast<int32_t>(s));
  }
  auto refs = [&](int32_t s) {
    return std::span<const Program::Ref>(p.refs.data() + p.ref_begin[static_cast<size_t>(s)],
                                         p.refs.data() + p.ref_begin[static_cast<size_t>(s) + 1]);
  };
  auto nullable = [&](int32_t r) { return p.rule_nullable(r); };
  // canend: the rule may return from here without reading a byte.
  std::vector<char> canend(ns);
  for (size_t s = 0; s < ns; ++s) canend[s] = p.final(static_cast<int32_t>(s));
  for (bool ch = true; ch;) {
    ch = false;
    for (int32_t s : with_refs) {
      if (canend[static_cast<size_t>(s)]) continue;
      for (const auto& r : refs(s)) {
        if (nullable(r.rule) && canend[static_cast<size_t>(r.target)]) {
          canend[static_cast<size_t>(s)] = 1;
          ch = true;
        }
      }
    }
  }
  // fb: bytes readable next from the state within its rule's reach (calls included, returns not).
  std::vector<ByteSet> fb = p.first;
  std::vector<ByteSet> first1(nslots);
  for (bool ch = true; ch;) {
    ch = false;
    for (size_t r = 0; r < nr; ++r) ch |= orr(first1[r], fb[static_cast<size_t>(p.rules[r].start)]);
    for (size_t k = 0; k < p.repeats.size(); ++k) ch |= orr(first1[nr + k], first1[static_cast<size_t>(p.repeats[k].body)]);
    for (int32_t s : with_refs) {
      for (const auto& r : refs(s)) {
        ch |= orr(fb[static_cast<size_t>(s)], first1[slot(r.rule)]);
        if (nullable(r.rule)) ch |= orr(fb[static_cast<size_t>(s)], fb[static_cast<size_t>(r.target)]);
      }
    }
  }
  std::vector<ByteSet> follow(nslots);
  for (bool ch = true; ch;) {
    ch = false;
    for (int32_t s : with_refs) {
      for (const auto& r : refs(s)) {
        ch |= orr(follow[slot(r.rule)], fb[static_cast<size_t>(r.target)]);
        if (canend[static_cast<size_t>(r.target)]) {
          ch |= orr(follow[slot(r.rule)], follow[static_cast<size_t>(p.rule_of[static_cast<size_t>(s)])]);
        }
      }
    }
    for (size_t k = 0; k < p.repeats.size(); ++k) {  // after a copy: another copy or what follows
      auto body = static_cast<size_t>(p.repeats[k].body);
      ch |= orr(follow[body], first1[body]);
      ch |= orr(follow[body], follow[nr + k]);
    }
  }
  for (size_t k = 0; k < p.repeats.size(); ++k) p.repeats[k].follow = follow[nr + k];
  p.exit_bytes.assign(ns, ByteSet{});
  for (size_t s = 0; s < ns; ++s) {
    ByteSet& e = p.exit_bytes[s];
    const ByteSet& fol = follow[static_cast<size_t>(p.rule_of[s])];
    if (p.final(static_cast<int32_t>(s))) orr(e, fol);
    for (const auto& r : refs(static_cast<int32_t>(s))) {
      orr(e, first1[slot(r.rule)]);
      if (nullable(r.rule)) {
        orr(e, fb[static_cast<size_t>(r.target)]);
        if (canend[static_cast<size_t>(r.target)]) orr(e, fol);
      }
    }
  }
}

Status Compiler::check_left_recursion() {
  size_t nr = prog_.rules.size();
  // States of rule r reachable from its start through calls of nullable rules only.
  auto left_states = [&](size_t r, auto&& on_state) {
    std::vector<int32_t> todo{prog_.rules[r].start};
    std::vector<char> seen(static_cast<size_t>(prog_.rules[r].num_states), 0);
    int32_t base = prog_.rules[r].first_state;
    seen[0] = 1;
    while (!todo.empty()) {
      int32_t s = todo.back();
      todo.pop_back();
      on_state(s);
      for (uint32_t i = prog_.ref_begin[static_cast<size_t>(s)]; i < prog_.ref_begin[static_cast<size_t>(s) + 1]; ++i) {
        const Program::Ref& ref = prog_.refs[i];
        if (!prog_.rule_nullable(ref.rule)) continue;
        auto k = static_cast<size_t>(ref.target - base);
        if (!seen[k]) {
          seen[k] = 1;
          todo.push_back(ref.target);
        }
      }
    }
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < nr; ++r) {
      if (prog_.rules[r].nullable) continue;
      bool fin = false;
      left_states(r, [&](int32_t s) { fin = fin || prog_.final(s); });
      if (fin) prog_.rules[r].nullable = changed = true;
    }
  }
  for (const auto& rep : prog_.repeats) {
    if (prog_.rules[static_cast<size_t>(rep.body)].nullable) {
      return Error{"grammar: repetition " + prog_.rules[static_cast<size_t>(rep.body)].name +
                   " of an expression that can match the empty string is not supported"};
    }
  }
  std::vector<std::vector<int32_t>> g(nr);
  for (size_t r = 0; r < nr; ++r) {
    left_states(r, [&](int32_t s) {
      for (uint32_t i = prog_.ref_begin[static_cast<size_t>(s)]; i < prog_.ref_begin[static_cast<size_t>(s) + 1]; ++i) {
        int32_t callee = prog_.refs[i].rule;
        g[r].push_back(callee >= 0 ? callee : prog_.repeats[static_cast<size_t>(-1 - callee)].body);
      }
    });
  }
  // Cycle detection (iterative DFS, colors).
  std::vector<uint8_t> color(nr, 0);
  for (size_t s = 0; s < nr; ++s) {
    if (color[s]) continue;
    std::vector<std::pair<size_t, size_t>> dfs{{s, 0}};
    color[s] = 1;
    while (!dfs.empty()) {
      auto& [v, i] = dfs.back();
      if (i < g[v].size()) {
        auto w = static_cast<size_t>(g[v][i++]);
        if (color[w] == 1) {
          return Error{"grammar: left recursion in rule '" + prog_.rules[w].name +
                       "' (it can reach itself before reading any text)"};
        }
        if (color[w] == 0) {
          color[w] = 1;
          dfs.push_back({w, 0});
        }
      } else {
        color[v] = 2;
        dfs.pop_back();
      }
    }
  }
  return {};
}

}  // namespace tmill::grammar::compile_detail
