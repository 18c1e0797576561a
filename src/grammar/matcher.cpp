// Matcher: a sequence's stack set, advanced byte by byte; masks via the token trie (mask_cache.h
// for the fast path, fill_mask_walk as the exact reference).
#include <algorithm>
#include <cstring>

#include "grammar/internal.h"

namespace tmill::grammar {

namespace {
// Keep the stack-node pool near the live size: compact when it has grown well past it.
void maybe_compact(Matcher::State& st) {
  if (st.stacks.num_nodes() > 4 * st.live_nodes + 65536) {
    st.stacks.compact(st.cur);
    std::sort(st.cur.begin(), st.cur.end());
    st.live_nodes = st.stacks.num_nodes();
  }
}
}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)), state_(std::make_unique<State>(&grammar_->impl().prog)) {
  state_->accepting = state_->stacks.initial(state_->cur);
  state_->live_nodes = state_->stacks.num_nodes();
}
Matcher::Matcher(const Matcher& o) : grammar_(o.grammar_), state_(std::make_unique<State>(*o.state_)) {}
Matcher& Matcher::operator=(const Matcher& o) {
  if (this != &o) {
    grammar_ = o.grammar_;
    state_ = std::make_unique<State>(*o.state_);
  }
  return *this;
}
Matcher::Matcher(Matcher&&) noexcept = default;
Matcher& Matcher::operator=(Matcher&&) noexcept = default;
Matcher::~Matcher() = default;

const Grammar& Matcher::grammar() const { return *grammar_; }
size_t Matcher::num_stacks() const { return state_->cur.size(); }
bool Matcher::accepting() const { return state_->accepting; }
bool Matcher::terminated() const { return state_->ended || (state_->accepting && state_->cur.empty()); }

bool Matcher::accept_bytes(std::string_view bytes) {
  State& st = *state_;
  if (st.ended) return bytes.empty();
  if (bytes.empty()) return true;
  std::vector<int32_t> a = st.cur, b;
  bool acc = st.accepting;
  for (char c : bytes) {
    acc = st.stacks.advance(a, static_cast<uint8_t>(c), b);
    if (b.empty() && !acc) return false;
    a.swap(b);
  }
  st.cur.swap(a);
  st.accepting = acc;
  maybe_compact(st);
  return true;
}

bool Matcher::accept_token(int32_t token) {
  const Vocabulary& v = grammar_->vocab();
  if (token < 0 || token >= v.size()) return false;
  const auto& eos = v.eos_tokens();
  if (std::find(eos.begin(), eos.end(), token) != eos.end()) {
    if (!state_->accepting || state_->ended) return false;
    state_->ended = true;
    return true;
  }
  const std::string& bytes = v.token_bytes(token);
  if (bytes.empty()) return false;  // special tokens carry no text: never part of constrained output
  return accept_bytes(bytes);
}

std::string Matcher::forced_bytes(size_t max_bytes) const {
  const State& st0 = *state_;
  if (st0.ended || st0.accepting || st0.cur.empty()) return {};
  {  // the common case, a choice at the next byte, without copying the stack pool
    ByteSet u = st0.stacks.first_bytes(st0.cur);
    if (__builtin_popcountll(u[0]) + __builtin_popcountll(u[1]) + __builtin_popcountll(u[2]) +
            __builtin_popcountll(u[3]) != 1) {
      return {};
    }
  }
  Stacks stacks = st0.stacks;  // scratch: do not grow the matcher's own pool
  std::vector<int32_t> a = st0.cur, b;
  bool acc = st0.accepting;
  std::string out;
  const Program& p = grammar_->impl().prog;
  while (out.size() < max_bytes && !acc && !a.empty()) {
    ByteSet u{};
    for (int32_t n : a) {
      const ByteSet& f = p.first[static_cast<size_t>(stacks.state(n))];
      for (int i = 0; i < 4; ++i) u[static_cast<size_t>(i)] |= f[static_cast<size_t>(i)];
    }
    int count = 0, only = -1;
    for (int i = 0; i < 4; ++i) {
      uint64_t w = u[static_cast<size_t>(i)];
      count += __builtin_popcountll(w);
      if (w) only = i * 64 + __builtin_ctzll(w);
    }
    if (count != 1) break;
    acc = stacks.advance(a, static_cast<uint8_t>(only), b);
    a.swap(b);
    out += static_cast<char>(only);
  }
  return out;
}

