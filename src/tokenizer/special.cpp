#include "tokenizer/special.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <map>

namespace tmill::tok {

void SpecialMatcher::build(const VocabData& v, const VocabIndex& idx, bool include_control) {
  v_ = &v;
  ids_.clear();
  nodes_.assign(1, Node{});
  std::fill(std::begin(root_next_), std::end(root_next_), -1);
  for (int32_t id : idx.special_tokens) {
    const auto& t = v.tokens[id];
    if (!include_control && (t.attr & (kAttrControl | kAttrUnknown))) continue;
    if (t.text.empty()) continue;
    const int32_t prio = int32_t(ids_.size());
    ids_.push_back(id);
    int32_t node = 0;
    for (size_t i = 0; i < t.text.size(); ++i) {
      uint8_t c = uint8_t(t.text[i]);
      int32_t child = -1;
      if (node == 0) {
        child = root_next_[c];
      } else {
        for (auto& [b, n] : nodes_[node].next) if (b == c) child = n;
      }
      if (child < 0) {
        child = int32_t(nodes_.size());
        nodes_.push_back(Node{});
        if (node == 0) root_next_[c] = child;
        else nodes_[node].next.emplace_back(c, child);
      }
      node = child;
    }
    if (nodes_[node].term < 0) nodes_[node].term = prio;
  }
}

void SpecialMatcher::partition(std::string_view text, std::vector<Fragment>& out) const {
  out.clear();
  if (text.empty()) return;
  const uint32_t n = uint32_t(text.size());
  struct Occ {
    int32_t prio;
    uint32_t pos;
  };
  std::vector<Occ> occ;
  if (!ids_.empty()) {
    for (uint32_t p = 0; p < n; ++p) {
      int32_t node = root_next_[uint8_t(text[p])];
      for (uint32_t q = p + 1; node >= 0; ++q) {
        if (nodes_[node].term >= 0) occ.push_back({nodes_[node].term, p});
        if (q >= n) break;
        int32_t child = -1;
        for (auto& [b, c] : nodes_[node].next) if (b == uint8_t(text[q])) child = c;
        node = child;
      }
    }
  }
  if (occ.empty()) {
    out.push_back({-1, 0, n});
    return;
  }
  std::sort(occ.begin(), occ.end(), [](const Occ& a, const Occ& b) {
    return a.prio != b.prio ? a.prio < b.prio : a.pos < b.pos;
  });
  // Claimed intervals [start, end) -> token (-2 for swallowed whitespace).
  std::map<uint32_t, std::pair<uint32_t, int32_t>> claimed;
  auto overlaps = [&](uint32_t s, uint32_t e) {
    auto it = claimed.lower_bound(e);  // first interval starting at or after e
    if (it == claimed.begin()) return false;
    --it;
    return it->second.first > s;
  };
  auto is_claimed = [&](uint32_t p) { return overlaps(p, p + 1); };
  for (const Occ& o : occ) {
    const int32_t id = ids_[o.prio];
    const auto& t = v_->tokens[id];
    const uint32_t s = o.pos, e = o.pos + uint32_t(t.text.size());
    if (overlaps(s, e)) continue;
    claimed[s] = {e, id};
    if (t.attr & kAttrLstrip) {
      uint32_t ls = s;
      while (ls > 0 && std::isspace(static_cast<unsigned char>(text[ls - 1])) && !is_claimed(ls - 1)) --ls;
      if (ls < s) claimed[ls] = {s, -2};
    }
    if (t.attr & kAttrRstrip) {
      uint32_t re = e;
      while (re < n && std::isspace(static_cast<unsigned char>(text[re])) && !is_claimed(re)) ++re;
      if (re > e) claimed[e] = {re, -2};
    }
  }
  uint32_t pos = 0;
  for (const auto& [s, v] : claimed) {
    if (s > pos) out.push_back({-1, pos, s - pos});
    if (v.second >= 0) out.push_back({v.second, s, v.first - s});
    pos = v.first;
  }
  if (pos < n) out.push_back({-1, pos, n - pos});
}

}  // namespace tmill::tok
