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
  if (st0.ended) return {};
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

void fill_mask_walk(const Vocabulary::Impl& v, Stacks& stacks, const std::vector<int32_t>& cur,
                    std::span<uint32_t> mask) {
  const TokenTrie& t = v.trie;
  std::vector<std::vector<int32_t>> sets(t.max_depth + 1);
  sets[0] = cur;
  size_t n = t.size();
  for (size_t i = 1; i < n;) {
    size_t d = t.depth[i];
    bool acc = stacks.advance(sets[d - 1], t.byte[i], sets[d]);
    if (sets[d].empty() && !acc) {
      i = static_cast<size_t>(t.next[i]);
      continue;
    }
    for (int32_t k = t.tok_begin[i]; k < t.tok_begin[i + 1]; ++k) {
      int32_t tok = t.tokens[static_cast<size_t>(k)];
      mask[static_cast<size_t>(tok) / 32] |= 1u << (tok % 32);
    }
    ++i;
  }
}

void Matcher::fill_mask(std::span<uint32_t> mask) {
  State& st = *state_;
  const Vocabulary::Impl& v = grammar_->vocab().impl();
  std::memset(mask.data(), 0, mask.size() * sizeof(uint32_t));
  if (!st.ended) {
    if (!st.cur.empty()) {
      size_t before = st.stacks.num_nodes();
      fill_mask_walk(v, st.stacks, st.cur, mask);
      (void)before;
      maybe_compact(st);
    }
    if (st.accepting) {
      for (size_t i = 0; i < mask.size() && i < v.eos_mask.size(); ++i) mask[i] |= v.eos_mask[i];
    }
  }
}

}  // namespace tmill::grammar