void walk_trie(const TokenTrie& t, Stacks& stacks, const std::vector<int32_t>& start, std::span<uint32_t> mask) {
  thread_local std::vector<std::vector<int32_t>> sets;
  thread_local std::vector<ByteSet> firsts;
  if (sets.size() < t.max_depth + 1) {
    sets.resize(t.max_depth + 1);
    firsts.resize(t.max_depth + 1);
  }
  sets[0] = start;
  firsts[0] = stacks.first_bytes(start);
  size_t n = t.size();
  for (size_t i = 1; i < n;) {
    size_t d = t.depth[i];
    uint8_t b = t.byte[i];
    if (!byteset_has(firsts[d - 1], b)) {  // no stack reads this byte: skip the subtree
      i = static_cast<size_t>(t.next[i]);
      continue;
    }
    bool acc = stacks.advance(sets[d - 1], b, sets[d]);
    if (sets[d].empty() && !acc) {
      i = static_cast<size_t>(t.next[i]);
      continue;
    }
    for (int32_t k = t.tok_begin[i]; k < t.tok_begin[i + 1]; ++k) {
      int32_t tok = t.tokens[static_cast<size_t>(k)];
      mask[static_cast<size_t>(tok) / 32] |= 1u << (tok % 32);
    }
    if (t.next[i] != static_cast<int32_t>(i) + 1) firsts[d] = stacks.first_bytes(sets[d]);
    ++i;
  }
}

namespace {

// The fast mask: per distinct top state, the cached accepted tokens plus the uncertain ones checked
// against the real stacks below (mask_cache.h).
void fill_mask_cached(const Grammar::Impl& g, Matcher::State& st, std::span<uint32_t> mask) {
  const Vocabulary::Impl& v = g.vocab->impl();
  const Program& p = g.prog;
  Stacks& stacks = st.stacks;
  struct Top {
    int32_t state, counter, node;  // counter: the counter state below (simple repetition body), or -1
    bool operator<(const Top& o) const {
      return state != o.state ? state < o.state : counter != o.counter ? counter < o.counter : node < o.node;
    }
  };
  thread_local std::vector<Top> groups;
  thread_local std::vector<int32_t> seeds, start;
  groups.clear();
  for (int32_t n : st.cur) {
    int32_t s = stacks.state(n), par = stacks.parent(n), counter = -1;
    if (par != Stacks::kBottom && p.is_counter(stacks.state(par))) {
      int32_t cs = stacks.state(par);
      const Program::Repeat& rep = p.repeats[static_cast<size_t>(p.counter(cs).first)];
      if (rep.simple && p.rule_of[static_cast<size_t>(s)] == rep.body) counter = cs;
    }
    groups.push_back({s, counter, n});
  }
  std::sort(groups.begin(), groups.end());
  for (size_t i = 0; i < groups.size();) {
    int32_t s = groups[i].state, counter = groups[i].counter;
    size_t j = i;
    while (j < groups.size() && groups[j].state == s && groups[j].counter == counter) ++j;
    const Binding& b =
        counter >= 0 ? counter_binding_for(p, *g.bindings, *v.cache, v.trie, v.data.token_bytes, s, counter)
                     : binding_for(p, *g.bindings, *v.cache, v.short_trie, v.long_trie, v.data.token_bytes, s);
    for (const MaskEntry* e : {b.entry.get(), b.local.get()}) {
      if (!e) continue;
      bool direct = e == b.local.get();
      if (!e->dense.empty()) {
        for (size_t w = 0; w < e->dense.size(); ++w) mask[w] |= e->dense[w];
      } else {
        for (int32_t tok : e->sparse) mask[static_cast<size_t>(tok) / 32] |= 1u << (tok % 32);
      }
      for (const MaskEntry::Exit& x : e->exits) {
        seeds.clear();
        if (x.canon < 0) {  // leave the repetition: continue below the counter
          for (size_t k = i; k < j; ++k) {
            int32_t below = stacks.parent(stacks.parent(groups[k].node));
            if (below != Stacks::kBottom) seeds.push_back(below);
          }
        } else {
          int32_t q = direct ? x.canon : b.canon_states[static_cast<size_t>(x.canon)];
          for (size_t k = i; k < j; ++k) seeds.push_back(stacks.cons(q, stacks.parent(groups[k].node)));
        }
        if (seeds.empty()) continue;
        stacks.expand_all(seeds, start);
        if (!start.empty()) walk_trie(x.suffixes, stacks, start, mask);
      }
    }
    i = j;
  }
}

}  // namespace

void Matcher::fill_mask(std::span<uint32_t> mask) {
  State& st = *state_;
  const Vocabulary::Impl& v = grammar_->vocab().impl();
  std::memset(mask.data(), 0, mask.size() * sizeof(uint32_t));
  if (st.ended) return;
  if (!st.cur.empty()) {
    fill_mask_cached(grammar_->impl(), st, mask);
    maybe_compact(st);
  }
  if (st.accepting) {
    for (size_t i = 0; i < mask.size() && i < v.eos_mask.size(); ++i) mask[i] |= v.eos_mask[i];
  }
}

void Matcher::fill_mask_reference(std::span<uint32_t> mask) {
  State& st = *state_;
  const Vocabulary::Impl& v = grammar_->vocab().impl();
  std::memset(mask.data(), 0, mask.size() * sizeof(uint32_t));
  if (st.ended) return;
  if (!st.cur.empty()) {
    walk_trie(v.trie, st.stacks, st.cur, mask);
    maybe_compact(st);
  }
  if (st.accepting) {
    for (size_t i = 0; i < mask.size() && i < v.eos_mask.size(); ++i) mask[i] |= v.eos_mask[i];
  }
}

}  // namespace tmill::grammar
