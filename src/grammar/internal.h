// Definitions behind grammar.h's opaque Impl/State types, shared by the module's sources.
#pragma once

#include <memory>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/mask_cache.h"
#include "grammar/program.h"
#include "grammar/stacks.h"
#include "grammar/token_trie.h"

namespace tmill::grammar {

struct Vocabulary::Impl {
  VocabularyData data;
  TokenTrie trie;                   // every token with bytes (the exact reference walk)
  TokenTrie short_trie, long_trie;  // split at kShortTokenBytes (mask_cache.h)
  std::vector<uint32_t> eos_mask;  // EOS bits only
  std::unique_ptr<MaskCache> cache;
  Impl();
  ~Impl();
};

struct Grammar::Impl {
  std::shared_ptr<const Vocabulary> vocab;
  Program prog;
  std::unique_ptr<Bindings> bindings;  // per state, filled on first use by masks
};

struct Matcher::State {
  Stacks stacks;
  std::vector<int32_t> cur;  // expanded stacks, sorted
  bool accepting = false;
  bool ended = false;  // an end-of-generation token was accepted
  size_t live_nodes = 0;
  explicit State(const Program* p) : stacks(p) {}
};

// Sets the bits of the tokens of trie `t` that the stacks `start` can read (each token alone), walking
// the trie and advancing the stack set byte by byte. With the vocabulary's trie this is the exact
// reference mask; the fast path uses it on the small tries of uncertain token suffixes.
void walk_trie(const TokenTrie& t, Stacks& stacks, const std::vector<int32_t>& start, std::span<uint32_t> mask);

}  // namespace tmill::grammar
