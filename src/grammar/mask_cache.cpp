#include "grammar/mask_cache.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>

namespace tmill::grammar {

std::shared_ptr<const MaskEntry> MaskCache::find(const MaskKey& k) const {
  std::lock_guard lock(mu_);
  auto it = map_.find(k);
  return it == map_.end() ? nullptr : it->second;
}

size_t MaskEntry::bytes() const {
  size_t b = sizeof(MaskEntry) + dense.size() * 4 + sparse.size() * 4;
  for (const Exit& x : exits) b += x.suffixes.size() * 12 + x.suffixes.tokens.size() * 4;
  return b;
}

void MaskCache::make_room() {
  if (bytes_ > kMaxBytes) {
    map_.clear();
    summaries_.clear();
    bytes_ = 0;
  }
}

std::shared_ptr<const MaskEntry> MaskCache::insert(const MaskKey& k, std::shared_ptr<const MaskEntry> e) {
  std::lock_guard lock(mu_);
  make_room();
  auto [it, fresh] = map_.try_emplace(k, std::move(e));
  if (fresh) bytes_ += it->second->bytes();
  return it->second;
}

std::shared_ptr<const Summary> MaskCache::find_summary(const MaskKey& k) const {
  std::lock_guard lock(mu_);
  auto it = summaries_.find(k);
  return it == summaries_.end() ? nullptr : it->second;
}

std::shared_ptr<const Summary> MaskCache::insert_summary(const MaskKey& k, std::shared_ptr<const Summary> e) {
  std::lock_guard lock(mu_);
  make_room();
  auto [it, fresh] = summaries_.try_emplace(k, std::move(e));
  if (fresh) bytes_ += it->second->bytes();
  return it->second;
}

size_t MaskCache::size() const {
  std::lock_guard lock(mu_);
  return map_.size();
}

Bindings::Bindings(size_t num_states) : slots_(new std::atomic<const Binding*>[num_states]) {
  for (size_t i = 0; i < num_states; ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
}

const Binding* Bindings::get_counter(uint64_t key) const {
  std::lock_guard lock(mu_);
  auto it = counters_.find(key);
  return it == counters_.end() ? nullptr : it->second;
}

const Binding* Bindings::publish_counter(uint64_t key, std::unique_ptr<Binding> b) const {
  std::lock_guard lock(mu_);
  auto [it, fresh] = counters_.emplace(key, b.get());
  if (fresh) owned_.push_back(std::move(b));
  return it->second;
}

const Binding* Bindings::publish(int32_t s, std::unique_ptr<Binding> b) const {
  std::lock_guard lock(mu_);
  auto& slot = slots_[static_cast<size_t>(s)];
  if (const Binding* cur = slot.load(std::memory_order_acquire)) return cur;
  owned_.push_back(std::move(b));
  slot.store(owned_.back().get(), std::memory_order_release);
  return owned_.back().get();
}

namespace {

bool is_exit(const Program& p, int32_t s) {
  return (p.flags[static_cast<size_t>(s)] & (Program::kFinal | Program::kRefs)) != 0;
}

struct Hasher {
  uint64_t a = 0x243F6A8885A308D3ull, b = 0x13198A2E03707344ull;
  void mix(uint64_t v) {
    a = (a ^ v) * 0x9E3779B97F4A7C15ull;
    a ^= a >> 31;
    b = (b + v) * 0xC2B2AE3D27D4EB4Full;
    b ^= b >> 29;
  }
};

// The sub-automaton of s's rule within `max_depth` bytes of s, numbered in BFS order (edges in byte
// order), hashed. `states` gets the grammar states in that order.
MaskKey canonical(const Program& p, int32_t s, size_t max_depth, std::vector<int32_t>& states,
                  std::unordered_map<int32_t, int32_t>& index) {
  const Program::RuleInfo& rule = p.rules[static_cast<size_t>(p.rule_of[static_cast<size_t>(s)])];
  states.assign(1, s);
  std::vector<uint16_t> depth{0};
  index.clear();
  index.emplace(s, 0);
  Hasher h;
  struct Run {
    uint8_t lo, hi;
    int32_t target;
  };
  std::vector<Run> runs;
  for (size_t i = 0; i < states.size(); ++i) {
    int32_t st = states[i];
    h.mix(is_exit(p, st) ? 0xE1 : 0xE0);
    if (is_exit(p, st)) {
      for (uint64_t w : p.exit_bytes[static_cast<size_t>(st)]) h.mix(w);
    }
    if (depth[i] < max_depth) {
      runs.clear();
      uint32_t row = p.row[static_cast<size_t>(st)];
      for (const auto& r : rule.class_runs) {
        int32_t t = p.trans[row + r[2]];
        if (t == Program::kDead) continue;
        if (!runs.empty() && runs.back().target == t && runs.back().hi + 1 == r[0]) {
          runs.back().hi = r[1];
        } else {
          runs.push_back({r[0], r[1], t});
        }
      }
      for (const Run& r : runs) {
        auto [it, fresh] = index.emplace(r.target, static_cast<int32_t>(states.size()));
        if (fresh) {
          states.push_back(r.target);
          depth.push_back(static_cast<uint16_t>(depth[i] + 1));
        }
        h.mix((uint64_t{r.lo} << 40) | (uint64_t{r.hi} << 32) | static_cast<uint32_t>(it->second));
      }
    }
    h.mix(0xFFFFFFFFFFull);
  }
  return MaskKey{h.a, h.b ^ states.size()};
}

bool subset(const ByteSet& a, const ByteSet& b) {
  return !(a[0] & ~b[0]) && !(a[1] & ~b[1]) && !(a[2] & ~b[2]) && !(a[3] & ~b[3]);
}

void finish(MaskEntry& e, std::vector<int32_t>& accepted,
            std::map<int32_t, std::vector<std::pair<std::string_view, int32_t>>>& uncertain, int32_t n_vocab) {
  if (accepted.size() * 32 > static_cast<size_t>(n_vocab)) {
    e.dense.assign((static_cast<size_t>(n_vocab) + 31) / 32, 0);
    for (int32_t tok : accepted) e.dense[static_cast<size_t>(tok) / 32] |= 1u << (tok % 32);
  } else {
    e.sparse = std::move(accepted);
  }
  for (auto& [canon, items] : uncertain) e.exits.push_back({canon, TokenTrie::build(items)});
}

// The classification walk of trie t from state s: on_accept(k0, k1) gets the token-array positions
// of tokens read to their end, on_dying(k, j, q) each live exit (state q at byte j) of a token that
// dies after it. With virtual_q >= 0 every first byte leads to virtual_q instead (a Summary's walk).
// delegate(i, q) may take the subtree below depth-1 node i (state q) instead (returns true).
template <class OnAccept, class OnDying, class Delegate>
void walk(const Program& p, int32_t s, int32_t virtual_q, const TokenTrie& t, OnAccept&& on_accept, OnDying&& on_dying,
          Delegate&& delegate) {
  // The walk never leaves s's rule: hoist its transition table.
  const Program::RuleInfo& rule = p.rules[static_cast<size_t>(p.rule_of[static_cast<size_t>(s)])];
  const uint8_t* cls = rule.byte_class.data();
  const int32_t* trans = p.trans.data();
  const uint32_t* row = p.row.data();
  const uint8_t* flags = p.flags.data();
  std::vector<int32_t> st(t.max_depth + 1, Program::kDead);
  std::vector<int32_t> exits;  // depths j >= 1 on the current path whose state is an exit
  std::vector<uint8_t> path(t.max_depth + 1, 0);  // path[d]: the byte read at depth d
  std::vector<int32_t> live;
  std::unordered_map<int32_t, ByteSet> loops;  // per state: the bytes that lead back to it
  auto loops_of = [&](int32_t q) -> const ByteSet& {
    auto [it, fresh] = loops.try_emplace(q);
    if (fresh) {
      for (unsigned b = 0; b < 256; ++b) {
        if (trans[row[q] + cls[b]] == q) byteset_add(it->second, static_cast<uint8_t>(b));
      }
    }
    return it->second;
  };
  st[0] = s;
  size_t n = t.size();
  const uint8_t* tb = t.byte.data();
  const uint16_t* td = t.depth.data();
  const int32_t* tbeg = t.tok_begin.data();
  for (size_t i = 1; i < n;) {
    int32_t d = td[i];
    while (!exits.empty() && exits.back() >= d) exits.pop_back();
    uint8_t byte = tb[i];
    path[static_cast<size_t>(d)] = byte;
    int32_t q = d == 1 && virtual_q >= 0 ? virtual_q : trans[row[st[static_cast<size_t>(d - 1)]] + cls[byte]];
    if (q != Program::kDead) {
      st[static_cast<size_t>(d)] = q;
      if (tbeg[i] < tbeg[i + 1]) on_accept(tbeg[i], tbeg[i + 1]);
      if (d == 1 && t.next[i] > static_cast<int32_t>(i) + 1 && delegate(i, q)) {
        i = static_cast<size_t>(t.next[i]);
        continue;
      }
      if (flags[q] & (Program::kFinal | Program::kRefs)) exits.push_back(d);
      if (!t.below.empty() && t.next[i] > static_cast<int32_t>(i) + 1 && subset(t.below[i], loops_of(q))) {
        // Every byte below loops on q: the whole subtree is accepted.
        if (tbeg[i + 1] < tbeg[t.next[i]]) on_accept(tbeg[i + 1], tbeg[t.next[i]]);
        i = static_cast<size_t>(t.next[i]);
        continue;
      }
      ++i;
      continue;
    }
    auto end = static_cast<size_t>(t.next[i]);
    // Exits after which the next byte of these tokens could be read in some context.
    live.clear();
    for (int32_t j : exits) {
      if (byteset_has(p.exit_bytes[static_cast<size_t>(st[static_cast<size_t>(j)])], path[static_cast<size_t>(j + 1)])) {
        live.push_back(j);
      }
    }
    if (!live.empty()) {
      for (int32_t k = tbeg[i]; k < tbeg[end]; ++k) {
        for (int32_t j : live) on_dying(k, j, st[static_cast<size_t>(j)]);
      }
    }
    i = end;
  }
}

// The Summary of state q (see mask_cache.h), computed on the short trie.
std::shared_ptr<const Summary> summarize(const Program& p, int32_t q, const TokenTrie& t,
                                         const std::unordered_map<int32_t, int32_t>& q_index) {
  auto sum = std::make_shared<Summary>();
  sum->accepted.assign((t.tokens.size() + 63) / 64, 0);
  walk(
      p, q, q, t,
      [&](int32_t k0, int32_t k1) {
        for (int32_t k = k0; k < k1; ++k) sum->accepted[static_cast<size_t>(k) / 64] |= uint64_t{1} << (k % 64);
      },
      [&](int32_t k, int32_t j, int32_t qj) { sum->dying.push_back({k, j, q_index.at(qj)}); },
      [](size_t, int32_t) { return false; });
  return sum;
}

// First bytes leading to one state at least this often make it worth delegating to (Summary).
constexpr int kDelegateMinBytes = 8;

std::shared_ptr<const MaskEntry> classify(const Program& p, int32_t s, const TokenTrie& t,
                                          const std::vector<std::string>& token_bytes, int32_t n_vocab,
                                          const std::unordered_map<int32_t, int32_t>* index, MaskCache* cache) {
  auto e = std::make_shared<MaskEntry>();
  std::vector<uint32_t> bits((static_cast<size_t>(n_vocab) + 31) / 32, 0);
  size_t count = 0;
  std::map<int32_t, std::vector<std::pair<std::string_view, int32_t>>> uncertain;  // canon -> (suffix, token)
  const int32_t* toks = t.tokens.data();
  auto set = [&](int32_t tok) {
    bits[static_cast<size_t>(tok) / 32] |= 1u << (tok % 32);
    ++count;
  };
  int32_t last_dying = -1;
  auto dying = [&](int32_t k, int32_t j, int32_t canon) {
    int32_t tok = toks[k];
    if (k != last_dying) ++e->uncertain;
    last_dying = k;
    uncertain[canon].emplace_back(std::string_view(token_bytes[static_cast<size_t>(tok)]).substr(static_cast<size_t>(j)),
                                  tok);
  };
  // States that many first bytes lead to (only for shared entries: Summaries are shared too).
  std::vector<std::pair<int32_t, std::vector<size_t>>> delegated;  // state, depth-1 nodes
  if (cache && index) {
    const Program::RuleInfo& rule = p.rules[static_cast<size_t>(p.rule_of[static_cast<size_t>(s)])];
    std::map<int32_t, int> first;
    for (const auto& r : rule.class_runs) {
      int32_t q = p.trans[p.row[static_cast<size_t>(s)] + r[2]];
      if (q != Program::kDead) first[q] += r[1] - r[0] + 1;
    }
    for (auto [q, c] : first) {
      if (c >= kDelegateMinBytes) delegated.push_back({q, {}});
    }
  }
  walk(
      p, s, -1, t,
      [&](int32_t k0, int32_t k1) {
        for (int32_t k = k0; k < k1; ++k) set(toks[k]);
      },
      [&](int32_t k, int32_t j, int32_t qj) { dying(k, j, index ? index->at(qj) : qj); },
      [&](size_t i, int32_t q) {
        for (auto& [dq, nodes] : delegated) {
          if (dq == q) {
            nodes.push_back(i);
            return true;
          }
        }
        return false;
      });
  for (auto& [q, nodes] : delegated) {
    if (nodes.empty()) continue;
    std::vector<int32_t> q_states;
    std::unordered_map<int32_t, int32_t> q_index;
    MaskKey key = canonical(p, q, t.max_depth, q_states, q_index);
    key.a ^= 0x5A5A'0001'D1E6'A7E5ull;  // apart from entries
    std::shared_ptr<const Summary> sum = cache->find_summary(key);
    if (!sum) sum = cache->insert_summary(key, summarize(p, q, t, q_index));
    for (size_t i : nodes) {
      const int32_t k0 = t.tok_begin[i + 1], k1 = t.tok_begin[static_cast<size_t>(t.next[i])];
      for (int32_t k = k0; k < k1; ++k) {
        if ((sum->accepted[static_cast<size_t>(k) / 64] >> (k % 64)) & 1) set(toks[k]);
      }
      auto it = std::lower_bound(sum->dying.begin(), sum->dying.end(), k0,
                                 [](const Summary::Dying& x, int32_t k) { return x.pos < k; });
      for (; it != sum->dying.end() && it->pos < k1; ++it) {
        dying(it->pos, it->from, index->at(q_states[static_cast<size_t>(it->canon)]));
      }
    }
  }
  if (count * 32 > static_cast<size_t>(n_vocab)) {
    e->dense = std::move(bits);
  } else {
    for (size_t w = 0; w < bits.size(); ++w) {
      for (uint32_t x = bits[w]; x; x &= x - 1) e->sparse.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(__builtin_ctz(x))));
    }
  }
  for (auto& [canon, items] : uncertain) e->exits.push_back({canon, TokenTrie::build(items)});
  return e;
}

// Inside the body of a counted repetition (Program::Repeat, simple body) with `need` more copies to
// finish before leaving is allowed and room for `room` more (both counted after the current copy
// and capped at the longest token): the walk goes on into further copies, and leaving at a copy
// boundary is the one exit (canon -1: the stack below the counter).
std::shared_ptr<const MaskEntry> classify_counter(const Program& p, int32_t s, const Program::Repeat& rep, int32_t need,
                                                  int32_t room, const TokenTrie& t,
                                                  const std::vector<std::string>& token_bytes, int32_t n_vocab) {
  auto e = std::make_shared<MaskEntry>();
  int32_t start = p.rules[static_cast<size_t>(rep.body)].start;
  struct At {
    int32_t x;     // state in the body (its start at a boundary)
    int32_t done;  // copies completed since the top
    bool boundary;
  };
  std::vector<At> st(t.max_depth + 1);
  std::vector<int32_t> exits, accepted;
  std::vector<uint8_t> path(t.max_depth + 1, 0);
  std::map<int32_t, std::vector<std::pair<std::string_view, int32_t>>> uncertain;
  st[0] = {s, 0, false};
  size_t n = t.size();
  bool free_copies = need == 0 && room > static_cast<int32_t>(t.max_depth);
  ByteSet one_byte_copies{};
  for (unsigned c = 0; c < 256; ++c) {
    int32_t q = p.next(start, static_cast<uint8_t>(c));
    if (q != Program::kDead && p.final(q)) byteset_add(one_byte_copies, static_cast<uint8_t>(c));
  }
  for (size_t i = 1; i < n;) {
    int32_t d = t.depth[i];
    while (!exits.empty() && exits.back() >= d) exits.pop_back();
    path[static_cast<size_t>(d)] = t.byte[i];
    const At& a = st[static_cast<size_t>(d - 1)];
    int32_t q = Program::kDead;
    if (!a.boundary || a.done - 1 < room) q = p.next(a.x, t.byte[i]);
    if (q != Program::kDead) {
      At& b = st[static_cast<size_t>(d)];
      if (p.final(q)) {  // a copy ends (finals of a simple body have no edges)
        b = {start, a.done + 1, true};
        if (b.done - 1 >= need) exits.push_back(d);
      } else {
        b = {q, a.done, false};
      }
      for (int32_t k = t.tok_begin[i]; k < t.tok_begin[i + 1]; ++k) accepted.push_back(t.tokens[static_cast<size_t>(k)]);
      // Copies limited by neither bound within a token: every byte that completes a one-byte copy
      // keeps the walk at a boundary, so a subtree of such bytes is accepted whole.
      if (free_copies && b.boundary && !t.below.empty() && t.next[i] > static_cast<int32_t>(i) + 1 &&
          subset(t.below[i], one_byte_copies)) {
        for (int32_t k = t.tok_begin[i + 1]; k < t.tok_begin[t.next[i]]; ++k) accepted.push_back(t.tokens[static_cast<size_t>(k)]);
        i = static_cast<size_t>(t.next[i]);
        continue;
      }
      ++i;
      continue;
    }
    auto end = static_cast<size_t>(t.next[i]);
    bool any = false;
    for (int32_t j : exits) any |= byteset_has(rep.follow, path[static_cast<size_t>(j + 1)]);
    if (any) {
      for (size_t k = i; k < end; ++k) {
        for (int32_t x = t.tok_begin[k]; x < t.tok_begin[k + 1]; ++x) {
          int32_t tok = t.tokens[static_cast<size_t>(x)];
          const std::string& bytes = token_bytes[static_cast<size_t>(tok)];
          ++e->uncertain;
          for (int32_t j : exits) {
            if (byteset_has(rep.follow, path[static_cast<size_t>(j + 1)])) {
              uncertain[-1].emplace_back(std::string_view(bytes).substr(static_cast<size_t>(j)), tok);
            }
          }
        }
      }
    }
    i = end;
  }
  finish(*e, accepted, uncertain, n_vocab);
  return e;
}

}  // namespace

