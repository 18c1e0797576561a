// The vocabulary's token byte strings as a trie laid out flat in depth-first order: node i's subtree
// is [i, next[i]), its children start at i + 1. Node 0 is the root (the empty string). Built once per
// vocabulary; mask computations walk it and skip a whole subtree when its prefix is refused.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tmill::grammar {

struct TokenTrie {
  std::vector<uint8_t> byte;      // the byte on the edge into the node
  std::vector<uint16_t> depth;    // bytes from the root
  std::vector<int32_t> next;      // first node after the subtree
  std::vector<int32_t> tok_begin;  // tokens ending here: tokens[tok_begin[i] .. tok_begin[i + 1])
  std::vector<int32_t> tokens;
  size_t max_depth = 0;
  // Per node, the bytes on the edges below it (filled by compute_subtree_bytes, vocabulary tries
  // only): lets a walk accept a whole subtree when all its bytes loop on the current state.
  std::vector<std::array<uint64_t, 4>> below;
  void compute_subtree_bytes();

  size_t size() const { return byte.size(); }
  // Tokens in `ids` with non-empty bytes (token_bytes indexed by id).
  static TokenTrie build(const std::vector<std::string>& token_bytes, const std::vector<int32_t>& ids);
  // (bytes, id) pairs; empty strings are skipped. The pairs are sorted in place.
  static TokenTrie build(std::vector<std::pair<std::string_view, int32_t>>& items);
};

}  // namespace tmill::grammar
