// Structured output in the engine: each constrained choice owns a grammar::Matcher; each step its
// mask is applied to the choice's logits row before sampling, and the sampled token advances it
// (src/engine/constraints.cpp). The compiled grammars come from the engine's GrammarCache, built on
// the tokenizer's token bytes (Tokenizer::token_bytes_all).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace tmill {

class Tokenizer;

// One choice's position in its constraint.
struct ChoiceConstraint {
  ChoiceConstraint(std::shared_ptr<const grammar::Grammar> g, std::string after_text)
      : matcher(std::move(g)), after(std::move(after_text)), active(after.empty()) {}

  grammar::Matcher matcher;
  std::string after;   // OutputConstraint::after: the constraint starts once the output contains it
  bool active;         // `after` seen (or empty): the matcher rules the output
  std::string tail;    // inactive: the last output bytes, to find `after` across token boundaries
  bool dead = false;   // the grammar allowed no token at all (a vocabulary that cannot spell it)

  // The output must end now: the grammar is complete and nothing may follow.
  bool terminated() const { return active && matcher.terminated(); }
};

// Speculative decoding: how many of `drafts`, in order, the constraint allows from its current state
// (a copy of it advances over them; `cc` itself is not touched). The count stops at the first
// token the grammar (or `after`'s following bytes) refuses, and after a token that ends the grammar
// (nothing may follow it). Only a cut: verification masks every position on its own.
size_t allowed_draft_prefix(const ChoiceConstraint& cc, const Tokenizer& tok, std::span<const int32_t> drafts);

// Scratch of one pool thread: the mask and the masked copy of a logits row.
struct ConstraintScratch {
  std::vector<uint32_t> mask;
  std::vector<float> row;
};

}  // namespace tmill
