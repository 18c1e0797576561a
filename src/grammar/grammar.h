// The grammar engine: constrains generation to a context-free grammar over bytes, token by token,
// over a model's whole vocabulary. No HTTP, no model: the engine hands it token byte strings once
// (Vocabulary), compiles each request's OutputConstraint (compile(), cached), and per sequence keeps a
// Matcher that gives the allowed-token bitmask for the next step and advances on the sampled token.
//
// Everything compiles to GBNF (llama.cpp's grammar format, grammars/README.md upstream), so
// llama-server users' grammars work unchanged and JSON Schema, regex and choices share one path:
//   JSON Schema / json_object -> json_schema_to_gbnf()  (json_schema.h)
//   regex                     -> regex_to_gbnf()        (json_schema.h)
//   choices                   -> choices_to_gbnf()      (json_schema.h)
//   GBNF text                 -> compile_gbnf()         (here)
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api/constraint.h"
#include "core/result.h"

namespace tmill::grammar {

struct CompileLimits;  // compiler.h (internal)

// A model's vocabulary as the grammar sees it: each token's bytes as they appear in the output text
// (byte-level BPE mapped back to raw bytes, SentencePiece "▁" to a space and <0xXX> to the byte).
// Tokens with no text (special and control tokens) have empty bytes and are never allowed, except the
// end-of-generation tokens, which are allowed exactly when the grammar accepts what came so far.
struct VocabularyData {
  std::vector<std::string> token_bytes;  // index = token id
  std::vector<int32_t> eos_tokens;
};

class Vocabulary {
 public:
  static std::shared_ptr<const Vocabulary> create(VocabularyData data);
  int32_t size() const;
  const std::string& token_bytes(int32_t token) const;
  const std::vector<int32_t>& eos_tokens() const;
  struct Impl;  // token trie and the masks cached per grammar position (shared by all grammars)
  const Impl& impl() const { return *impl_; }
  ~Vocabulary();

 private:
  Vocabulary();
  std::unique_ptr<Impl> impl_;
};

// A grammar compiled for one vocabulary. Immutable and thread-safe to share; Matchers walk it.
class Grammar {
 public:
  ~Grammar();
  const Vocabulary& vocab() const;
  size_t num_rules() const;
  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  friend Result<std::shared_ptr<const Grammar>> compile_gbnf(std::string_view, std::shared_ptr<const Vocabulary>,
                                                             std::string_view, const CompileLimits&);
  Grammar();
  std::unique_ptr<Impl> impl_;
};

// Parses GBNF and compiles it. Errors name the line and column, an undefined or unused-but-needed
// rule, a missing root, left recursion the matcher cannot run.
Result<std::shared_ptr<const Grammar>> compile_gbnf(std::string_view gbnf, std::shared_ptr<const Vocabulary> vocab,
                                                    std::string_view root = "root");

// An OutputConstraint to a Grammar: translate (json_schema.h) then compile_gbnf. Errors name the
// unsupported keyword or the position in the pattern or grammar.
Result<std::shared_ptr<const Grammar>> compile(const OutputConstraint& c, std::shared_ptr<const Vocabulary> vocab);

// compile() behind a cache keyed by the constraint's kind, text, choices and options: the same
// schema arrives again and again. Thread-safe; compile errors are cached too.
class GrammarCache {
 public:
  explicit GrammarCache(std::shared_ptr<const Vocabulary> vocab, size_t capacity = 256);
  ~GrammarCache();
  Result<std::shared_ptr<const Grammar>> get(const OutputConstraint& c);
  const std::shared_ptr<const Vocabulary>& vocab() const;
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// One sequence's position in a grammar. Copyable (n > 1 choices fork it).
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Grammar> grammar);
  Matcher(const Matcher&);
  Matcher& operator=(const Matcher&);
  Matcher(Matcher&&) noexcept;
  Matcher& operator=(Matcher&&) noexcept;
  ~Matcher();

  // The tokens allowed next: bit (t % 32) of mask[t / 32] for token t; mask.size() must be
  // mask_words(vocab size). End-of-generation tokens are set exactly when accepting().
  void fill_mask(std::span<uint32_t> mask);
  // The same mask computed the slow, exact way (every token walked through the stacks); for tests.
  void fill_mask_reference(std::span<uint32_t> mask);
  static size_t mask_words(int32_t n_vocab) { return (static_cast<size_t>(n_vocab) + 31) / 32; }

  // Advance by one token / some bytes. False, with the state unchanged, when not allowed. An
  // end-of-generation token is accepted when accepting() and moves the matcher to terminated().
  bool accept_token(int32_t token);
  bool accept_bytes(std::string_view bytes);

  bool accepting() const;   // the bytes so far form a complete sentence of the grammar
  bool terminated() const;  // nothing may follow: generation must end now
  // Fast-forward: the bytes every continuation must begin with (up to max_bytes), "" when there is
  // a choice at the next byte.
  std::string forced_bytes(size_t max_bytes = 256) const;

  const Grammar& grammar() const;
  // Diagnostics: how many parse stacks the current state holds (grows with ambiguity).
  size_t num_stacks() const;
  struct State;

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::unique_ptr<State> state_;
};

}  // namespace tmill::grammar
