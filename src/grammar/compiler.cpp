#include "grammar/compiler_impl.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <map>
#include <span>
#include <unordered_map>

namespace tmill::grammar {

using gbnf::Syntax;

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

namespace compile_detail {

void Compiler::find_recursive() {
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

}  // namespace compile_detail

Result<Program> compile_program(const Syntax& syntax, std::string_view root, const CompileLimits& lim) {
  using compile_detail::Compiler;
  return Compiler(syntax, lim).run(root);
}

}  // namespace tmill::grammar