const Binding& counter_binding_for(const Program& prog, const Bindings& bindings, MaskCache& cache,
                                   const TokenTrie& trie, const std::vector<std::string>& token_bytes, int32_t s,
                                   int32_t counter_state) {
  auto [k, c] = prog.counter(counter_state);
  const Program::Repeat& rep = prog.repeats[static_cast<size_t>(k)];
  auto cap = static_cast<int32_t>(trie.max_depth) + 1;
  int32_t need = std::min(cap, std::max(0, rep.min - c));
  int32_t room = rep.max < 0 ? cap : std::min(cap, rep.max - c);
  uint64_t local = (static_cast<uint64_t>(static_cast<uint32_t>(s)) << 32) | (static_cast<uint64_t>(need) << 16) |
                   static_cast<uint64_t>(room);
  if (const Binding* b = bindings.get_counter(local)) return *b;
  auto b = std::make_unique<Binding>();
  std::unordered_map<int32_t, int32_t> index;
  int32_t start = prog.rules[static_cast<size_t>(rep.body)].start;
  MaskKey body = canonical(prog, start, SIZE_MAX, b->canon_states, index);
  Hasher h;
  for (uint64_t w : {body.a, body.b, static_cast<uint64_t>(index.at(s)), static_cast<uint64_t>(need),
                     static_cast<uint64_t>(room), uint64_t{0xC0C0}}) {
    h.mix(w);
  }
  for (uint64_t w : rep.follow) h.mix(w);
  MaskKey key{h.a, h.b};
  b->entry = cache.find(key);
  if (!b->entry) {
    b->entry = cache.insert(key, classify_counter(prog, s, rep, need, room, trie, token_bytes,
                                                  static_cast<int32_t>(token_bytes.size())));
  }
  return *bindings.publish_counter(local, std::move(b));
}

const Binding& binding_for(const Program& prog, const Bindings& bindings, MaskCache& cache,
                           const TokenTrie& short_trie, const TokenTrie& long_trie,
                           const std::vector<std::string>& token_bytes, int32_t s) {
  if (const Binding* b = bindings.get(s)) return *b;
  auto b = std::make_unique<Binding>();
  std::unordered_map<int32_t, int32_t> index;
  auto n_vocab = static_cast<int32_t>(token_bytes.size());
  MaskKey key = canonical(prog, s, short_trie.max_depth, b->canon_states, index);
  b->entry = cache.find(key);
  if (!b->entry) b->entry = cache.insert(key, classify(prog, s, short_trie, token_bytes, n_vocab, &index, &cache));
  if (long_trie.size() > 1) b->local = classify(prog, s, long_trie, token_bytes, n_vocab, nullptr, nullptr);
  return *bindings.publish(s, std::move(b));
}

}  // namespace tmill::grammar
