// The compiler behind compile_program (compiler.h), shared by its sources: compiler.cpp (rules,
// inlining, the driver), compiler_nfa.cpp (NFA construction), compiler_dfa.cpp (subset
// construction), compiler_passes.cpp (counted repetitions, FIRST/FOLLOW, left recursion).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/compiler.h"

namespace tmill::grammar::compile_detail {

using gbnf::Expr;
using gbnf::Hash128;
using gbnf::Syntax;


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
  void find_recursive();

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

  // A state with one byte-set edge to `to`, shared by all callers asking for the same (set, to).
  int32_t byte_edge(Nfa& nfa, const ByteSet& set, int32_t to);

  // Thompson construction, backwards: returns a state from which reading e leads to `cont`.
  // Fragments are hash-consed on (e's structure, cont): the same sub-expression before the same
  // continuation is built once. A key rule that spells the rest of a string after each of hundreds of
  // name prefixes, or a character class whose multi-byte tails recur at every position, then becomes
  // an NFA of shared tails instead of hundreds of copies for the subset construction to walk.
  int32_t build(Nfa& nfa, const Expr& e, int32_t cont);

  int32_t build_uncached(Nfa& nfa, const Expr& e, int32_t cont);

  // By value: building a rule queues the rules it calls (queue_ may reallocate under a reference).
  Status build_rule(Pending job);

  // Whether e may match the empty string (true when unsure: rules being looked at).
  bool maybe_nullable(const Expr& e);

  Status determinize(const Nfa& nfa, int32_t start, int32_t final_state, int32_t pr);

  // States that can neither read, call nor return (e.g. after an empty character class) are
  // removed: an edge into one would let mask classification accept a token the stacks refuse.
  void prune_dead_ends(int32_t pr);

  std::vector<std::vector<Program::Ref>> pending_refs_;  // per state, in order
  std::string cur_rule_name_;
  bool cur_bounded_ = false;
  bool est_loops_ = false;

  // Counter ids above the real states; the simple-body test for mask classification.
  Status finish_repeats();

  void finish_refs();

  // FIRST/FOLLOW byte sets by fixpoint, then exit_bytes per state (program.h). Repetitions get slots
  // after the rules: slot(r) = r for rules, nr + k for repetition k.
  void compute_exit_bytes();

  // Nullable rules (may return without reading a byte), then the graph "A may call B before reading a
  // byte"; a cycle in it is left recursion.
  Status check_left_recursion();
};

}  // namespace tmill::grammar::compile_detail
