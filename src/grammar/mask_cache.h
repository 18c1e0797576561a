// Token classification per grammar position, cached per vocabulary (XGrammar's adaptive token mask
// cache, computed lazily and shared across grammars).
//
// For a stack whose top is state s of rule R, walk every token through R's automaton from s using
// byte edges only. A token read to its end this way is allowed whatever lies below s on the stack
// (accepted). A token that dies inside is refused, unless on its way it passed a state where R may
// return or call another rule (an exit): then whether it is allowed depends on the rest of the stack
// (uncertain). Uncertain tokens are stored per exit state as a trie of the token suffixes after the
// exit; at mask time those small tries are walked with the real stacks.
//
// The result depends only on what R's automaton looks like within max-token-length bytes of s, so
// it is keyed by a 128-bit hash of that canonical (BFS-numbered) sub-automaton: the same string,
// number or whitespace rule in different grammars shares one entry.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/program.h"
#include "grammar/token_trie.h"

namespace tmill::grammar {

struct MaskKey {
  uint64_t a = 0, b = 0;
  bool operator==(const MaskKey&) const = default;
};
struct MaskKeyHash {
  size_t operator()(const MaskKey& k) const { return static_cast<size_t>(k.a ^ (k.b * 0x9E3779B97F4A7C15ull)); }
};

struct MaskEntry {
  std::vector<uint32_t> dense;   // accepted tokens as a bitmask, or
  std::vector<int32_t> sparse;   // accepted tokens as a list (when few)
  struct Exit {
    int32_t canon;  // index of the exit state in the canonical BFS order from s; -1: leaving a counted repetition
    TokenTrie suffixes;
  };
  std::vector<Exit> exits;
  size_t uncertain = 0;  // tokens with at least one exit (statistics)
  size_t bytes() const;
};

// A grammar state's view of its entry: the shared entry and the grammar states behind its
// canonical indices.
struct Binding {
  std::shared_ptr<const MaskEntry> entry;  // the tokens of at most kShortTokenBytes (shared)
  std::vector<int32_t> canon_states;
  // The few longer tokens, classified for this grammar state alone (exit canon = the grammar
  // state): keying shared entries by the automaton within kShortTokenBytes instead of the longest
  // token lets far more positions (and grammars) share them.
  std::shared_ptr<const MaskEntry> local;
};
inline constexpr size_t kShortTokenBytes = 16;

// Delegation: the verdicts of every short token's bytes after its first, read from one state q
// (as if every first byte led to q), by position in the short trie's token array. A position whose
// many first bytes lead to q (the rest of a key, a string's content) copies the verdicts of those
// subtrees from here instead of walking them again; keyed like entries, by q's canonical automaton.
struct Summary {
  std::vector<uint64_t> accepted;  // bit per token-array position
  struct Dying {
    int32_t pos;    // token-array position
    int32_t from;   // byte offset of a live exit on the token's path
    int32_t canon;  // that exit's state, as an index in q's canonical order
  };
  std::vector<Dying> dying;  // sorted by pos
  size_t bytes() const { return sizeof(Summary) + accepted.size() * 8 + dying.size() * sizeof(Dying); }
};

class MaskCache {
 public:
  // Entries are dropped (all at once; grammars keep the ones they bound) past this many bytes.
  static constexpr size_t kMaxBytes = size_t{512} << 20;
  std::shared_ptr<const MaskEntry> find(const MaskKey& k) const;
  // Inserts unless present; returns the entry now cached under k.
  std::shared_ptr<const MaskEntry> insert(const MaskKey& k, std::shared_ptr<const MaskEntry> e);
  size_t size() const;
  std::shared_ptr<const Summary> find_summary(const MaskKey& k) const;
  std::shared_ptr<const Summary> insert_summary(const MaskKey& k, std::shared_ptr<const Summary> e);

 private:
  void make_room();  // under mu_
  mutable std::mutex mu_;
  std::unordered_map<MaskKey, std::shared_ptr<const MaskEntry>, MaskKeyHash> map_;
  std::unordered_map<MaskKey, std::shared_ptr<const Summary>, MaskKeyHash> summaries_;
  size_t bytes_ = 0;
};

// Per grammar: bindings computed on first use, thread-safe (grammars are shared by matchers).
class Bindings {
 public:
  explicit Bindings(size_t num_states);
  const Binding* get(int32_t s) const { return slots_[static_cast<size_t>(s)].load(std::memory_order_acquire); }
  const Binding* publish(int32_t s, std::unique_ptr<Binding> b) const;
  // Inside counted repetitions: keyed by (state, copies needed, room left).
  const Binding* get_counter(uint64_t key) const;
  const Binding* publish_counter(uint64_t key, std::unique_ptr<Binding> b) const;

 private:
  mutable std::unique_ptr<std::atomic<const Binding*>[]> slots_;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<Binding>> owned_;
  mutable std::unordered_map<uint64_t, const Binding*> counters_;
};

// The binding of a top state s whose stack below is the counter node `counter_state` of a simple
// repetition body.
const Binding& counter_binding_for(const Program& prog, const Bindings& bindings, MaskCache& cache,
                                   const TokenTrie& vocab_trie, const std::vector<std::string>& token_bytes, int32_t s,
                                   int32_t counter_state);
// The binding of state s (computing the key, and the entry on a cache miss).
const Binding& binding_for(const Program& prog, const Bindings& bindings, MaskCache& cache,
                           const TokenTrie& short_trie, const TokenTrie& long_trie,
                           const std::vector<std::string>& token_bytes, int32_t s);

}  // namespace tmill::grammar
