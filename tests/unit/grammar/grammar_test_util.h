// Helpers shared by the grammar tests: small vocabularies, whole-string checks, the brute-force mask.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace tmill::grammar::testing {

inline std::shared_ptr<const Vocabulary> vocab_of(std::vector<std::string> tokens, std::vector<int32_t> eos = {}) {
  VocabularyData d;
  d.token_bytes = std::move(tokens);
  d.eos_tokens = std::move(eos);
  return Vocabulary::create(std::move(d));
}

// A vocabulary of all single bytes plus an EOS token (id 256, no bytes).
inline std::shared_ptr<const Vocabulary> byte_vocab() {
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.emplace_back(1, static_cast<char>(b));
  t.emplace_back();
  return vocab_of(std::move(t), {256});
}

inline std::shared_ptr<const Grammar> must_compile(std::string_view gbnf,
                                                   std::shared_ptr<const Vocabulary> v = byte_vocab()) {
  auto g = compile_gbnf(gbnf, std::move(v));
  EXPECT_TRUE(g.ok()) << g.error() << "\n" << gbnf;
  return g.ok() ? g.value() : nullptr;
}

// The whole string is a sentence of the grammar.
inline bool matches(const std::shared_ptr<const Grammar>& g, std::string_view s) {
  Matcher m(g);
  return m.accept_bytes(s) && m.accepting();
}
// The string is a prefix of some sentence.
inline bool prefix_ok(const std::shared_ptr<const Grammar>& g, std::string_view s) {
  Matcher m(g);
  return m.accept_bytes(s);
}

// The reference mask: every token tried alone on a copy of the matcher.
inline std::vector<uint32_t> brute_mask(const Matcher& m) {
  const Vocabulary& v = m.grammar().vocab();
  std::vector<uint32_t> mask(Matcher::mask_words(v.size()), 0);
  for (int32_t t = 0; t < v.size(); ++t) {
    Matcher c(m);
    if (c.accept_token(t)) mask[static_cast<size_t>(t) / 32] |= 1u << (t % 32);
  }
  return mask;
}

inline std::vector<uint32_t> fast_mask(Matcher& m) {
  std::vector<uint32_t> mask(Matcher::mask_words(m.grammar().vocab().size()), 0xFFFFFFFFu);
  m.fill_mask(mask);
  return mask;
}

inline bool mask_has(const std::vector<uint32_t>& mask, int32_t t) {
  return (mask[static_cast<size_t>(t) / 32] >> (t % 32)) & 1;
}

// Tokens that differ between two masks, for failure messages.
inline std::string mask_diff(const Vocabulary& v, const std::vector<uint32_t>& want, const std::vector<uint32_t>& got) {
  std::string s;
  for (int32_t t = 0; t < v.size(); ++t) {
    if (mask_has(want, t) != mask_has(got, t)) {
      s += (mask_has(want, t) ? " missing:" : " extra:") + std::to_string(t) + "='" + v.token_bytes(t) + "'";
    }
  }
  return s;
}

}  // namespace tmill::grammar::testing
