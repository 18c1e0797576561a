#include "grammar/token_trie.h"

#include <algorithm>

namespace tmill::grammar {

TokenTrie TokenTrie::build(const std::vector<std::string>& token_bytes, const std::vector<int32_t>& ids) {
  std::vector<std::pair<std::string_view, int32_t>> items;
  items.reserve(ids.size());
  for (int32_t t : ids) items.emplace_back(token_bytes[static_cast<size_t>(t)], t);
  return build(items);
}

TokenTrie TokenTrie::build(std::vector<std::pair<std::string_view, int32_t>>& items) {
  std::sort(items.begin(), items.end());
  TokenTrie t;
  auto add_node = [&](uint8_t b, size_t d) {
    t.byte.push_back(b);
    t.depth.push_back(static_cast<uint16_t>(d));
    t.next.push_back(-1);
    t.tok_begin.push_back(static_cast<int32_t>(t.tokens.size()));
    t.max_depth = std::max(t.max_depth, d);
  };
  add_node(0, 0);
  std::vector<int32_t> path{0};  // path[d] = node at depth d on the current branch
  const std::string_view* prev = nullptr;
  for (const auto& [s, id] : items) {
    if (s.empty()) continue;
    size_t lcp = 0;
    if (prev) {
      while (lcp < s.size() && lcp < prev->size() && s[lcp] == (*prev)[lcp]) ++lcp;
    }
    while (path.size() > lcp + 1) {  // close subtrees we leave
      t.next[static_cast<size_t>(path.back())] = static_cast<int32_t>(t.byte.size());
      path.pop_back();
    }
    for (size_t d = lcp; d < s.size(); ++d) {
      path.push_back(static_cast<int32_t>(t.byte.size()));
      add_node(static_cast<uint8_t>(s[d]), d + 1);
    }
    // Tokens are appended in node order: this string ends at the newest node (or, for a duplicate,
    // at the node the previous identical string ended at, still the newest).
    t.tokens.push_back(id);
    prev = &s;
  }
  while (!path.empty()) {
    t.next[static_cast<size_t>(path.back())] = static_cast<int32_t>(t.byte.size());
    path.pop_back();
  }
  // tok_begin[i] was the token count when node i was created; a node's tokens were pushed right after
  // creating it (and before any later node), so [tok_begin[i], tok_begin[i+1]) are exactly its tokens.
  t.tok_begin.push_back(static_cast<int32_t>(t.tokens.size()));
  return t;
}

void TokenTrie::compute_subtree_bytes() {
  size_t n = byte.size();
  std::vector<int32_t> parent(n, -1), path;
  for (size_t i = 0; i < n; ++i) {
    while (!path.empty() && next[static_cast<size_t>(path.back())] <= static_cast<int32_t>(i)) path.pop_back();
    if (!path.empty()) parent[i] = path.back();
    path.push_back(static_cast<int32_t>(i));
  }
  below.assign(n, {0, 0, 0, 0});
  for (size_t i = n; i-- > 1;) {
    auto& up = below[static_cast<size_t>(parent[i])];
    for (size_t w = 0; w < 4; ++w) up[w] |= below[i][w];
    up[byte[i] >> 6] |= uint64_t{1} << (byte[i] & 63);
  }
}

}  // namespace tmill::grammar
