#include "grammar/compiler.h"

#include <algorithm>
#include <functional>
#include <map>
#include <span>
#include <unordered_map>

namespace tmill::grammar {

using gbnf::Expr;
using gbnf::Syntax;

void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<ByteRange>>& out) {
  std::vector<std::pair<uint32_t, uint32_t>> work{{lo, hi}};
  auto encode = [](uint32_t cp, uint8_t* b) -> int {
    if (cp < 0x80) return b[0] = static_cast<uint8_t>(cp), 1;
    if (cp < 0x800) {
      b[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
      b[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      return 2;
    }
    if (cp < 0x10000) {
      b[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
      b[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      b[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
      return 3;
    }
    b[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
    b[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
    b[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    b[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 4;
  };
  while (!work.empty()) {
    auto [s, e] = work.back();
    work.pop_back();
    bool split = false;
    for (uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu}) {  // one encoded length per range
      if (s <= max && e > max) {
        work.emplace_back(s, max);
        work.emplace_back(max + 1, e);
        split = true;
        break;
      }
    }
    if (split) continue;
    if (e < 0x80) {
      out.push_back({ByteRange{static_cast<uint8_t>(s), static_cast<uint8_t>(e)}});
      continue;
    }
    // Split until every continuation byte position ranges fully or the prefix is shared.
    for (uint32_t i = 1; i < 4 && !split; ++i) {
      uint32_t m = (1u << (6 * i)) - 1;
      if ((s & ~m) != (e & ~m)) {
        if ((s & m) != 0) {
          work.emplace_back(s, s | m);
          work.emplace_back((s | m) + 1, e);
          split = true;
        } else if ((e & m) != m) {
          work.emplace_back(s, (e & ~m) - 1);
          work.emplace_back(e & ~m, e);
          split = true;
        }
      }
    }
    if (split) continue;
    uint8_t sb[4], eb[4];
    int n = encode(s, sb);
    encode(e, eb);
    std::vector<ByteRange> seq;
    for (int i = 0; i < n; ++i) seq.push_back(ByteRange{sb[i], eb[i]});
    out.push_back(std::move(seq));
  }
}

namespace {

struct ByteSetHash {
  size_t operator()(const ByteSet& s) const {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (uint64_t w : s) h = (h ^ w) * 0x100000001B3ull + (h >> 29);
    return h;
  }
};
struct VecHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return h;
  }
};

struct NEdge {
  uint8_t kind;  // 0 epsilon, 1 bytes (label: set index), 2 call (label: program rule index)
  int32_t to;
  int32_t label;
};

struct Nfa {
  std::vector<std::vector<NEdge>> out;
  std::vector<ByteSet> sets;
  std::unordered_map<ByteSet, int32_t, ByteSetHash> set_ids;
  int32_t add() {
    out.emplace_back();
    return static_cast<int32_t>(out.size() - 1);
  }
  int32_t set_id(const ByteSet& s) {
    auto [it, fresh] = set_ids.emplace(s, static_cast<int32_t>(sets.size()));
    if (fresh) sets.push_back(s);
    return it->second;
  }
};

class Compiler {
 public:
  Compiler(const Syntax& syn, const CompileLimits& lim) : syn_(syn), lim_(lim) {}

  Result<Program> run(std::string_view root_name) {
    int32_t root = -1;
    for (size_t i = 0; i < syn_.rules.size(); ++i) {
      if (syn_.rules[i].name == root_name) root = static_cast<int32_t>(i);
    }
    if (root < 0) return Error{"grammar: no rule named '" + std::string(root_name) + "' (the start rule)"};
    find_recursive();
    size_.assign(syn_.rules.size(), -1);
    inline_.assign(syn_.rules.size(), -1);
    prog_rule_.assign(syn_.rules.size(), -1);
    prog_.root_rule = program_rule(root);
    for (size_t next = 0; next < queue_.size(); ++next) {
      TM_TRY(build_rule(queue_[next]));
    }
    finish_refs();
    TM_TRY(finish_repeats());
    TM_TRY(check_left_recursion());
    compute_exit_bytes();
    return std::move(prog_);
  }

 private:
  const Syntax& syn_;
  CompileLimits lim_;
  Program prog_;
  std::vector<char> recursive_;
  std::vector<int64_t> size_;
  std::vector<int8_t> inline_;
  std::vector<int32_t> prog_rule_;  // syntax rule -> program rule (-1: none yet)
  struct Pending {
    const Expr* body;
    int32_t prog_rule;
  };
  std::vector<Pending> queue_;  // rule bodies to build, in program rule order
  std::unordered_map<const Expr*, int32_t> expr_rule_;  // repetition bodies made rules
  int64_t nfa_total_ = 0;
  bool too_big_ = false;

  int32_t program_rule(int32_t syn_rule) {
    auto& p = prog_rule_[static_cast<size_t>(syn_rule)];
    if (p < 0) {
      p = static_cast<int32_t>(prog_.rules.size());
      Program::RuleInfo info;
      info.name = syn_.rules[static_cast<size_t>(syn_rule)].name;
      prog_.rules.push_back(info);
      queue_.push_back({&syn_.rules[static_cast<size_t>(syn_rule)].body, p});
    }
    return p;
  }
  // A program rule for an expression (the body of a counted repetition).
  int32_t expr_rule(const Expr* e, const std::string& name) {
    auto [it, fresh] = expr_rule_.emplace(e, static_cast<int32_t>(prog_.rules.size()));
    if (fresh) {
      Program::RuleInfo info;
      info.name = name;
      prog_.rules.push_back(info);
      queue_.push_back({e, it->second});
    }
    return it->second;
  }

  static void refs_of(const Expr& e, std::vector<int32_t>& out) {
    if (e.kind == Expr::Kind::Ref) out.push_back(e.rule);
    for (const Expr& k : e.kids) refs_of(k, out);
  }
  static bool bounded(const Expr& e) {
    if (e.kind == Expr::Kind::Repeat && e.max < 0) return false;
    for (const Expr& k : e.kids) {
      if (!bounded(k)) return false;
    }
    return true;
  }

  // Tarjan's strongly connected components, iteratively: a rule is recursive when it can reach itself.
  void find_recursive() {
    size_t n = syn_.rules.size();
    std::vector<std::vector<int32_t>> g(n);
    for (size_t i = 0; i < n; ++i) {
      refs_of(syn_.rules[i].body, g[i]);
      std::sort(g[i].begin(), g[i].end());
      g[i].erase(std::unique(g[i].begin(), g[i].end()), g[i].end());
    }
    recursive_.assign(n, 0);
    std::vector<int32_t> index(n, -1), low(n, 0), stk;
    std::vector<char> on(n, 0);
    int32_t counter = 0;
    struct Frame {
      int32_t v;
      size_t i;
    };
    for (size_t s = 0; s < n; ++s) {
      if (index[s] >= 0) continue;
      std::vector<Frame> dfs{{static_cast<int32_t>(s), 0}};
      index[s] = low[s] = counter++;
      stk.push_back(static_cast<int32_t>(s));
      on[s] = 1;
      while (!dfs.empty()) {
        Frame& f = dfs.back();
        auto v = static_cast<size_t>(f.v);
        if (f.i < g[v].size()) {
          auto w = static_cast<size_t>(g[v][f.i++]);
          if (w == v) recursive_[v] = 1;
          if (index[w] < 0) {
            index[w] = low[w] = counter++;
            stk.push_back(static_cast<int32_t>(w));
            on[w] = 1;
            dfs.push_back({static_cast<int32_t>(w), 0});
          } else if (on[w]) {
            low[v] = std::min(low[v], index[w]);
          }
          continue;
        }
        if (low[v] == index[v]) {
          std::vector<int32_t> comp;
          for (;;) {
            int32_t w = stk.back();
            stk.pop_back();
            on[static_cast<size_t>(w)] = 0;
            comp.push_back(w);
            if (static_cast<size_t>(w) == v) break;
          }
          if (comp.size() > 1) {
            for (int32_t w : comp) recursive_[static_cast<size_t>(w)] = 1;
          }
        }
        int32_t lv = low[v];
        dfs.pop_back();
        if (!dfs.empty()) {
          auto u = static_cast<size_t>(dfs.back().v);
          low[u] = std::min(low[u], lv);
        }
      }
    }
  }

  // Estimated NFA states of an expression with inlinable rules expanded.
  int64_t estimate(const Expr& e) {
    constexpr int64_t kCap = int64_t{1} << 40;
    switch (e.kind) {
      case Expr::Kind::Literal: return static_cast<int64_t>(e.text.size()) + 1;
      case Expr::Kind::Class: {
        std::vector<std::vector<ByteRange>> seqs;
        for (auto [lo, hi] : e.ranges) utf8_sequences(lo, hi, seqs);
        int64_t n = 2;
        for (const auto& q : seqs) n += static_cast<int64_t>(q.size()) - 1;
        return n;
      }
      case Expr::Kind::Ref:
        return inlinable(e.rule) || (est_loops_ && loop_inlinable(e.rule)) ? rule_size(e.rule) : 2;
      case Expr::Kind::Repeat: {
        int64_t k = e.max < 0 ? e.min + 1 : e.max;
        return std::min(kCap, std::max<int64_t>(k, 1) * estimate(e.kids[0]) + 2);
      }
      default: {
        int64_t s = 2;
        for (const Expr& k : e.kids) s = std::min(kCap, s + estimate(k));
        return s;
      }
    }
  }
  int64_t rule_size(int32_t r) {
    auto& s = size_[static_cast<size_t>(r)];
    if (s < 0) {  // memoized without loop inlining (inlinable() depends on it)
      bool saved = est_loops_;
      est_loops_ = false;
      int64_t v = estimate(syn_.rules[static_cast<size_t>(r)].body);
      est_loops_ = saved;
      size_[static_cast<size_t>(r)] = v;
    }
    return size_[static_cast<size_t>(r)];
  }
  // A small non-recursive rule with loops (e.g. the rest of a string after a first character) is
  // inlined into a rule without loops of its own: the caller's positions then keep reading inside
  // one automaton instead of leaving for a call after a byte or two (see mask_cache.h).
  bool loop_inlinable(int32_t r) {
    return !recursive_[static_cast<size_t>(r)] && rule_size(r) <= lim_.inline_max_loop_states;
  }
  bool inlinable(int32_t r) {
    auto& v = inline_[static_cast<size_t>(r)];
    if (v < 0) {
      const auto& body = syn_.rules[static_cast<size_t>(r)].body;
      v = !recursive_[static_cast<size_t>(r)] && bounded(body) && rule_size(r) <= lim_.inline_max_states;
    }
    return v;
  }

  // Thompson construction; returns the end state of e's fragment starting at `from`.
  int32_t build(Nfa& nfa, const Expr& e, int32_t from) {
    if (too_big_ || static_cast<int64_t>(nfa.out.size()) + nfa_total_ > lim_.max_nfa_states) {
      too_big_ = true;
      return from;
    }
    switch (e.kind) {
      case Expr::Kind::Seq:
        for (const Expr& k : e.kids) from = build(nfa, k, from);
        return from;
      case Expr::Kind::Alt: {
        int32_t end = nfa.add();
        for (const Expr& k : e.kids) {
          int32_t s = nfa.add();
          nfa.out[static_cast<size_t>(from)].push_back({0, s, 0});
          int32_t t = build(nfa, k, s);
          nfa.out[static_cast<size_t>(t)].push_back({0, end, 0});
        }
        return end;
      }
      case Expr::Kind::Literal:
        for (char c : e.text) {
          ByteSet s{};
          byteset_add(s, static_cast<uint8_t>(c));
          int32_t t = nfa.add();
          nfa.out[static_cast<size_t>(from)].push_back({1, t, nfa.set_id(s)});
          from = t;
        }
        return from;
      case Expr::Kind::Class: {
        std::vector<std::vector<ByteRange>> seqs;
        for (auto [lo, hi] : e.ranges) utf8_sequences(lo, hi, seqs);
        int32_t end = nfa.add();
        ByteSet single{};
        bool any_single = false;
        for (const auto& seq : seqs) {
          if (seq.size() == 1) {
            for (unsigned b = seq[0].lo; b <= seq[0].hi; ++b) byteset_add(single, static_cast<uint8_t>(b));
            any_single = true;
            continue;
          }
          int32_t cur = from;
          for (size_t i = 0; i < seq.size(); ++i) {
            ByteSet s{};
            for (unsigned b = seq[i].lo; b <= seq[i].hi; ++b) byteset_add(s, static_cast<uint8_t>(b));
            int32_t t = i + 1 == seq.size() ? end : nfa.add();
            nfa.out[static_cast<size_t>(cur)].push_back({1, t, nfa.set_id(s)});
            cur = t;
          }
        }
        if (any_single) nfa.out[static_cast<size_t>(from)].push_back({1, end, nfa.set_id(single)});
        return end;
      }
      case Expr::Kind::Ref: {
        if (inlinable(e.rule)) return build(nfa, syn_.rules[static_cast<size_t>(e.rule)].body, from);
        if (cur_bounded_ && loop_inlinable(e.rule)) {
          ++loops_inlined_;
          return build(nfa, syn_.rules[static_cast<size_t>(e.rule)].body, from);
        }
        int32_t t = nfa.add();
        nfa.out[static_cast<size_t>(from)].push_back({2, t, program_rule(e.rule)});
        return t;
      }
      case Expr::Kind::Repeat: {
        const Expr& x = e.kids[0];
        if (e.max > lim_.max_unrolled_repeat || (e.max < 0 && e.min > lim_.max_unrolled_repeat)) {
          // Counted on the stack instead of unrolled: a call of a repetition pseudo-rule.
          Program::Repeat rep;
          rep.body = expr_rule(&x, cur_rule_name_ + "{" + std::to_string(e.min) + "," +
                                       (e.max < 0 ? std::string() : std::to_string(e.max)) + "}");
          rep.min = e.min;
          rep.max = e.max;
          prog_.repeats.push_back(rep);
          int32_t t = nfa.add();
          nfa.out[static_cast<size_t>(from)].push_back({2, t, -1 - static_cast<int32_t>(prog_.repeats.size() - 1)});
          return t;
        }
        for (int32_t i = 0; i < e.min; ++i) from = build(nfa, x, from);
        if (e.max < 0) {  // loop: s -x-> s, leave from s
          int32_t s = nfa.add();
          nfa.out[static_cast<size_t>(from)].push_back({0, s, 0});
          int32_t t = build(nfa, x, s);
          nfa.out[static_cast<size_t>(t)].push_back({0, s, 0});
          int32_t out = nfa.add();
          nfa.out[static_cast<size_t>(s)].push_back({0, out, 0});
          return out;
        }
        if (e.max == e.min) return from;
        int32_t end = nfa.add();
        for (int32_t i = e.min; i < e.max && !too_big_; ++i) {  // x? chained: leave after any copy
          nfa.out[static_cast<size_t>(from)].push_back({0, end, 0});
          int32_t s = nfa.add();
          nfa.out[static_cast<size_t>(from)].push_back({0, s, 0});
          from = build(nfa, x, s);
        }
        nfa.out[static_cast<size_t>(from)].push_back({0, end, 0});
        return end;
      }
    }
    return from;
  }

  Status build_rule(const Pending& job) {
    int32_t pr = job.prog_rule;
    cur_rule_name_ = prog_.rules[static_cast<size_t>(pr)].name;
    cur_bounded_ = bounded(*job.body);
    loops_inlined_ = 0;
    if (cur_bounded_) {  // inlining loops must not blow the rule up (keys with many exclusions)
      est_loops_ = true;
      cur_bounded_ = estimate(*job.body) <= lim_.max_loop_inlined_rule;
      est_loops_ = false;
    }
    Nfa nfa;
    int32_t start = nfa.add();
    int32_t final_state = build(nfa, *job.body, start);
    nfa_total_ += static_cast<int64_t>(nfa.out.size());
    if (too_big_) {
      return Error{"grammar: too large to compile (more than " + std::to_string(lim_.max_nfa_states) +
                   " automaton states; rule '" + prog_.rules[static_cast<size_t>(pr)].name + "')"};
    }
    return determinize(nfa, start, final_state, pr);
  }

  Status determinize(const Nfa& nfa, int32_t start, int32_t final_state, int32_t pr) {
    // Byte classes: bytes no set of this rule tells apart share a class.
    std::array<uint16_t, 256> cls{};
    int32_t ncls = 1;
    for (const ByteSet& s : nfa.sets) {
      std::array<int16_t, 512> remap;
      remap.fill(-1);
      int32_t m = 0;
      std::array<uint16_t, 256> nc{};
      for (unsigned b = 0; b < 256; ++b) {
        int key = cls[b] * 2 + (byteset_has(s, static_cast<uint8_t>(b)) ? 1 : 0);
        if (remap[static_cast<size_t>(key)] < 0) remap[static_cast<size_t>(key)] = static_cast<int16_t>(m++);
        nc[b] = static_cast<uint16_t>(remap[static_cast<size_t>(key)]);
      }
      cls = nc;
      ncls = m;
    }
    std::vector<std::vector<int32_t>> set_classes(nfa.sets.size());
    for (size_t i = 0; i < nfa.sets.size(); ++i) {
      std::vector<char> seen(static_cast<size_t>(ncls), 0);
      for (unsigned b = 0; b < 256; ++b) {
        if (byteset_has(nfa.sets[i], static_cast<uint8_t>(b)) && !seen[cls[b]]) {
          seen[cls[b]] = 1;
          set_classes[i].push_back(cls[b]);
        }
      }
    }
    std::vector<uint32_t> mark(nfa.out.size(), 0);
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
        for (const NEdge& e : nfa.out[static_cast<size_t>(q)]) {
          if (e.kind == 0) stack.push_back(e.to);
        }
      }
      std::sort(out.begin(), out.end());
    };
    std::unordered_map<std::vector<int32_t>, int32_t, VecHash> ids;
    std::vector<const std::vector<int32_t>*> subsets;  // keys of ids (stable: node-based map)
    auto intern = [&](const std::vector<int32_t>& seeds) {
      closure(seeds, tmp);
      auto it = ids.find(tmp);
      if (it != ids.end()) return it->second;
      it = ids.emplace(tmp, static_cast<int32_t>(subsets.size())).first;
      subsets.push_back(&it->first);
      return it->second;
    };
    intern(std::vector<int32_t>{start});
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
    std::vector<std::vector<int32_t>> buckets(static_cast<size_t>(ncls));
    std::map<int32_t, std::vector<int32_t>> calls;
    for (size_t d = 0; d < subsets.size(); ++d) {
      if (prog_.num_states() >= lim_.max_dfa_states) {
        return Error{"grammar: too large to compile (more than " + std::to_string(lim_.max_dfa_states) +
                     " automaton states; rule '" + info.name + "')"};
      }
      for (auto& bk : buckets) bk.clear();
      calls.clear();
      bool fin = false;
      for (int32_t q : *subsets[d]) {
        if (q == final_state) fin = true;
        for (const NEdge& e : nfa.out[static_cast<size_t>(q)]) {
          if (e.kind == 1) {
            for (int32_t c : set_classes[static_cast<size_t>(e.label)]) buckets[static_cast<size_t>(c)].push_back(e.to);
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
      for (int32_t c = 0; c < ncls; ++c) {
        auto& bk = buckets[static_cast<size_t>(c)];
        if (bk.empty()) continue;
        prog_.trans[row + static_cast<size_t>(c)] = base + intern(bk);
        flags |= Program::kBytes;
      }
      ByteSet first{};
      for (unsigned b = 0; b < 256; ++b) {
        if (prog_.trans[row + cls[b]] != Program::kDead) byteset_add(first, static_cast<uint8_t>(b));
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
    // Only rules with loop rules inlined more than once carry the duplicate copies worth merging.
    if (loops_inlined_ > 1 && info.num_states > 1 && info.num_states <= lim_.max_minimized_rule) minimize(pr);
    return {};
  }

  // States that can neither read, call nor return (e.g. after an empty character class) are
  // removed: an edge into one would let mask classification accept a token the stacks refuse.
  void prune_dead_ends(int32_t pr) {
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

  // Moore's partition refinement on the rule just built (its states are the last ones): merges
  // equivalent states, e.g. the copies of a loop rule inlined at many places of a key rule.
  void minimize(int32_t pr) {
    Program::RuleInfo& info = prog_.rules[static_cast<size_t>(pr)];
    auto n = static_cast<size_t>(info.num_states);
    auto base = static_cast<size_t>(info.first_state);
    auto ncls = static_cast<size_t>(info.num_classes);
    std::vector<int32_t> cls(n, 0), next_cls(n);
    // Signatures as two independent 64-bit hashes (a collision needs ~2^64 states).
    struct Key {
      uint64_t a, b;
      bool operator==(const Key&) const = default;
    };
    struct KeyHash {
      size_t operator()(const Key& k) const { return static_cast<size_t>(k.a ^ (k.b >> 7)); }
    };
    std::unordered_map<Key, int32_t, KeyHash> sig_ids;
    sig_ids.reserve(n * 2);
    size_t count = 0;
    for (int round = 0;; ++round) {
      sig_ids.clear();
      for (size_t i = 0; i < n; ++i) {
        uint64_t a = 0x9E3779B97F4A7C15ull, b = 0xD1B54A32D192ED03ull;
        auto mix = [&](uint64_t v) {
          a = (a ^ v) * 0x100000001B3ull;
          a ^= a >> 29;
          b = (b + v + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
          b ^= b >> 31;
        };
        mix(static_cast<uint64_t>(round == 0 ? (prog_.flags[base + i] & Program::kFinal) : cls[i]));
        size_t row = prog_.row[base + i];
        for (size_t c = 0; c < ncls; ++c) {
          int32_t t = prog_.trans[row + c];
          mix(t == Program::kDead ? ~uint64_t{0} : static_cast<uint64_t>(round == 0 ? 0 : cls[static_cast<size_t>(t) - base]));
        }
        for (const auto& r : pending_refs_[base + i]) {
          mix(static_cast<uint64_t>(static_cast<uint32_t>(r.rule)) | (uint64_t{1} << 40));
          mix(static_cast<uint64_t>(round == 0 ? 0 : cls[static_cast<size_t>(r.target) - base]));
        }
        next_cls[i] = sig_ids.emplace(Key{a, b}, static_cast<int32_t>(sig_ids.size())).first->second;
      }
      size_t k = sig_ids.size();
      cls.swap(next_cls);
      if (round > 0 && k == count) break;
      count = k;
    }
    if (count == n) return;
    // New numbering in first-appearance order (the start state stays first).
    std::vector<int32_t> id(count, -1), rep;
    for (size_t i = 0; i < n; ++i) {
      auto& x = id[static_cast<size_t>(cls[i])];
      if (x < 0) {
        x = static_cast<int32_t>(rep.size());
        rep.push_back(static_cast<int32_t>(i));
      }
    }
    auto map = [&](int32_t t) {
      return t == Program::kDead ? t : static_cast<int32_t>(base) + id[static_cast<size_t>(cls[static_cast<size_t>(t) - base])];
    };
    std::vector<int32_t> trans;
    std::vector<uint8_t> flags;
    std::vector<ByteSet> first;
    std::vector<std::vector<Program::Ref>> refs;
    for (int32_t r : rep) {
      size_t s = base + static_cast<size_t>(r);
      for (size_t c = 0; c < ncls; ++c) trans.push_back(map(prog_.trans[prog_.row[s] + c]));
      flags.push_back(prog_.flags[s]);
      first.push_back(prog_.first[s]);
      refs.push_back(pending_refs_[s]);
      for (auto& ref : refs.back()) ref.target = map(ref.target);
    }
    size_t row0 = prog_.row[base];
    prog_.trans.resize(row0);
    prog_.trans.insert(prog_.trans.end(), trans.begin(), trans.end());
    prog_.rule_of.resize(base + count);
    prog_.row.resize(base + count);
    for (size_t i = 0; i < count; ++i) prog_.row[base + i] = static_cast<uint32_t>(row0 + i * ncls);
    prog_.flags.resize(base);
    prog_.flags.insert(prog_.flags.end(), flags.begin(), flags.end());
    prog_.first.resize(base);
    prog_.first.insert(prog_.first.end(), first.begin(), first.end());
    pending_refs_.resize(base);
    for (auto& r : refs) pending_refs_.push_back(std::move(r));
    info.num_states = static_cast<int32_t>(count);
  }

  std::vector<std::vector<Program::Ref>> pending_refs_;  // per state, in order
  std::string cur_rule_name_;
  bool cur_bounded_ = false;
  bool est_loops_ = false;
  int loops_inlined_ = 0;

  // Counter ids above the real states; the simple-body test for mask classification.
  Status finish_repeats() {
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

  void finish_refs() {
    prog_.ref_begin.clear();
    for (auto& v : pending_refs_) {
      prog_.ref_begin.push_back(static_cast<uint32_t>(prog_.refs.size()));
      for (auto& r : v) prog_.refs.push_back(r);
    }
    prog_.ref_begin.push_back(static_cast<uint32_t>(prog_.refs.size()));
  }

  // FIRST/FOLLOW byte sets by fixpoint, then exit_bytes per state (program.h). Repetitions get slots
  // after the rules: slot(r) = r for rules, nr + k for repetition k.
  void compute_exit_bytes() {
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

  // Nullable rules (may return without reading a byte), then the graph "A may call B before reading a
  // byte"; a cycle in it is left recursion.
  Status check_left_recursion() {
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
};

}  // namespace

Result<Program> compile_program(const Syntax& syntax, std::string_view root, const CompileLimits& lim) {
  return Compiler(syntax, lim).run(root);
}

}  // namespace tmill::grammar
