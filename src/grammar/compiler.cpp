#include "grammar/compiler.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <map>
#include <span>
#include <unordered_map>

namespace tmill::grammar {

using gbnf::Expr;
using gbnf::Syntax;
using gbnf::Hash128;

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

// Interns int vectors (closures, seed lists): one flat pool, an open-addressing table of ids.
// No allocation per vector, unlike a map keyed by vectors.
class VecInterner {
 public:
  VecInterner() : table_(64, -1) {}
  // The id of v, adding it (next id) when new.
  int32_t intern(std::span<const int32_t> v, bool* fresh = nullptr) {
    uint64_t h = hash(v);
    size_t mask = table_.size() - 1;
    for (size_t i = static_cast<size_t>(h) & mask;; i = (i + 1) & mask) {
      int32_t id = table_[i];
      if (id < 0) {
        id = static_cast<int32_t>(hashes_.size());
        table_[i] = id;
        hashes_.push_back(h);
        pool_.insert(pool_.end(), v.begin(), v.end());
        off_.push_back(static_cast<uint32_t>(pool_.size()));
        if (fresh) *fresh = true;
        if (hashes_.size() * 2 > table_.size()) grow();
        return id;
      }
      if (hashes_[static_cast<size_t>(id)] == h && std::ranges::equal(get(id), v)) {
        if (fresh) *fresh = false;
        return id;
      }
    }
  }
  std::span<const int32_t> get(int32_t id) const {
    return {pool_.data() + off_[static_cast<size_t>(id)], pool_.data() + off_[static_cast<size_t>(id) + 1]};
  }
  size_t size() const { return hashes_.size(); }

 private:
  static uint64_t hash(std::span<const int32_t> v) {
    uint64_t h = 1469598103934665603ull ^ v.size();
    for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return h ^ (h >> 32);
  }
  void grow() {
    std::vector<int32_t> t(table_.size() * 2, -1);
    size_t mask = t.size() - 1;
    for (size_t id = 0; id < hashes_.size(); ++id) {
      size_t i = static_cast<size_t>(hashes_[id]) & mask;
      while (t[i] >= 0) i = (i + 1) & mask;
      t[i] = static_cast<int32_t>(id);
    }
    table_.swap(t);
  }
  std::vector<int32_t> pool_;
  std::vector<uint32_t> off_{0};
  std::vector<uint64_t> hashes_;
  std::vector<int32_t> table_;
};

struct NEdge {
  uint8_t kind;  // 0 epsilon, 1 bytes (label: set index), 2 call (label: program rule index)
  int32_t to;
  int32_t label;
};

struct Nfa {
  int32_t n = 0;
  std::vector<std::pair<int32_t, NEdge>> pending;  // (from, edge) in insertion order
  std::vector<uint32_t> begin;  // after finish(): the edges of q are flat[begin[q] .. begin[q + 1])
  std::vector<NEdge> flat;
  std::vector<ByteSet> sets;
  std::unordered_map<ByteSet, int32_t, ByteSetHash> set_ids;
  int32_t add() { return n++; }
  void edge(int32_t from, NEdge e) { pending.emplace_back(from, e); }
  // Edges grouped by state (stable: each state keeps its insertion order).
  void finish() {
    begin.assign(static_cast<size_t>(n) + 1, 0);
    for (const auto& [q, e] : pending) ++begin[static_cast<size_t>(q) + 1];
    for (size_t i = 1; i < begin.size(); ++i) begin[i] += begin[i - 1];
    flat.resize(pending.size());
    std::vector<uint32_t> at(begin.begin(), begin.end() - 1);
    for (const auto& [q, e] : pending) flat[at[static_cast<size_t>(q)]++] = e;
  }
  std::span<const NEdge> out(int32_t q) const {
    return {flat.data() + begin[static_cast<size_t>(q)], flat.data() + begin[static_cast<size_t>(q) + 1]};
  }
  int32_t set_id(const ByteSet& s) {
    auto [it, fresh] = set_ids.emplace(s, static_cast<int32_t>(sets.size()));
    if (fresh) sets.push_back(s);
    return it->second;
  }
};

struct MemoKey {
  Hash128 h;
  int32_t cont;
  bool operator==(const MemoKey&) const = default;
};
struct MemoKeyHash {
  size_t operator()(const MemoKey& k) const {
    return static_cast<size_t>(k.h.a ^ (k.h.b * 0x9E3779B97F4A7C15ull) ^ (static_cast<uint64_t>(k.cont) << 17));
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
    loop_refs_.assign(syn_.rules.size(), -1);
    nullable_.assign(syn_.rules.size(), -1);
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
  std::vector<int8_t> loop_refs_;
  std::vector<int8_t> nullable_;  // maybe_nullable of rules (-1: not yet)
  bool conservative_ = false;  // building a rule again after its automaton blew up
  bool over_budget_ = false;
  size_t dfa_budget_ = SIZE_MAX;
  std::vector<int32_t> prog_rule_;  // syntax rule -> program rule (-1: none yet)
  struct Pending {
    const Expr* body;
    int32_t prog_rule;
  };
  std::vector<Pending> queue_;  // rule bodies to build, in program rule order
  std::unordered_map<const Expr*, int32_t> expr_rule_;  // repetition bodies made rules
  int64_t nfa_total_ = 0;
  std::unordered_map<MemoKey, int32_t, MemoKeyHash> memo_;  // (expression, continuation) -> start, per rule
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

  // Whether r (with its inlinable rules) refers to a loop rule, which is inlined into rules without
  // loops only. Inlined into a rule with loops, r would call that loop rule after a byte or two (a
  // key's rest of the string), and nearly every token would leave the automaton there; such an r
  // stays a call there, and its own automaton reads the loop rule inline.
  bool has_loop_refs(int32_t r) {
    auto& v = loop_refs_[static_cast<size_t>(r)];
    if (v < 0) {
      v = 0;  // r is not recursive (inlinable): no cycle through here
      std::vector<int32_t> refs;
      refs_of(syn_.rules[static_cast<size_t>(r)].body, refs);
      for (int32_t x : refs) {
        if (inlinable(x) ? has_loop_refs(x) : loop_inlinable(x)) {
          v = 1;
          break;
        }
      }
    }
    return v != 0;
  }

  // Thompson construction, backwards: returns a state from which reading e leads to `cont`.
  // Fragments are hash-consed on (e's structure, cont): the same sub-expression before the same
  // continuation is built once. A key rule that spells the rest of a string after each of hundreds of
  // name prefixes, or a character class whose multi-byte tails recur at every position, then becomes
  // an NFA of shared tails instead of hundreds of copies the subset construction would have to walk
  // and minimization would have to merge again.
  // A state with one byte-set edge to `to`, shared by all callers asking for the same (set, to).
  int32_t byte_edge(Nfa& nfa, const ByteSet& set, int32_t to) {
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

  int32_t build(Nfa& nfa, const Expr& e, int32_t cont) {
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

  int32_t build_uncached(Nfa& nfa, const Expr& e, int32_t cont) {
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

  Status build_rule(const Pending& job) {
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

  // Whether e may match the empty string (true when unsure: rules being looked at).
  bool maybe_nullable(const Expr& e) {
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

  Status determinize(const Nfa& nfa, int32_t start, int32_t final_state, int32_t pr) {
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

  std::vector<std::vector<Program::Ref>> pending_refs_;  // per state, in order
  std::string cur_rule_name_;
  bool cur_bounded_ = false;
  bool est_loops_ = false;

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
