// Definitions behind grammar.h's opaque Impl/State types, shared by the module's sources.
#pragma once

#include <memory>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/program.h"
#include "grammar/stacks.h"
#include "grammar/token_trie.h"

namespace tmill::grammar {

class MaskCache;  // mask_cache.h

struct Vocabulary::Impl {
  VocabularyData data;
  TokenTrie trie;
  std::vector<uint32_t> eos_mask;  // EOS bits only
  std::unique_ptr<MaskCache> cache;
  Impl();
  ~Impl();
};

struct Grammar::Impl {
  std::shared_ptr<const Vocabulary> vocab;
  Program prog;
};

struct Matcher::State {
  Stacks stacks;
  std::vector<int32_t> cur;  // expanded stacks, sorted
  bool accepting = false;
  bool ended = false;  // an end-of-generation token was accepted
  size_t live_nodes = 0;
  explicit State(const Program* p) : stacks(p) {}
};

// The slow, exact mask: walk the token trie advancing the stack set byte by byte. The reference the
// fast path is tested against, and the fallback.
void fill_mask_walk(const Vocabulary::Impl& v, Stacks& stacks, const std::vector<int32_t>& cur,
                    std::span<uint32_t> mask);

}  // namespace tmill::grammar
