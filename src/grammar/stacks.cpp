#include "grammar/stacks.h"

#include <algorithm>

namespace tmill::grammar {

void Stacks::grow() {
  size_t cap = table_.empty() ? 1024 : table_.size() * 2;
  table_.assign(cap, 0);
  size_t mask = cap - 1;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    size_t h = hash(nodes_[i].state, nodes_[i].parent) & mask;
    while (table_[h] != 0) h = (h + 1) & mask;
    table_[h] = static_cast<int32_t>(i) + 1;
  }
}

int32_t Stacks::cons(int32_t state, int32_t parent) {
  if ((nodes_.size() + 1) * 2 > table_.size()) grow();
  size_t mask = table_.size() - 1;
  size_t h = hash(state, parent) & mask;
  for (;;) {
    int32_t v = table_[h];
    if (v == 0) break;
    const Node& n = nodes_[static_cast<size_t>(v - 1)];
    if (n.state == state && n.parent == parent) return v - 1;
    h = (h + 1) & mask;
  }
  auto id = static_cast<int32_t>(nodes_.size());
  nodes_.push_back({state, parent});
  table_[h] = id + 1;
  return id;
}

bool Stacks::expand(int32_t seed, std::vector<int32_t>& out) {
  const Program& p = *prog_;
  bool accepting = false;
  work_.clear();
  work_.push_back(seed);
  while (!work_.empty()) {
    int32_t n = work_.back();
    work_.pop_back();
    if (mark_.size() < nodes_.size()) mark_.resize(nodes_.size() * 2, 0);
    auto& m = mark_[static_cast<size_t>(n)];
    if (m == epoch_) continue;
    m = epoch_;
    int32_t s = nodes_[static_cast<size_t>(n)].state;
    int32_t par = nodes_[static_cast<size_t>(n)].parent;
    if (p.is_counter(s)) {  // C(c): another copy of the body, and/or return once c >= min
      auto [k, c] = p.counter(s);
      const Program::Repeat& rep = p.repeats[static_cast<size_t>(k)];
      if (rep.max < 0 || c < rep.max) {
        int32_t nc = (rep.max < 0 && c >= rep.min) ? c : c + 1;
        work_.push_back(cons(p.rules[static_cast<size_t>(rep.body)].start, cons(rep.base + nc, par)));
      }
      if (c >= rep.min) {
        if (par == kBottom) {
          accepting = true;
        } else {
          work_.push_back(par);
        }
      }
      continue;
    }
    uint8_t f = p.flags[static_cast<size_t>(s)];
    if (f & Program::kBytes) out.push_back(n);
    if (f & Program::kRefs) {
      for (uint32_t i = p.ref_begin[static_cast<size_t>(s)]; i < p.ref_begin[static_cast<size_t>(s) + 1]; ++i) {
        const Program::Ref& r = p.refs[i];
        // A call whose return point has nothing left to do returns straight to our caller.
        int32_t cont = (p.flags[static_cast<size_t>(r.target)] & Program::kPureEnd) ? par : cons(r.target, par);
        work_.push_back(cons(p.rule_start(r.rule), cont));
      }
    }
    if (f & Program::kFinal) {
      if (par == kBottom) {
        accepting = true;
      } else {
        work_.push_back(par);
      }
    }
  }
  return accepting;
}

void Stacks::sort_unique(std::vector<int32_t>& v, size_t from) {
  std::sort(v.begin() + static_cast<std::ptrdiff_t>(from), v.end());
  v.erase(std::unique(v.begin() + static_cast<std::ptrdiff_t>(from), v.end()), v.end());
}

bool Stacks::advance(std::span<const int32_t> in, uint8_t b, std::vector<int32_t>& out) {
  out.clear();
  ++epoch_;
  bool accepting = false;
  for (int32_t n : in) {
    int32_t s = nodes_[static_cast<size_t>(n)].state;
    int32_t t = prog_->next(s, b);
    if (t == Program::kDead) continue;
    accepting |= expand(cons(t, nodes_[static_cast<size_t>(n)].parent), out);
  }
  sort_unique(out, 0);
  return accepting;
}

bool Stacks::expand_all(std::span<const int32_t> seeds, std::vector<int32_t>& out) {
  out.clear();
  ++epoch_;
  bool acc = false;
  for (int32_t n : seeds) acc |= expand(n, out);
  sort_unique(out, 0);
  return acc;
}

ByteSet Stacks::first_bytes(std::span<const int32_t> set) const {
  ByteSet u{};
  for (int32_t n : set) {
    const ByteSet& f = prog_->first[static_cast<size_t>(nodes_[static_cast<size_t>(n)].state)];
    for (size_t i = 0; i < 4; ++i) u[i] |= f[i];
  }
  return u;
}

bool Stacks::initial(std::vector<int32_t>& out) {
  out.clear();
  ++epoch_;
  bool acc = expand(cons(prog_->rules[static_cast<size_t>(prog_->root_rule)].start, kBottom), out);
  sort_unique(out, 0);
  return acc;
}

void Stacks::compact(std::vector<int32_t>& live) {
  std::vector<int32_t> remap(nodes_.size(), -2);
  std::vector<Node> old;
  old.swap(nodes_);
  table_.clear();
  nodes_.reserve(live.size() * 4);
  // Copy each live chain bottom-up (parents first) so cons() finds the new parent ids.
  std::vector<int32_t> chain;
  for (int32_t& n : live) {
    chain.clear();
    int32_t x = n;
    while (x != kBottom && remap[static_cast<size_t>(x)] == -2) {
      chain.push_back(x);
      x = old[static_cast<size_t>(x)].parent;
    }
    for (size_t i = chain.size(); i-- > 0;) {
      const Node& o = old[static_cast<size_t>(chain[i])];
      int32_t par = o.parent == kBottom ? kBottom : remap[static_cast<size_t>(o.parent)];
      remap[static_cast<size_t>(chain[i])] = cons(o.state, par);
    }
    n = remap[static_cast<size_t>(n)];
  }
  mark_.assign(nodes_.size() * 2 + 16, 0);
  epoch_ = 0;
}

}  // namespace tmill::grammar
