// The compiled form of a grammar: every rule that is not inlined becomes a deterministic automaton
// over bytes whose edges are bytes or calls of other rules (refs). States are numbered globally.
// A matcher position is a stack of states: the top is where the current rule is, the ones below are
// where each caller resumes after the call returns (see stacks.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tmill::grammar {

using ByteSet = std::array<uint64_t, 4>;
inline bool byteset_has(const ByteSet& s, uint8_t b) { return (s[b >> 6] >> (b & 63)) & 1; }
inline void byteset_add(ByteSet& s, uint8_t b) { s[b >> 6] |= uint64_t{1} << (b & 63); }

struct Program {
  static constexpr int32_t kDead = -1;
  enum Flag : uint8_t {
    kFinal = 1,    // the rule may return here
    kBytes = 2,    // some byte edge leaves this state
    kRefs = 4,     // some call leaves this state
    kPureEnd = 8,  // final with no edges: returning is all that is left (calls skip pushing it)
  };
  struct RuleInfo {
    std::string name;
    int32_t start = 0;           // start state
    int32_t first_state = 0;     // states [first_state, first_state + num_states)
    int32_t num_states = 0;
    int32_t num_classes = 1;
    std::array<uint8_t, 256> byte_class{};  // byte -> class index into a state's transition row
    // The byte runs of equal class, in byte order: (lo, hi, class) triples covering 0..255.
    std::vector<std::array<uint8_t, 3>> class_runs;
    bool nullable = false;
  };
  struct Ref {
    int32_t rule;  // < 0: repetition -1 - rule (repeats)
    int32_t target;
  };
  // x{min,max} with large bounds, counted on the stack: a call pushes counter node C(0); C(c) (c
  // copies done) calls the body with C(c + 1) as its return point and/or returns when c >= min.
  // Counter node states are ids base + c above the real states (unbounded: c stops at min).
  struct Repeat {
    int32_t body = 0;  // program rule
    int32_t min = 0, max = 0;  // max < 0: unbounded
    int32_t base = 0;
    bool simple = false;  // body: no calls, not nullable, every final state a pure end (mask_cache.h)
    ByteSet follow{};     // bytes that may follow the repetition
  };

  std::vector<RuleInfo> rules;
  int32_t root_rule = 0;
  // Per state.
  std::vector<int32_t> rule_of;
  std::vector<uint8_t> flags;
  std::vector<uint32_t> row;       // offset into trans (num_classes entries of the state's rule)
  std::vector<uint32_t> ref_begin;  // refs[ref_begin[s] .. ref_begin[s + 1])
  std::vector<ByteSet> first;      // the bytes with an edge from the state
  // The bytes that can come next when a parse leaves the state's rule through a call or a return
  // (an over-approximation over all contexts): lets mask classification drop tokens whose next byte
  // after such an exit no context could read.
  std::vector<ByteSet> exit_bytes;
  std::vector<int32_t> trans;
  std::vector<Ref> refs;
  std::vector<Repeat> repeats;

  bool is_counter(int32_t s) const { return s >= num_states(); }
  // The repetition and count of a counter state.
  std::pair<int32_t, int32_t> counter(int32_t s) const {
    size_t lo = 0, hi = repeats.size();
    while (hi - lo > 1) {
      size_t mid = (lo + hi) / 2;
      if (repeats[mid].base <= s) lo = mid; else hi = mid;
    }
    return {static_cast<int32_t>(lo), s - repeats[lo].base};
  }
  bool rule_nullable(int32_t r) const {
    if (r >= 0) return rules[static_cast<size_t>(r)].nullable;
    const Repeat& x = repeats[static_cast<size_t>(-1 - r)];
    return x.min == 0 || rules[static_cast<size_t>(x.body)].nullable;
  }
  int32_t rule_start(int32_t r) const {
    return r >= 0 ? rules[static_cast<size_t>(r)].start : repeats[static_cast<size_t>(-1 - r)].base;
  }
  int32_t num_states() const { return static_cast<int32_t>(rule_of.size()); }
  int32_t next(int32_t s, uint8_t b) const {
    const RuleInfo& r = rules[static_cast<size_t>(rule_of[static_cast<size_t>(s)])];
    return trans[row[static_cast<size_t>(s)] + r.byte_class[b]];
  }
  bool final(int32_t s) const { return flags[static_cast<size_t>(s)] & kFinal; }
};

}  // namespace tmill::grammar
