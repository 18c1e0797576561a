// Subset construction of one rule's NFA into the program's DFA rows.
#include "grammar/compiler_impl.h"

namespace tmill::grammar::compile_detail {

Status Compiler::determinize(const Nfa& nfa, int32_t start, int32_t final_state, int32_t pr) {
  // Byte classes: bytes no set of this rule tells apart share a class, numbered in order of their
  // first byte. A byte's signature hashes the sets that hold it (each set visits only its bytes:
  // most are one literal byte).
  auto for_bytes = [](const ByteSet& set, auto&& f) {
    for (unsigned w = 0; w < 4; ++w) {
      for (uint64_t x = set[w]; x; x &= x - 1) f(static_cast<unsigned>(w * 64 + static_cast<unsigned>(std::countr_zero(x))));
    }
  };
  std::array<Hash128, 256> sig{};
  for (size_t i = 0; i < nfa.sets.size(); ++i) for_bytes(nfa.sets[i], [&](unsigned b) { sig[b].mix(i + 1); });
  std::array<uint16_t, 256> cls{};
  int32_t ncls = 0;
  {
    std::array<uint16_t, 256> order;
    for (unsigned b = 0; b < 256; ++b) order[b] = static_cast<uint16_t>(b);
    std::sort(order.begin(), order.end(), [&](uint16_t x, uint16_t y) {
      return sig[x].a != sig[y].a ? sig[x].a < sig[y].a : sig[x].b != sig[y].b ? sig[x].b < sig[y].b : x < y;
    });
    std::array<uint16_t, 256> group{};  // byte -> its group's first (smallest) byte
    for (size_t k = 0; k < 256; ++k) {
      const uint16_t b = order[k];
      group[b] = k > 0 && sig[order[k - 1]] == sig[b] ? group[order[k - 1]] : b;
    }
    std::array<int16_t, 256> id;
    id.fill(-1);
    for (unsigned b = 0; b < 256; ++b) {
      if (id[group[b]] < 0) id[group[b]] = static_cast<int16_t>(ncls++);
      cls[b] = static_cast<uint16_t>(id[group[b]]);
    }
  }
  std::vector<std::vector<int32_t>> set_classes(nfa.sets.size());
  std::vector<uint32_t> seen(static_cast<size_t>(ncls), 0);
  for (size_t i = 0; i < nfa.sets.size(); ++i) {
    for_bytes(nfa.sets[i], [&](unsigned b) {
      if (seen[cls[b]] != i + 1) {
        seen[cls[b]] = static_cast<uint32_t>(i + 1);
        set_classes[i].push_back(cls[b]);
      }
    });
  }
  std::vector<uint32_t> mark(static_cast<size_t>(nfa.n), 0);
  uint32_t epoch = 0;
  // Epsilon closure of `seeds` into `out` (sorted); buffers reused, no allocation per call.
  std::vector<int32_t> stack, tmp;
  auto closure = [&](const std::vector<int32_t>& seeds, std::vector<int32_t>& out) {
    ++epoch;
    out.clear();
    stack.assign(seeds.begin(), seeds.end());
    while (!stack.empty()) {
      int32_t q = stack.back();
      stack.pop_back();
      if (mark[static_cast<size_t>(q)] == epoch) continue;
      mark[static_cast<size_t>(q)] = epoch;
      out.push_back(q);
      for (const NEdge& e : nfa.out(q)) {
        if (e.kind == 0) stack.push_back(e.to);
      }
    }
    std::sort(out.begin(), out.end());
  };
  VecInterner subsets;  // DFA state d = subsets.get(d), a closure
  // Seeds to DFA state: the classes of one state mostly lead to the same NFA states (every
  // character but a few goes on the same way), so most lookups skip the closure.
  VecInterner seed_lists;
  std::vector<int32_t> seed_dfa;  // per seed list
  auto intern = [&](std::vector<int32_t>& seeds) {
    std::sort(seeds.begin(), seeds.end());
    seeds.erase(std::unique(seeds.begin(), seeds.end()), seeds.end());
    bool fresh = false;
    const int32_t k = seed_lists.intern(seeds, &fresh);
    if (!fresh) return seed_dfa[static_cast<size_t>(k)];
    closure(seeds, tmp);
    const int32_t id = subsets.intern(tmp);
    seed_dfa.push_back(id);
    return id;
  };
  {
    std::vector<int32_t> seed{start};
    intern(seed);
  }
  Program::RuleInfo& info = prog_.rules[static_cast<size_t>(pr)];
  info.first_state = prog_.num_states();
  info.start = info.first_state;
  info.num_classes = ncls;
  for (unsigned b = 0; b < 256; ++b) {
    info.byte_class[b] = static_cast<uint8_t>(cls[b]);
    if (b > 0 && cls[b] == cls[b - 1]) {
      info.class_runs.back()[1] = static_cast<uint8_t>(b);
    } else {
      info.class_runs.push_back({static_cast<uint8_t>(b), static_cast<uint8_t>(b), static_cast<uint8_t>(cls[b])});
    }
  }
  int32_t base = info.first_state;
  std::vector<ByteSet> class_bytes(static_cast<size_t>(ncls));
  for (unsigned b = 0; b < 256; ++b) byteset_add(class_bytes[cls[b]], static_cast<uint8_t>(b));
  // Per DFA state: its byte edges' distinct labels (bit j = labels[j]); the classes that the same
  // labels cover go to the same subset, so each distinct cover is interned once, not each class.
  std::vector<std::pair<int32_t, int32_t>> edges;  // (label, to)
  std::vector<int32_t> labels;
  std::vector<uint64_t> cover(static_cast<size_t>(ncls));
  std::vector<std::pair<uint64_t, int32_t>> cover_ids;
  std::vector<int32_t> seeds;
  std::vector<std::vector<int32_t>> buckets(static_cast<size_t>(ncls));  // more than 64 labels
  std::map<int32_t, std::vector<int32_t>> calls;
  for (size_t d = 0; d < subsets.size(); ++d) {
    if (d >= dfa_budget_) {
      over_budget_ = true;
      return Error{"grammar: too complex to compile (rule '" + info.name + "' needs more than " +
                   std::to_string(dfa_budget_) + " automaton states)"};
    }
    if (prog_.num_states() >= lim_.max_dfa_states) {
      return Error{"grammar: too large to compile (more than " + std::to_string(lim_.max_dfa_states) +
                   " automaton states; rule '" + info.name + "')"};
    }
    edges.clear();
    labels.clear();
    calls.clear();
    bool fin = false;
    for (int32_t q : subsets.get(static_cast<int32_t>(d))) {
      if (q == final_state) fin = true;
      for (const NEdge& e : nfa.out(q)) {
        if (e.kind == 1) {
          edges.emplace_back(e.label, e.to);
          if (std::find(labels.begin(), labels.end(), e.label) == labels.end()) labels.push_back(e.label);
        } else if (e.kind == 2) {
          calls[e.label].push_back(e.to);
        }
      }
    }
    uint8_t flags = fin ? Program::kFinal : 0;
    prog_.rule_of.push_back(pr);
    prog_.row.push_back(static_cast<uint32_t>(prog_.trans.size()));
    size_t row = prog_.trans.size();
    prog_.trans.resize(row + static_cast<size_t>(ncls), Program::kDead);
    if (labels.size() <= 64) {
      std::fill(cover.begin(), cover.end(), 0);
      for (size_t j = 0; j < labels.size(); ++j) {
        for (int32_t c : set_classes[static_cast<size_t>(labels[j])]) cover[static_cast<size_t>(c)] |= uint64_t{1} << j;
      }
      cover_ids.clear();
      for (int32_t c = 0; c < ncls; ++c) {
        const uint64_t m = cover[static_cast<size_t>(c)];
        if (m == 0) continue;
        int32_t id = -1;
        for (const auto& [cm, cid] : cover_ids) {
          if (cm == m) id = cid;
        }
        if (id < 0) {
          seeds.clear();
          for (const auto& [label, to] : edges) {
            const auto j = static_cast<size_t>(std::find(labels.begin(), labels.end(), label) - labels.begin());
            if ((m >> j) & 1) seeds.push_back(to);
          }
          id = intern(seeds);
          cover_ids.emplace_back(m, id);
        }
        prog_.trans[row + static_cast<size_t>(c)] = base + id;
        flags |= Program::kBytes;
      }
    } else {
      for (auto& bk : buckets) bk.clear();
      for (const auto& [label, to] : edges) {
        for (int32_t c : set_classes[static_cast<size_t>(label)]) buckets[static_cast<size_t>(c)].push_back(to);
      }
      for (int32_t c = 0; c < ncls; ++c) {
        auto& bk = buckets[static_cast<size_t>(c)];
        if (bk.empty()) continue;
        prog_.trans[row + static_cast<size_t>(c)] = base + intern(bk);
        flags |= Program::kBytes;
      }
    }
    ByteSet first{};
    for (int32_t c = 0; c < ncls; ++c) {
      if (prog_.trans[row + static_cast<size_t>(c)] == Program::kDead) continue;
      for (size_t w = 0; w < first.size(); ++w) first[w] |= class_bytes[static_cast<size_t>(c)][w];
    }
    prog_.first.push_back(first);
    pending_refs_.emplace_back();
    for (auto& [rule, targets] : calls) {
      pending_refs_.back().push_back({rule, base + intern(targets)});
      flags |= Program::kRefs;
    }
    if (fin && !(flags & (Program::kBytes | Program::kRefs))) flags |= Program::kPureEnd;
    prog_.flags.push_back(flags);
  }
  info.num_states = static_cast<int32_t>(subsets.size());
  prune_dead_ends(pr);
  return {};
}

void Compiler::prune_dead_ends(int32_t pr) {
  Program::RuleInfo& info = prog_.rules[static_cast<size_t>(pr)];
  auto n = static_cast<size_t>(info.num_states);
  auto base = static_cast<size_t>(info.first_state);
  auto ncls = static_cast<size_t>(info.num_classes);
  std::vector<char> dead(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; ++i) {
      if (dead[i]) continue;
      size_t s = base + i;
      bool live = prog_.final(static_cast<int32_t>(s));
      for (size_t c = 0; c < ncls && !live; ++c) {
        int32_t t = prog_.trans[prog_.row[s] + c];
        live = t != Program::kDead && !dead[static_cast<size_t>(t) - base];
      }
      for (const auto& r : pending_refs_[s]) live = live || !dead[static_cast<size_t>(r.target) - base];
      if (!live) dead[i] = changed = 1;
    }
  }
  if (std::find(dead.begin(), dead.end(), 1) == dead.end()) return;
  for (size_t i = 0; i < n; ++i) {
    size_t s = base + i;
    uint8_t flags = prog_.flags[s] & Program::kFinal;
    ByteSet first{};
    for (size_t c = 0; c < ncls; ++c) {
      int32_t& t = prog_.trans[prog_.row[s] + c];
      if (t != Program::kDead && dead[static_cast<size_t>(t) - base]) t = Program::kDead;
      if (t != Program::kDead) flags |= Program::kBytes;
    }
    for (unsigned b = 0; b < 256; ++b) {
      if (prog_.trans[prog_.row[s] + info.byte_class[b]] != Program::kDead) byteset_add(first, static_cast<uint8_t>(b));
    }
    auto& refs = pending_refs_[s];
    refs.erase(std::remove_if(refs.begin(), refs.end(),
                              [&](const Program::Ref& r) { return dead[static_cast<size_t>(r.target) - base] != 0; }),
               refs.end());
    if (!refs.empty()) flags |= Program::kRefs;
    if ((flags & Program::kFinal) && !(flags & (Program::kBytes | Program::kRefs))) flags |= Program::kPureEnd;
    prog_.flags[s] = flags;
    prog_.first[s] = first;
  }
}

}  // namespace tmill::grammar::compile_detail
